"""XuCi: is a function word used the same way in two sentences (siamese span head).

    python -m wyjax.finetune --config=xuci.py --workdir=/tmp/xuci \\
        --config.data_dir=WYWEB/xuci --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md).
The published script trains 20 epochs; Table 15 caps fine-tuning at 10.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("xuci")
  config.batch_size = 30
  config.num_epochs = 10
  config.base_learning_rate = 1e-05
  return config

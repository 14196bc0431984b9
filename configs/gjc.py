"""GJC: which Daizhige collection (藏) a paragraph comes from; data from python -m wyjax.tasks build-gjc.

    python -m wyjax.finetune --config=gjc.py --workdir=/tmp/gjc \\
        --config.data_dir=WYWEB/gjc --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("gjc")
  config.batch_size = 48
  config.num_epochs = 6
  config.base_learning_rate = 2e-05
  return config

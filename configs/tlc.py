"""TLC: period and dynasty of a passage (3 and 7 classes); the head predicts the dynasty.

    python -m wyjax.finetune --config=tlc.py --workdir=/tmp/tlc \\
        --config.data_dir=WYWEB/tlc --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("tlc")
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 2e-05
  return config

"""TLC: period and dynasty of a passage (3 and 7 classes); the head predicts the dynasty.

    python -m wyjax.finetune --config=tlc.py --workdir=/tmp/tlc \\
        --config.data_dir=WYWEB/tlc --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("tlc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 2e-05
  return config

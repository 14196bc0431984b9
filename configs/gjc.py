"""GJC: which Daizhige collection (藏) a paragraph comes from; data from python -m wyjax.tasks build-gjc.

    python -m wyjax.finetune --config=gjc.py --workdir=/tmp/gjc \\
        --config.data_dir=WYWEB/gjc --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("gjc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 48
  config.num_epochs = 6
  config.base_learning_rate = 2e-05
  return config

"""IRC: the right explanation of an idiom among four.

    python -m wyjax.finetune --config=irc.py --workdir=/tmp/irc \\
        --config.data_dir=WYWEB/irc --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("irc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 64
  config.num_epochs = 6
  config.base_learning_rate = 1e-05
  return config

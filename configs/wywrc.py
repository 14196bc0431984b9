"""WYWRC: reading comprehension, four options per question, articles cut to fit 512 tokens.

    python -m wyjax.finetune --config=wywrc.py --workdir=/tmp/wywrc \\
        --config.data_dir=WYWEB/wywrc --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("wywrc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 10
  config.num_epochs = 10  # the published script's 40 (batch 10), capped as Table 15 caps fine-tuning
  config.base_learning_rate = 1e-05
  return config

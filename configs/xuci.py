"""XuCi: is a function word used the same way in two sentences (siamese span head).

    python -m wyjax.finetune --config=xuci.py --workdir=/tmp/xuci \\
        --config.data_dir=WYWEB/xuci --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("xuci")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 30
  config.num_epochs = 10  # the published script's 20, capped as Table 15 caps fine-tuning
  config.base_learning_rate = 1e-05
  return config

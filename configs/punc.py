"""PUNC: the punctuation mark after each character; data from python -m wyjax.tasks build-punc.

    python -m wyjax.finetune --config=punc.py --workdir=/tmp/punc \\
        --config.data_dir=WYWEB/punc --config.init=MODEL [--config.seeds=3]

Scored over whole texts by default (a mark the model could not see counts as missed; wyjax's built
texts are at most 510 characters, so the two agree on them); score_chars=510 scores each text's first
510 characters only, as the WYWEB toolkit does.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("punc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 2e-05  # Table 15's: the published script's 1e-6 looks like a typo
  return config

"""GLNER: book names and other proper nouns, entity-level F1.

    python -m wyjax.finetune --config=glner.py --workdir=/tmp/glner \\
        --config.data_dir=WYWEB/glner --config.init=MODEL [--config.seeds=3]
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("glner")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 5e-05
  return config

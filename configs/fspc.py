"""FSPC: holistic sentiment of a four-line poem (5 classes).

    python -m wyjax.finetune --config=fspc.py --workdir=/tmp/fspc \\
        --config.data_dir=WYWEB/fspc --config.init=MODEL [--config.seeds=3]

Scored as the WYWEB toolkit scores it: `accuracy` over each dev poem and each of its lines (the published
61.1 is this number), `macro_f1` averaged over 10 label ids; `poem_accuracy` / `poem_macro_f1` over
whole poems. The submission has whole poems only.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("fspc")
  # The WYWEB scripts' batch size and learning rate; Table 15's schedule (base_config), at most 10 epochs.
  config.batch_size = 48
  config.num_epochs = 6
  config.base_learning_rate = 2e-05
  return config

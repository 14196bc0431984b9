"""IFLYTEK (CLUE): the category of an app from its description, 119 classes; accuracy.

    python -m wyjax.finetune --config=clue/iflytek.py --workdir=/tmp/iflytek \\
        --config.data_dir=CLUE/iflytek --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence,
label (0–118), label_des, id); the submission is submission/iflytek_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("iflytek")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 32
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

"""IFLYTEK (CLUE): the category of an app from its description, 119 classes; accuracy.

    python -m wyjax.finetune --config=clue/iflytek.py --workdir=/tmp/iflytek \\
        --config.data_dir=CLUE/iflytek --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence,
label (0–118), label_des, id). Max length 128 (the CLUE paper's), batch 32, 3 epochs, learning
rate 2e-05 (CLUE's BERT-base setting, docs/finetuning.md); the submission is
submission/iflytek_predict.json. Sizes are for a base model; for the tiny model use
--config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("iflytek")
  config.batch_size = 32
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

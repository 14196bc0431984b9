"""OCNLI (CLUE): natural-language inference written in Chinese; accuracy.

    python -m wyjax.finetune --config=clue/ocnli.py --workdir=/tmp/ocnli \\
        --config.data_dir=CLUE/ocnli --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines:
sentence1, sentence2, label, genre, id; records labelled '-' are counted and left out). Max
length 128 (the CLUE paper's), batch 32, 3 epochs, learning rate 2e-05 (CLUE's baselines sweep
1e-5 to 3e-5); the submission is submission/ocnli_50k_predict.json. Sizes are for a base model;
for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("ocnli")
  config.batch_size = 32
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

"""CMNLI (CLUE): natural-language inference, entailment / neutral / contradiction; accuracy.

    python -m wyjax.finetune --config=clue/cmnli.py --workdir=/tmp/cmnli \\
        --config.data_dir=CLUE/cmnli --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines:
sentence1, sentence2, label; records labelled '-' are counted and left out). Max length 128 (the
CLUE paper's), batch 64, 2 epochs, learning rate 3e-05 (CLUE's BERT-base setting,
docs/finetuning.md); the submission is submission/cmnli_predict.json. Sizes are for a base
model; for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cmnli")
  config.batch_size = 64
  config.num_epochs = 2
  config.learning_rate = 3e-05
  return config

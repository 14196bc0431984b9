"""CSL (CLUE): are the keywords a paper's own? Accuracy.

    python -m wyjax.finetune --config=clue/csl.py --workdir=/tmp/csl \\
        --config.data_dir=CLUE/csl --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: abst,
keyword (a list), label 0/1, id; keywords first, the abstract second). Max length 256 (the CLUE
paper's), batch 16, 5 epochs, learning rate 1e-05 (CLUE's BERT-base setting,
docs/finetuning.md); the submission is submission/csl_predict.json. Sizes are for a base model;
for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("csl")
  config.batch_size = 16
  config.num_epochs = 5
  config.learning_rate = 1e-05
  return config

"""TNEWS (CLUE): the category of a Toutiao news title, 15 classes; accuracy.

    python -m wyjax.finetune --config=clue/tnews.py --workdir=/tmp/tnews \\
        --config.data_dir=CLUE/tnews --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence,
label (a code 100–116), label_desc, keywords, id; labels.json lists the 15). Max length 128 (the
CLUE paper's), batch 16, 3 epochs, learning rate 2e-05 (CLUE's BERT-base setting,
docs/finetuning.md); the submission is submission/tnews11_predict.json. Sizes are for a base
model; for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("tnews")
  config.batch_size = 16
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

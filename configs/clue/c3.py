"""C3 (CLUE): multiple-choice reading comprehension of dialogues (d-) and mixed-genre texts (m-),
2 to 4 choices; accuracy.

    python -m wyjax.finetune --config=clue/c3.py --workdir=/tmp/c3 \\
        --config.data_dir=CLUE/c3 --config.init=MODEL [--config.seeds=3]

The folder holds d-train.json and m-train.json, d-dev.json and m-dev.json (c3-d-train.json ...
also), JSON arrays as released; both kinds of a split are read together. One row per choice:
[CLS] document [SEP] question [SEP] choice [SEP], max length 512, the document cut. Batch 16, 8
epochs, learning rate 2e-5 (CLUE's BERT-base setting, docs/finetuning.md); the submission is
submission/c311_predict.json. Sizes are for a base model; for the tiny model use
--config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("c3")
  config.batch_size = 16
  config.num_epochs = 8
  config.learning_rate = 2e-05
  return config

"""OCNLI (CLUE): natural-language inference written in Chinese; accuracy.

    python -m wyjax.finetune --config=clue/ocnli.py --workdir=/tmp/ocnli \\
        --config.data_dir=CLUE/ocnli --config.init=MODEL [--config.seeds=3]

The folder holds train.50k.json (or train.json), dev.json and test.json as CLUE releases them (JSON
Lines: sentence1, sentence2, label, genre, id; records labelled '-' are counted and left out); the
submission is submission/ocnli_50k_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("ocnli")
  # OCNLI's README's BERT row (CLUE's has none); warm-up: run_classifier.py's default; fixed epochs, last model.
  config.batch_size = 32
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

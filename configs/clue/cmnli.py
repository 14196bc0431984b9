"""CMNLI (CLUE): natural-language inference, entailment / neutral / contradiction; accuracy.

    python -m wyjax.finetune --config=clue/cmnli.py --workdir=/tmp/cmnli \\
        --config.data_dir=CLUE/cmnli --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence1,
sentence2, label; records labelled '-' are counted and left out); the submission is submission/cmnli_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cmnli")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 64
  config.num_epochs = 2
  config.base_learning_rate = 3e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

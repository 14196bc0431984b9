"""AFQMC (CLUE): do two Ant Financial customer questions ask the same thing? Accuracy.

    python -m wyjax.finetune --config=clue/afqmc.py --workdir=/tmp/afqmc \\
        --config.data_dir=CLUE/afqmc --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence1,
sentence2, label 0/1); the submission is submission/afqmc_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("afqmc")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 16
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

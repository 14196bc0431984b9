"""AFQMC (CLUE): do two Ant Financial customer questions ask the same thing? Accuracy.

    python -m wyjax.finetune --config=clue/afqmc.py --workdir=/tmp/afqmc \\
        --config.data_dir=CLUE/afqmc --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines:
sentence1, sentence2, label 0/1). Max length 128 (the CLUE paper's), batch 16, 3 epochs,
learning rate 2e-05 (CLUE's BERT-base setting, docs/finetuning.md); the submission is
submission/afqmc_predict.json. Sizes are for a base model; for the tiny model use
--config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("afqmc")
  config.batch_size = 16
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

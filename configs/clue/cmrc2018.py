"""CMRC 2018 (CLUE): extractive reading comprehension; exact match (CLUE's main metric) and F1.

    python -m wyjax.finetune --config=clue/cmrc2018.py --workdir=/tmp/cmrc2018 \\
        --config.data_dir=CLUE/cmrc2018 --config.init=MODEL [--config.seeds=3]

Scored as CMRC's official evaluation, every reference answer. The folder holds cmrc2018_train.json and
cmrc2018_dev.json (or train.json, dev.json), SQuAD v1.1 JSON as released. Contexts over 512 tokens are
read in windows 128 tokens apart; answers of at most 100 tokens. Unlike run_mrc.py (every half epoch,
best EM + F1), wyjax evaluates at each epoch's end and every eval_every steps, and keeps the best EM.
A test file's (test.json, CLUE's cmrc2018_test_2k.json) predictions are the submission,
submission/cmrc2018_predict.json ({id: answer}).
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cmrc2018")
  # CLUE README's BERT-base row; fixed epochs and the best dev checkpoint, as CLUE's reading-comprehension scripts.
  config.batch_size = 32
  config.num_epochs = 2
  config.base_learning_rate = 3e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "best_dev"
  return config

"""CMRC 2018 (CLUE): extractive reading comprehension, the answer a span of the context; exact
match and F1 as its official evaluation computes them (EM, the main metric, is CLUE's).

    python -m wyjax.finetune --config=clue/cmrc2018.py --workdir=/tmp/cmrc2018 \\
        --config.data_dir=CLUE/cmrc2018 --config.init=MODEL [--config.seeds=3]

The folder holds cmrc2018_train.json and cmrc2018_dev.json (or train.json, dev.json), SQuAD v1.1
JSON as released, every reference answer scored; a test file's (test.json, CLUE's
cmrc2018_test_2k.json) predictions are submission/cmrc2018_predict.json ({id: answer}).
Contexts longer than max length 512 are read in windows 128 tokens apart; answers of at most 100
tokens.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 32, max length 512, 2
epochs, learning rate 3e-5; warm-up 0.1; a fixed number of epochs (patience 0), the best dev
checkpoint kept (keep_checkpoint "best_dev"), as CLUE's reading-comprehension scripts
(run_mrc.py). Different: run_mrc.py evaluates every half epoch and keeps the best EM + F1; wyjax
evaluates at each epoch's end and every eval_every steps, and keeps the best EM (the main
metric). The learning rate is the one for a base-sized model (base_learning_rate); a smaller
model gets a larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cmrc2018")
  config.batch_size = 32
  config.num_epochs = 2
  config.base_learning_rate = 3e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "best_dev"
  return config

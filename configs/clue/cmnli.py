"""CMNLI (CLUE): natural-language inference, entailment / neutral / contradiction; accuracy.

    python -m wyjax.finetune --config=clue/cmnli.py --workdir=/tmp/cmnli \\
        --config.data_dir=CLUE/cmnli --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines:
sentence1, sentence2, label; records labelled '-' are counted and left out); the submission is
submission/cmnli_predict.json.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 64, max length 128, 2
epochs, learning rate 3e-5; warm-up 0.1 (run_classifier.py's default warmup_proportion; the
README gives none); a fixed number of epochs (patience 0) and the last model restored, scored
and submitted (keep_checkpoint "last"), as CLUE's classification scripts train and predict.
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cmnli")
  config.batch_size = 64
  config.num_epochs = 2
  config.base_learning_rate = 3e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

"""CSL (CLUE): are the keywords a paper's own? Accuracy.

    python -m wyjax.finetune --config=clue/csl.py --workdir=/tmp/csl \\
        --config.data_dir=CLUE/csl --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: abst,
keyword (a list), label 0/1, id; the keywords joined by a space first, as CLUE's CslProcessor,
the abstract second); the submission is
submission/csl_predict.json.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 4, max length 256, 5
epochs, learning rate 1e-5; warm-up 0.1 (run_classifier.py's default warmup_proportion; the
README gives none); a fixed number of epochs (patience 0) and the last model restored, scored
and submitted (keep_checkpoint "last"), as CLUE's classification scripts train and predict.
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("csl")
  config.batch_size = 4
  config.num_epochs = 5
  config.base_learning_rate = 1e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

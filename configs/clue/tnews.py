"""TNEWS (CLUE): the category of a Toutiao news title, 15 classes; accuracy.

    python -m wyjax.finetune --config=clue/tnews.py --workdir=/tmp/tnews \\
        --config.data_dir=CLUE/tnews --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence,
label (a code 100–116), label_desc, keywords, id; labels.json lists the 15); the submission is
submission/tnews11_predict.json.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 16, max length 128, 3
epochs, learning rate 2e-5; warm-up 0.1 (run_classifier.py's default warmup_proportion; the
README gives none); a fixed number of epochs (patience 0) and the last model restored, scored
and submitted (keep_checkpoint "last"), as CLUE's classification scripts train and predict.
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("tnews")
  config.batch_size = 16
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

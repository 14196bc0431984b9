"""OCNLI (CLUE): natural-language inference written in Chinese; accuracy.

    python -m wyjax.finetune --config=clue/ocnli.py --workdir=/tmp/ocnli \\
        --config.data_dir=CLUE/ocnli --config.init=MODEL [--config.seeds=3]

The folder holds train.50k.json (or train.json), dev.json and test.json as CLUE releases them
(JSON Lines: sentence1, sentence2, label, genre, id; records labelled '-' are counted and left
out); the submission is submission/ocnli_50k_predict.json.

Settings: CLUE's README has no OCNLI row; OCNLI's own README (CLUEbenchmark/OCNLI) gives BERT's:
batch 32, max length 128, 3 epochs, learning rate 2e-5; warm-up 0.1 (run_classifier.py's default
warmup_proportion; the README gives none); a fixed number of epochs (patience 0) and the last
model restored, scored and submitted (keep_checkpoint "last"), as CLUE's classification scripts
train and predict. The learning rate is the one for a base-sized model (base_learning_rate); a
smaller model gets a larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("ocnli")
  config.batch_size = 32
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

"""CLUEWSC2020 (CLUE): does the pronoun refer to the noun phrase? Accuracy.

    python -m wyjax.finetune --config=clue/cluewsc2020.py --workdir=/tmp/cluewsc2020 \\
        --config.data_dir=CLUE/cluewsc2020 --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: text,
target (span1/span2 text and index), label true/false, idx; the noun phrase is marked _…_ and
the pronoun […] as CLUE's baseline marks them); the submission is
submission/cluewsc11_predict.json.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 8, max length 128, 50
epochs, learning rate 2e-5; warm-up 0.1 (run_classifier.py's default warmup_proportion; the
README gives none); a fixed number of epochs (patience 0) and the last model restored, scored
and submitted (keep_checkpoint "last"), as CLUE's classification scripts train and predict.
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cluewsc2020")
  config.batch_size = 8
  config.num_epochs = 50
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

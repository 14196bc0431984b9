"""CLUEWSC2020 (CLUE): does the pronoun refer to the noun phrase? Accuracy.

    python -m wyjax.finetune --config=clue/cluewsc2020.py --workdir=/tmp/cluewsc2020 \\
        --config.data_dir=CLUE/cluewsc2020 --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: text,
target (span1/span2 text and index), label true/false, idx; the noun phrase is marked _…_ and
the pronoun […] as CLUE's baseline marks them). Max length 128 (the CLUE paper's), batch 16, 10
epochs, learning rate 2e-05 (CLUE's BERT-base setting, docs/finetuning.md); the submission is
submission/cluewsc11_predict.json. Sizes are for a base model; for the tiny model use
--config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cluewsc2020")
  config.batch_size = 16
  config.num_epochs = 10
  config.learning_rate = 2e-05
  return config

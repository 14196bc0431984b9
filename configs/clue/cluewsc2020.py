"""CLUEWSC2020 (CLUE): does the pronoun refer to the noun phrase? Accuracy.

    python -m wyjax.finetune --config=clue/cluewsc2020.py --workdir=/tmp/cluewsc2020 \\
        --config.data_dir=CLUE/cluewsc2020 --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: text, target
(span1/span2 text and index), label true/false, idx; the noun phrase is marked _…_ and the pronoun […],
as CLUE's baseline marks them); the submission is submission/cluewsc11_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cluewsc2020")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 8
  config.num_epochs = 50
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

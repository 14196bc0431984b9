"""TNEWS (CLUE): the category of a Toutiao news title, 15 classes; accuracy.

    python -m wyjax.finetune --config=clue/tnews.py --workdir=/tmp/tnews \\
        --config.data_dir=CLUE/tnews --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: sentence,
label (a code 100–116), label_desc, keywords, id; labels.json lists the 15); the submission is
submission/tnews11_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("tnews")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 16
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

"""CSL (CLUE): are the keywords a paper's own? Accuracy.

    python -m wyjax.finetune --config=clue/csl.py --workdir=/tmp/csl \\
        --config.data_dir=CLUE/csl --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json and test.json as CLUE releases them (JSON Lines: abst, keyword
(a list), label 0/1, id; the keywords joined by a space first, as CLUE's CslProcessor, the abstract
second); the submission is submission/csl_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("csl")
  # CLUE README's BERT-base row; warm-up: run_classifier.py's default; fixed epochs, the last model, as CLUE's scripts.
  config.batch_size = 4
  config.num_epochs = 5
  config.base_learning_rate = 1e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "last"
  return config

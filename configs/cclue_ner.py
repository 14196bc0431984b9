"""C-CLUE NER: persons, places, organisations, offices, books and wars in the dynastic
histories; entity-level micro-F1 and F1 per type.

    python -m wyjax.finetune --config=configs/cclue_ner.py --workdir=/tmp/cclue_ner \\
        --config.data_dir=C-CLUE/data_ner --config.init=MODEL [--config.seeds=3]

data_dir holds train.txt / train-label.txt and dev.txt / dev-label.txt (test.txt optional);
the submission is a label file for test.txt. Sizes are for a base model; for the tiny model
use --config.learning_rate=1e-3."""
from wyjax.train.finetune import base_config


def get_config():
  config = base_config()
  config.task = "cclue_ner"
  config.batch_size = 32
  config.num_epochs = 10
  config.learning_rate = 5e-05
  return config

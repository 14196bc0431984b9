"""C-CLUE relations: the predicate between a marked subject and object (accuracy, macro-F1).

    python -m wyjax.finetune --config=configs/cclue_re.py --workdir=/tmp/cclue_re \\
        --config.data_dir=C-CLUE/raw_data_guwen --config.init=MODEL [--config.seeds=3]

data_dir holds train_data.json, dev_data.json and test_data.json. The text is encoded with its
subject in 「」 and its object in 『』; the predicates are those of train and dev. Sizes are
for a base model; for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetune import base_config


def get_config():
  config = base_config()
  config.task = "cclue_re"
  config.batch_size = 32
  config.num_epochs = 5
  config.learning_rate = 2e-05
  return config

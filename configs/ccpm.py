"""CCPM: the verse line, of four, that a modern-Chinese description translates (accuracy).

    python -m wyjax.finetune --config=configs/ccpm.py --workdir=/tmp/ccpm \\
        --config.data_dir=CCPM --config.init=MODEL       # Cls model (the default)
    python -m wyjax.finetune --config=configs/ccpm.py:match ...  # Match model

data_dir holds train.jsonl, valid.jsonl and test_public.jsonl as released. The CCPM paper's two
models: Cls encodes description and line together and scores [CLS] (softmax over the four);
Match encodes them apart and scores the cosine of their mean-pooled vectors.
Sizes are for a base model; for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetune import base_config


def get_config(model: str = "cls"):
  config = base_config()
  config.task = {"cls": "ccpm", "match": "ccpm_match"}[model]
  config.batch_size = 32
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

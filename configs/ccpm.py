"""CCPM: the verse line, of four, that a modern-Chinese description translates (accuracy).

    python -m wyjax.finetune --config=ccpm.py --workdir=/tmp/ccpm \\
        --config.data_dir=CCPM --config.init=MODEL       # Cls (the default)
    python -m wyjax.finetune --config=ccpm.py:match ...         # Match
    python -m wyjax.finetune --config=ccpm.py:softmax ...       # Cls scores, softmax over the four
    python -m wyjax.finetune --config=ccpm.py:match_shared ...  # Match with one encoder

data_dir holds train.jsonl, valid.jsonl and test_public.jsonl as released; the submission is
submission/CCPM.jsonl. Cls classifies each (translation, line) pair and picks the most probable match;
Match encodes translation and lines with two encoders and picks the highest cosine (wyjax/tasks/ccpm.py;
docs/finetuning.md compares the four).
"""

from wyjax.train.finetuning import base_config

TASKS = {"cls": "ccpm", "match": "ccpm_match", "softmax": "ccpm_softmax", "match_shared": "ccpm_match_shared"}


def get_config(model: str = "cls"):
  config = base_config(TASKS[model])
  config.batch_size = 32
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  return config

"""PUNC: the punctuation mark after each character; data from python -m wyjax.tasks build-punc.

    python -m wyjax.finetune --config=punc.py --workdir=/tmp/punc \\
        --config.data_dir=WYWEB/punc --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md).
The published script's lr 1e-6 looks like a typo (20-50x below every other task); Table 15's
2e-5 is used.

Scored over whole texts by default (a mark the model could not see counts as missed; wyjax's
built PUNC texts are at most 510 characters, so the two agree on them); score_chars=510 scores
each text's first 510 characters only, as the toolkit does.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("punc")
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 2e-05
  return config

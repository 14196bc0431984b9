"""IRC: the right explanation of an idiom among four.

    python -m wyjax.finetune --config=irc.py --workdir=/tmp/irc \\
        --config.data_dir=WYWEB/irc --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("irc")
  config.batch_size = 64
  config.num_epochs = 6
  config.base_learning_rate = 1e-05
  return config

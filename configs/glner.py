"""GLNER: book names and other proper nouns, entity-level F1.

    python -m wyjax.finetune --config=glner.py --workdir=/tmp/glner \\
        --config.data_dir=WYWEB/glner --config.init=MODEL [--config.seeds=3]

Hyper-parameters: the WYWEB scripts' batch size and learning rate, Table 15's schedule
(warm-up 0.1, linear decay, weight decay 0.01, eps 1e-6, clip 1.0, at most 10 epochs).
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("glner")
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 5e-05
  return config

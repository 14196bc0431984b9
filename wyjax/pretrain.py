"""MLM pretraining from a config.

    python -m wyjax.pretrain --config=configs/pretrain/deberta_tiny.py --workdir=DIR [--config.x=y]

Rerunning the same command resumes from the workdir's latest checkpoint.
"""
from absl import app, flags, logging
from ml_collections import config_flags

from wyjax.train import pretrain

_CONFIG = config_flags.DEFINE_config_file("config", None, "Pretraining config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run folder: checkpoints, metrics.jsonl, TensorBoard.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  result = pretrain.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  if result:
    print("final evaluation: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))


if __name__ == "__main__":
  app.run(main)

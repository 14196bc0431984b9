"""Fine-tune on one WYWEB task.

    python -m wyjax.finetune --config=configs/tlc.py --workdir=/tmp/tlc \\
        --config.data_dir=path/to/wyweb/tlc --config.init=HF_FOLDER_OR_WYJAX_WORKDIR [--config.seeds=3]
"""
import json

from absl import app, flags, logging
from ml_collections import config_flags

from wyjax.train import finetune

_CONFIG = config_flags.DEFINE_config_file("config", None, "A configs/<task>.py file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (runs, results.json, submission).", required=True)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO; dev scores are in metrics.jsonl
  results = finetune.finetune(_CONFIG.value, _WORKDIR.value)
  summary = {k: results[k] for k in ("task", "main_metric", "dev_mean", "dev_std", "dev", "test", "majority_baseline")}
  print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
  app.run(main)

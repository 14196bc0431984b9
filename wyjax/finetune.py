"""Fine-tune on one task (WYWEB, CCPM, C-CLUE; AC-EVAL runs its zero- and few-shot protocols).

    python -m wyjax.finetune --config=configs/tlc.py --workdir=/tmp/tlc \\
        --config.data_dir=path/to/wyweb/tlc --config.init=HF_FOLDER_OR_WYJAX_WORKDIR [--config.seeds=3]
"""
import json

from absl import app, flags, logging
from ml_collections import config_flags

from wyjax.train import aceval, finetune

_CONFIG = config_flags.DEFINE_config_file("config", None, "A configs/<task>.py file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (runs, results.json, submission).", required=True)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO; dev scores are in metrics.jsonl
  run = aceval.run if _CONFIG.value.task == "aceval" else finetune.finetune
  results = run(_CONFIG.value, _WORKDIR.value)
  summary = {k: results[k] for k in ("task", "main_metric", "dev_mean", "dev_std", "dev", "test", "majority_baseline")}
  print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
  app.run(main)

"""Fine-tune on one task (WYWEB, CCPM, C-CLUE, CLUE; AC-EVAL runs its own protocols).

    python -m wyjax.finetune --config=tlc.py --workdir=/tmp/tlc \\
        --config.data_dir=path/to/wyweb/tlc --config.init=HF_FOLDER_OR_WYJAX_WORKDIR [--config.seeds=3]

Rerunning keeps finished seeds and resumes an unfinished one exactly; a changed config is
refused unless --accept_config_change, changed data files (their sizes and SHA-256 are
recorded) unless --fresh_start, which sets the earlier runs aside and trains afresh.
SIGTERM/SIGINT checkpoint the running seed and exit with 128 + the signal number.

    python -m wyjax.finetune --config=tlc.py --config.data_dir=... --compile_only=v5p:2x2x1

compiles the task's train step for a TPU topology, a GPU (h100, h200, a100) or 'local' and reports its cost, as
`wyjax.pretrain --compile_only` does (docs/scaling.md); nothing is trained or written.
"""

import json

from absl import app, flags

from wyjax.aot import report
from wyjax.core import cli, config_files, logs
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.train import finetuning

_CONFIG = config_files.DEFINE_config(
  "config", None, "A task config: a name (tlc.py, ccpm.py:match) or a file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (runs, results.json, submission).")
_ACCEPT = flags.DEFINE_bool(
  "accept_config_change", False, "Continue a workdir whose runs were made with another config (the changes are logged)."
)
_FRESH_START = flags.DEFINE_bool(
  "fresh_start",
  False,
  "Set the workdir's earlier runs aside (WORKDIR/previous-<time>/) and train afresh: "
  "needed when its data files changed.",
)
_COMPILE_ONLY = flags.DEFINE_string(
  "compile_only",
  None,
  "Only compile the train step for this TPU topology (v5p:2x2x1, ...), these "
  "GPUs of one host (h100, h200, a100; h100:8) or 'local', and report its cost; "
  "trains nothing.",
)


def main(argv):
  del argv
  if _WORKDIR.value:  # before its log goes there (with --compile_only too): a refused workdir gets no file
    finetuning.check_workdir(finetuning.with_options(_CONFIG.value), _WORKDIR.value)
  with cli.nothing_left_if_refused(_WORKDIR.value, "finetune.log"):
    _run()


def _run():
  logs.to_file(_WORKDIR.value, "finetune")
  use_compilation_cache(_COMPILE_ONLY.value)
  if _COMPILE_ONLY.value:
    report.print_report(finetuning.compile_only(_CONFIG.value, _COMPILE_ONLY.value))
    return
  if not _WORKDIR.value:
    raise app.UsageError("--workdir is required (except with --compile_only)")
  results = finetuning.finetune(
    _CONFIG.value, _WORKDIR.value, accept_config_change=_ACCEPT.value, fresh_start=_FRESH_START.value
  )
  shown = ("task", "main_metric", "dev_mean", "dev_std", "dev", "test", "majority_baseline", "linear_baseline")
  summary = {k: results[k] for k in shown if k in results}  # AC-EVAL's protocols have no linear baseline
  print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
  cli.run(main)

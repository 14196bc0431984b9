"""Fine-tune and evaluate one model on every task that has data; write the leaderboard.

    python -m wyjax.benchmark --init=MODEL --data_root=TASKS --out=DIR [--tasks=tlc,glner|clue]
        [--learning_rate=…] [--num_epochs=…] [--seeds=3] [--no_pretraining_baseline]

data_root holds one folder per dataset in its original format: the WYWEB tasks (tlc/, glner/,
…), ccpm/ (both CCPM models), cclue_ner/, cclue_re/ and aceval/ (dev/ and test/ CSVs), or
CLUE's (afqmc/, tnews/, …, with --tasks=clue); tasks without a folder are skipped. --tasks
takes task names and the groups wyweb, classical and clue. Each task runs with its config
(configs/<task>.py, configs/clue/<task>.py) plus the overrides given here.
Writes DIR/<task>/ (runs, results.json, submission), DIR/leaderboard.{md,json} and
DIR/plots/<task>_{confusion,curve}.png (wyjax/train/suite.py). A task that fails does
not stop the others: it is listed in the leaderboard with its error and the command exits 1
at the end.
"""

import json
import pathlib
import sys

from absl import flags

from wyjax.core import cli, logs
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.core.ranges import INT32
from wyjax.train import suite

_INIT = flags.DEFINE_string("init", "", "transformers folder or wyjax workdir (empty: fresh tiny model).")
_DATA_ROOT = flags.DEFINE_string("data_root", None, "Folder with one subfolder per task.", required=True)
_OUT = flags.DEFINE_string("out", None, "Output folder.", required=True)
_TASKS = flags.DEFINE_list(
  "tasks", ["wyweb", "classical"], "Tasks (or groups: wyweb, classical, clue) to run, those with data."
)
_NAME = flags.DEFINE_string("name", None, "Model name in the table (default: the init folder's name).")
# Each override's range, as the task configs' (config_values), checked as the flags are parsed; a step
# count of 0 would mean whole epochs.
_LR = flags.DEFINE_float(
  "learning_rate", None, "Override every task's learning rate (default: chosen from the model's size).", lower_bound=0
)
_EPOCHS = flags.DEFINE_integer(
  "num_epochs", None, "Override every task's number of epochs.", lower_bound=1, upper_bound=INT32
)
_STEPS = flags.DEFINE_integer(
  "num_train_steps", None, "Train this many steps per task instead of epochs.", lower_bound=1, upper_bound=INT32
)
_EVAL_EVERY = flags.DEFINE_integer(
  "eval_every", None, "Override the evaluation interval (steps).", lower_bound=1, upper_bound=INT32
)
_SEEDS = flags.DEFINE_integer("seeds", None, "Seeds per task.", lower_bound=1, upper_bound=INT32)
_BATCH = flags.DEFINE_integer("batch_size", None, "Override every task's batch size.", lower_bound=1, upper_bound=INT32)
_NO_PRETRAINING = flags.DEFINE_bool(
  "no_pretraining_baseline",
  False,
  "Also fine-tune every task from random weights (--init's architecture and "
  "vocabulary, the same recipe and seeds): the board's 'same model, no pretraining' "
  "row. Doubles the time.",
)
_ACCEPT = flags.DEFINE_bool(
  "accept_config_change", False, "Continue task runs in --out made with other settings (the changes are logged)."
)


def main(argv):
  del argv
  suite.check_out(_INIT.value, _DATA_ROOT.value, _OUT.value)  # before its log goes there: a refused --out gets no file
  logs.to_file(_OUT.value, "benchmark")
  name = _NAME.value or (pathlib.Path(_INIT.value).name if _INIT.value else "fresh tiny model")
  use_compilation_cache()
  board = suite.run(
    init=_INIT.value,
    data_root=_DATA_ROOT.value,
    out=_OUT.value,
    tasks=suite.task_names(_TASKS.value),
    name=name,
    accept_config_change=_ACCEPT.value,
    no_pretraining=_NO_PRETRAINING.value,
    learning_rate=_LR.value,
    num_epochs=_EPOCHS.value,
    num_train_steps=_STEPS.value,
    eval_every=_EVAL_EVERY.value,
    seeds=_SEEDS.value,
    batch_size=_BATCH.value,
  )
  print((pathlib.Path(_OUT.value) / "leaderboard.md").read_text(encoding="utf-8"))
  print(json.dumps({"written": str(pathlib.Path(_OUT.value).resolve())}))
  if board["failed"]:
    print(f"wyjax: {len(board['failed'])} tasks failed: {', '.join(board['failed'])}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)

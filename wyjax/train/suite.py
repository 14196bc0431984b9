"""One model on many tasks: fine-tune each task that has data, then leaderboard and plots
(wyjax/benchmark.py is its command line; the demo calls it too)."""
import logging
import pathlib

from wyjax.tasks import clue, datasets, leaderboard
from wyjax.tasks.registry import TASKS
from wyjax.core import config_files, guards
from wyjax.train import aceval, finetuning

# Tasks whose config is not configs/<task>.py: another task's file with an argument
# (configs/ccpm.py:match), or a benchmark's folder (configs/clue/tnews.py).
CONFIG_FILES = {"ccpm_match": "ccpm:match", "ccpm_softmax": "ccpm:softmax", "ccpm_match_shared": "ccpm:match_shared",
                "cclue_re_given_entities": "cclue_re:given_entities", "cclue_spo": "cclue_re:spo",
                **{t.name: f"clue/{t.name}" for t in clue.TASKS}}

# --tasks groups: each benchmark's tasks, in its leaderboard's order.
GROUPS = {"wyweb": leaderboard.COLUMNS, "classical": leaderboard.CLASSICAL_COLUMNS, "clue": leaderboard.CLUE_COLUMNS}


def task_names(entries) -> list[str]:
  """Task names and groups (wyweb, classical, clue) as the tasks they name, in order."""
  return [t for entry in entries for t in GROUPS.get(entry, [entry]) if entry not in GROUPS or t in TASKS]


def task_config(task: str, **overrides):
  """The task's config (CONFIG_FILES) with the overrides that are not None."""
  config = config_files.load(CONFIG_FILES.get(task, task))
  for key, value in overrides.items():
    if value is not None:
      setattr(config, key, value)
  return config


def run(*, init: str, data_root, out, tasks, name: str, accept_config_change: bool = False, **overrides) -> dict:
  """Fine-tunes every task of `tasks` that has a folder in data_root; returns leaderboard.json.

  A task reads data_root/<its dataset> (CCPM's models share ccpm/). C-CLUE's triple
  extraction runs after its predicate classification, on its predictions. AC-EVAL runs last:
  dev_finetune from `init`, and transfer from the last multiple-choice run here (CCPM
  softmax, else WYWRC, else IRC).
  A task that fails is logged with its error and shown failed in the leaderboard; the others
  still run (leaderboard.json's `failed`: a caller should exit non-zero when it is not empty).
  Writes out/<task>/ (runs, results.json, submission), out/leaderboard.{md,json} and
  out/plots/<task>_{confusion,curve}.png. A rerun keeps the tasks' finished seeds
  (wyjax.train.finetuning).
  """
  data_root, out = pathlib.Path(data_root), pathlib.Path(out)
  unknown = sorted(set(tasks) - set(TASKS))
  if unknown:
    raise ValueError(f"unknown tasks {unknown}; benchmark tasks are {sorted(TASKS)}")
  results, failed = {}, {}
  for task in sorted(tasks, key=lambda t: (t == "aceval", t == "cclue_spo")):
    folder = data_root / TASKS[task].data
    if not folder.is_dir() or datasets.file_of(TASKS[task].data, folder, "train") is None:
      logging.warning("%s: no %s data, skipped", folder, task)
      continue
    config = task_config(task, init=init, data_dir=str(folder), **overrides)
    if task == "cclue_spo" and "cclue_re" in results:  # C-CLUE's pipeline: on its predicates
      config.predicates_from = str(out / "cclue_re")
    if task == "aceval":
      choice_runs = [r["best_run"] for t, r in results.items() if TASKS[t].head == "choice"]
      config.transfer_init = choice_runs[-1] if choice_runs else ""
    print(f"fine-tuning {task} ...", flush=True)
    try:
      if task == "aceval":
        results[task] = aceval.run(config, out / task)
      else:
        results[task] = finetuning.finetune(config, out / task, accept_config_change=accept_config_change)
    except guards.Interrupted:
      raise
    except Exception as e:  # noqa: BLE001  (one task's failure must not cost the others)
      logging.exception("%s failed", task)
      failed[task] = f"{type(e).__name__}: {e}"
      print(f"{task} FAILED: {failed[task]}", flush=True)
  if not results and not failed:
    raise FileNotFoundError(f"{data_root}: no task folder with a train file among {list(tasks)}")
  board = leaderboard.write(out, name, results, failed)
  plots = out / "plots"
  plots.mkdir(exist_ok=True)
  for task, r in results.items():
    if r["labels"]:  # WYWMT generates text: no classes
      leaderboard.plot_confusion(plots / f"{task}_confusion.png", r["labels"], r["dev_confusion"],
                                 f"{task.upper()} dev (seed {r['best_seed']})")
    if task != "aceval":  # AC-EVAL trains folds without a dev curve
      leaderboard.plot_curves(plots / f"{task}_curve.png", pathlib.Path(r["best_run"]) / "metrics.jsonl",
                              r["main_metric"], f"{task.upper()} (seed {r['best_seed']})")
  return board

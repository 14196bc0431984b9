"""One model on many tasks: each task that has data fine-tuned, then a leaderboard and plots.

wyjax/benchmark.py is its command line; the demo calls it too.
"""

import logging
import pathlib

from wyjax.core import config_files, guards, io_paths
from wyjax.tasks import datasets, leaderboard
from wyjax.tasks.registry import TASKS, boards
from wyjax.train import config_values, finetuning


def task_names(entries) -> list[str]:
  """The tasks of `entries`: a task name as itself, a board (wyweb, classical, clue) as its tasks in order."""
  groups = boards()
  return [t for entry in entries for t in groups.get(entry, [entry])]


def task_config(task: str, **overrides):
  """The task's packaged config (Task.config) with the overrides that are not None."""
  config = finetuning.with_options(config_files.load(TASKS[task].config_name))
  for key, value in overrides.items():
    if value is not None:
      setattr(config, key, value)
  return config


def check_out(init: str, data_root, out) -> None:
  """Refuses an `out` that is no folder, or is, holds or lies inside what the benchmark reads."""
  io_paths.check_folder("--out", out)
  io_paths.check_apart({"--out": out}, {"--init": init, "--data_root": data_root}, "the benchmark")


def run(
  *,
  init: str,
  data_root,
  out,
  tasks,
  name: str,
  accept_config_change: bool = False,
  no_pretraining: bool = False,
  per_task: dict[str, dict] | None = None,
  **overrides,
) -> dict:
  """Fine-tunes every task of `tasks` that has a folder in data_root; returns leaderboard.json.

  A task reads data_root/<its folder> (Task.files; CCPM's models share ccpm/). A task that
  takes inputs from the others' runs (Task.from_other_runs: C-CLUE's triples from its
  predicate run, AC-EVAL's transfer from the last multiple-choice run) runs after them.
  A task that fails is logged with its error and shown failed in the leaderboard; the others
  still run (leaderboard.json's `failed`: a caller should exit non-zero when it is not empty).
  With no_pretraining, every task is fine-tuned a second time from random weights (init's
  architecture and vocabulary, config.init_weights="random"; the same recipe and seeds) into
  out/no_pretraining/<task>/: the board's "same model, no pretraining" row. per_task: {task:
  overrides} on top of the others for that task (the demo's steps per task).
  Writes out/<task>/ (runs, results.json, submission), out/leaderboard.{md,json} and
  out/plots/<task>_{confusion,curve}.png. A rerun keeps the tasks' finished seeds
  (wyjax.train.finetuning).
  """
  data_root, out = pathlib.Path(data_root), pathlib.Path(out)
  unknown = sorted(set(tasks) - set(TASKS))
  if unknown:
    raise ValueError(f"unknown tasks {unknown}; benchmark tasks are {sorted(TASKS)}")
  if not data_root.is_dir():
    raise FileNotFoundError(f"--data_root {data_root}: no such folder")
  check_out(init, data_root, out)
  overrides_of = {task: {**overrides, **(per_task or {}).get(task, {})} for task in tasks}
  for task in tasks:  # a bad override is one error now, not one failed task after another
    config_values.check(task_config(task, **overrides_of[task]), config_values.FINETUNING)
  runs = dict(init=init, data_root=data_root, accept_config_change=accept_config_change, overrides_of=overrides_of)
  results, failed = finetune_all(out=out, **runs)
  twin = {}
  if no_pretraining:
    twin, twin_failed = finetune_all(
      out=out / "no_pretraining", init_weights="random", label="from random weights", **runs
    )
    failed |= {f"{task} ({leaderboard.TWIN})": error for task, error in twin_failed.items()}
  if not results and not failed:
    raise FileNotFoundError(f"{data_root}: no task folder with a train file among {list(tasks)}")
  board = leaderboard.write(out, name, results, failed, twin)
  plots = out / "plots"
  plots.mkdir(exist_ok=True)
  for task, r in results.items():
    if r["labels"]:  # WYWMT generates text: no classes
      leaderboard.plot_confusion(
        plots / f"{task}_confusion.png", r["labels"], r["dev_confusion"], f"{task.upper()} dev (seed {r['best_seed']})"
      )
    if (pathlib.Path(r["best_run"]) / "metrics.jsonl").exists():  # (AC-EVAL trains folds without a dev curve)
      leaderboard.plot_curves(
        plots / f"{task}_curve.png",
        pathlib.Path(r["best_run"]) / "metrics.jsonl",
        r["main_metric"],
        f"{task.upper()} (seed {r['best_seed']})",
      )
  return board


def finetune_all(
  *,
  init: str,
  data_root: pathlib.Path,
  out: pathlib.Path,
  overrides_of: dict[str, dict],
  accept_config_change: bool,
  label: str = "",
  **common,
) -> tuple[dict, dict]:
  """({task: results.json}, {task: error}) of fine-tuning into out/<task>/ each task of overrides_of that has data.

  overrides_of: {task: its config overrides}, to which `common` adds.
  """
  results, failed = {}, {}
  for task in sorted(overrides_of, key=lambda t: TASKS[t].from_other_runs is not None):
    folder = data_root / TASKS[task].files.name
    if not folder.is_dir() or datasets.file_of(TASKS[task].files, folder, "train") is None:
      logging.warning("%s: no %s data, skipped", folder, task)
      continue
    config = task_config(task, init=init, data_dir=str(folder), **overrides_of[task], **common)
    if TASKS[task].from_other_runs:
      config.update(TASKS[task].from_other_runs([(TASKS[t], r) for t, r in results.items()], out))
    print(f"fine-tuning {task}{' ' + label if label else ''} ...", flush=True)
    try:
      results[task] = finetuning.finetune(config, out / task, accept_config_change=accept_config_change)
    except guards.Interrupted:
      raise
    except Exception as e:  # noqa: BLE001  (one task's failure must not cost the others)
      failed[task] = f"{type(e).__name__}: {e}"
      logging.exception("%s failed: %s", task, failed[task])  # one line on the terminal, the traceback in the log
  return results, failed

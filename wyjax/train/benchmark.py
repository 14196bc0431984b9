"""One model on many tasks: fine-tune each task that has data, then leaderboard and plots
(wyjax/benchmark.py is its command line; the demo calls it too)."""
import importlib.util
import logging
import pathlib

from wyjax.tasks import datasets, leaderboard
from wyjax.tasks.tasks import TASKS
from wyjax.train import finetune

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


def task_config(task: str, **overrides):
  """configs/<task>.py's get_config() with the overrides that are not None."""
  spec = importlib.util.spec_from_file_location(f"wyjax_config_{task}", CONFIGS / f"{task}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  for key, value in overrides.items():
    if value is not None:
      setattr(config, key, value)
  return config


def run(*, init: str, data_root, out, tasks, name: str, **overrides) -> dict:
  """Fine-tunes every task of `tasks` that has a folder in data_root; returns leaderboard.json.

  Writes out/<task>/ (runs, results.json, submission), out/leaderboard.{md,json} and
  out/plots/<task>_{confusion,curve}.png.
  """
  data_root, out = pathlib.Path(data_root), pathlib.Path(out)
  unknown = sorted(set(tasks) - set(TASKS))
  if unknown:
    raise ValueError(f"unknown tasks {unknown}; benchmark tasks are {sorted(TASKS)}")
  results = {}
  for task in tasks:
    if datasets.file_of(task, data_root / task, "train") is None:
      logging.warning("%s: no %s data, skipped", data_root / task, task)
      continue
    config = task_config(task, init=init, data_dir=str(data_root / task), **overrides)
    print(f"fine-tuning {task} ...", flush=True)
    results[task] = finetune.finetune(config, out / task)
  if not results:
    raise FileNotFoundError(f"{data_root}: no task folder with a train file among {list(tasks)}")
  board = leaderboard.write(out, name, results)
  plots = out / "plots"
  plots.mkdir(exist_ok=True)
  for task, r in results.items():
    if r["labels"]:  # WYWMT generates text: no classes
      leaderboard.plot_confusion(plots / f"{task}_confusion.png", r["labels"], r["dev_confusion"],
                                 f"{task.upper()} dev (seed {r['best_seed']})")
    leaderboard.plot_curves(plots / f"{task}_curve.png", pathlib.Path(r["best_run"]) / "metrics.jsonl",
                            r["main_metric"], f"{task.upper()} (seed {r['best_seed']})")
  return board

"""Fine-tuning learning rate on the tiny model: the sweep behind learning_rates.TINY_LEARNING_RATE.

    python benchmarks/learning_rate_sweep.py --tlc=WYWEB/tlc [--ccpm=DATA/ccpm]
        [--ccpm_tasks=ccpm,ccpm_match_shared] [--init=~/.cache/wyjax/demo/pretrain]
        [--rates=2e-5,1e-4,3e-4,1e-3,3e-3] [--steps=300]

- --init: the pretrained tiny DeBERTa (default: the demo's, which `python -m wyjax.demo` makes).
- Each task is fine-tuned from its packaged config at each rate for --steps steps, one seed, the
  best dev checkpoint kept. CCPM's dev is cut from --ccpm's train.jsonl: train its first
  --ccpm_train records, dev its last --ccpm_dev.
- Prints a markdown table per task: the dev main metric, the first and last logged training loss,
  whether learning_rates.LossWatch warned, and seconds. Runs go to --out; a rerun reuses them.
"""

import argparse
import json
import logging
import os
import pathlib
import platform
import time

import jax

from wyjax.core import checkpoints, storage
from wyjax.models import EncoderConfig
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, learning_rates, suite


def ccpm_folder(source: pathlib.Path, out: pathlib.Path, train: int, dev: int) -> pathlib.Path:
  lines = (source / "train.jsonl").read_text(encoding="utf-8").splitlines()
  out.mkdir(parents=True, exist_ok=True)
  (out / "train.jsonl").write_text("\n".join(lines[:train]) + "\n", encoding="utf-8")
  (out / "valid.jsonl").write_text("\n".join(lines[-dev:]) + "\n", encoding="utf-8")
  return out


def warned(metrics: pathlib.Path, total_steps: int, rate: float, model: EncoderConfig) -> bool:
  """Whether LossWatch warned on this run's logged losses (replayed quietly: the run logged it)."""
  watch = learning_rates.LossWatch(total_steps, rate, model)
  records = [json.loads(line) for line in metrics.read_text().splitlines()]
  logging.disable(logging.WARNING)
  try:
    return any([watch.push(r["step"], r["loss"]) for r in records if "loss" in r])
  finally:
    logging.disable(logging.NOTSET)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--init", default=str(storage.cache_dir() / "demo" / "pretrain"))
  parser.add_argument("--tlc", default="", help="a TLC folder (train.tsv, dev.tsv)")
  parser.add_argument("--ccpm", default="", help="CCPM as released (its train.jsonl is split here)")
  parser.add_argument(
    "--ccpm_tasks",
    default="ccpm,ccpm_match_shared",
    help="CCPM's models to sweep: ccpm (Cls, the report's), ccpm_match, ccpm_softmax, ...",
  )
  parser.add_argument("--ccpm_train", type=int, default=10000)
  parser.add_argument("--ccpm_dev", type=int, default=1000)
  parser.add_argument("--rates", default="2e-5,1e-4,3e-4,1e-3,3e-3")
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--log_every", type=int, default=50)  # the configs' default: the warning as a run gives it
  parser.add_argument("--out", default="/tmp/wyjax-learning-rate-sweep")
  args = parser.parse_args()
  out = pathlib.Path(args.out)
  folders = {"tlc": args.tlc and pathlib.Path(args.tlc)}
  if args.ccpm:
    ccpm = ccpm_folder(pathlib.Path(args.ccpm), out / "ccpm_data", args.ccpm_train, args.ccpm_dev)
    folders.update({task: ccpm for task in args.ccpm_tasks.split(",")})
  model = EncoderConfig.from_dict(checkpoints.read_model_info(args.init)[0])
  size = learning_rates.layer_parameters(model)
  print(
    f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} on "
    f"{jax.devices()[0].platform}; init {args.init} ({learning_rates.describe(size)}); {args.steps} steps, "
    f"batch 32, warm-up 10%; the size rule gives {learning_rates.rate_for(size, 2e-5):g}",
    flush=True,
  )
  for task, folder in folders.items():
    if not folder:
      continue
    print(
      f"\n| {task} rate | dev {TASKS[task].main_metric} ×100 | first → last logged loss | "
      "flat-loss warning | seconds |\n|---:|---:|---|---|---:|",
      flush=True,
    )
    for rate in map(float, args.rates.split(",")):
      workdir = out / f"{task}_{rate:g}"
      start = time.perf_counter()
      results = finetuning.finetune(
        suite.task_config(
          task,
          data_dir=str(folder),
          init=args.init,
          learning_rate=rate,
          num_train_steps=args.steps,
          eval_every=args.steps,
          batch_size=32,
          log_every=args.log_every,
        ),
        workdir,
      )
      seconds = time.perf_counter() - start
      metrics = workdir / "seed_0" / "metrics.jsonl"
      losses = [r["loss"] for r in map(json.loads, metrics.read_text().splitlines()) if "loss" in r]
      print(
        f"| {rate:g} | {100 * results['dev'][results['main_metric']]:.2f} "
        f"(majority {100 * results['majority_baseline'][results['main_metric']]:.2f}) | "
        f"{losses[0]:.3f} → {losses[-1]:.3f} | {'yes' if warned(metrics, args.steps, rate, model) else 'no'} | "
        f"{seconds:.0f} |",
        flush=True,
      )


if __name__ == "__main__":
  main()

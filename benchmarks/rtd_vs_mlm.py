"""Replaced-token detection against MLM on this CPU: the demo's tiny DeBERTa pretrained on chinese-poetry.

    python benchmarks/rtd_vs_mlm.py --out=/tmp/rtd_vs_mlm [--seeds=3]

1. Step times: MLM's and RTD's train steps (GDES and shared embeddings) compiled in one process and
   timed interleaved, so that a busy machine slows them alike. RTD's steps at MLM's wall time are
   1,500 × t_mlm / t_rtd.
2. Pretraining, for each seed (config.seed): MLM, the demo's recipe (configs/pretrain/deberta_tiny.py,
   1,500 steps); RTD with GDES and RTD with shared embeddings at MLM's wall time (warmup, evaluations
   and checkpoints scaled to their steps); RTD with GDES at MLM's 1,500 steps. The demo's two probes
   run at every evaluation.
3. Each pretrained model fine-tuned with the demo's recipe (PUNC 300 steps, TLC 750, learning rate
   1e-3, batch 32, fine-tuning seed 0).

Runs MLM and RTD-GDES seed by seed first, then the other variants seed by seed (RTD-GDES with 15% of
tokens masked, ELECTRA's rate, beside the demo's 30%, too). Prints a markdown table (mean ± std
over the pretraining seeds, ×100; each seed's PUNC test F1) and writes OUT/results.json after each run,
with every run's folder under OUT. A rerun reuses every finished run.
"""

import argparse
import json
import math
import pathlib
import platform
import time

import jax
import numpy as np
from commands import command, mean_std  # benchmarks/, beside this file

from wyjax.core import config_files
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.tasks import leaderboard
from wyjax.tasks.builders import poetry
from wyjax.train import pretraining, suite

DEMO = "pretrain/deberta_tiny.py"
FINETUNING_STEPS = {poetry.PUNCTUATION: 300, poetry.DYNASTY: 750}
VARIANTS = {  # name: (config overrides, whether its steps are MLM's wall time's)
  "MLM (the demo's recipe)": ({"objective": "mlm"}, False),
  "RTD, GDES, equal wall time": ({"objective": "rtd", "rtd.embedding_sharing": "gdes"}, True),
  "RTD, shared embeddings, equal wall time": ({"objective": "rtd", "rtd.embedding_sharing": "shared"}, True),
  "RTD, GDES, equal steps": ({"objective": "rtd", "rtd.embedding_sharing": "gdes"}, False),
  "RTD, GDES, 15% masked (ELECTRA's rate), equal wall time": ({"objective": "rtd", "masking.rate": 0.15}, True),
}
MLM = next(iter(VARIANTS))


def step_seconds(overrides: list[dict], *, repeats: int = 6, steps: int = 10) -> list[float]:
  """The median seconds of a train step of each of `overrides`' configs, timed interleaved."""
  runs = []
  for changes in overrides:
    config = config_files.load(DEMO)
    config.update_from_flattened_dict(changes)
    run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), config.corpus.sequence_length)
    state = run.program.init_state(jax.random.key(0))
    shape = (config.batch_size, config.corpus.sequence_length)
    batch = jax.device_put(np.random.default_rng(0).integers(5, config.model.vocab_size, shape, np.int32))
    state, metrics = run.train_step(state, batch)  # compiles
    jax.block_until_ready(metrics)
    runs.append([run.train_step, state, batch])
  times = [[] for _ in runs]
  for _ in range(repeats):
    for run, seconds in zip(runs, times):
      start = time.perf_counter()
      for _ in range(steps):
        run[1], metrics = run[0](run[1], run[2])
      jax.block_until_ready(metrics)
      seconds.append((time.perf_counter() - start) / steps)
  return [float(np.median(t)) for t in times]


def pretrain(log, workdir: pathlib.Path, tasks: pathlib.Path, seed: int, steps: int, overrides: dict) -> None:
  """The demo's pretraining of `seed` for `steps` steps with `overrides`, its recipe scaled to the steps.

  A run whose last evaluation is recorded is not started again.
  """
  if (workdir / "metrics.jsonl").exists() and any(r["step"] == steps for r in evaluations(workdir)):
    return
  every = math.ceil(steps / 3)  # the demo's three evaluations and checkpoints (500 of 1,500)
  flags = {
    **overrides,
    "seed": seed,
    "num_train_steps": steps,
    "warmup_steps": steps // 10,
    "eval_every": every,
    "checkpoint_every": every,
    "probes": ",".join(f"{task}:{tasks / task}" for task in poetry.TASKS),
  }
  command(
    log, "wyjax.pretrain", f"--config={DEMO}", f"--workdir={workdir}", *(f"--config.{k}={v}" for k, v in flags.items())
  )


def evaluations(workdir: pathlib.Path) -> list[dict]:
  """The run's evaluation records of metrics.jsonl (validation metrics and probes), in step order."""
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  return [r for r in records if "valid_loss" in r]


def finetuned_scores(workdir: pathlib.Path, tasks: pathlib.Path, out: pathlib.Path) -> dict:
  """{task: {split: main metric}} of the demo's fine-tuning of `workdir` (one seed) into `out`."""
  suite.run(
    init=str(workdir),
    data_root=tasks,
    out=out,
    tasks=list(poetry.TASKS),
    name=workdir.name,
    learning_rate=1e-3,
    batch_size=32,
    seeds=1,
    per_task={task: dict(num_train_steps=n, eval_every=n // 4) for task, n in FINETUNING_STEPS.items()},
  )
  scores = {}
  for task in poetry.TASKS:
    result = json.loads((out / task / "results.json").read_text())
    scores[task] = {split: leaderboard.per_seed({task: result}, split)[0][task] for split in ("dev", "test")}
  return scores


def table(rows: dict) -> str:
  """The markdown table of the runs' results: the last evaluation, the probes and the fine-tuned scores."""
  lines = [
    "| pretraining, last evaluation | steps | valid MLM loss (RTD: its generator's) | last PUNC probe F1 | "
    "last TLC probe accuracy | PUNC dev F1 | PUNC test F1 | TLC dev accuracy | TLC test accuracy | "
    "PUNC test F1 per seed |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ]
  for name, runs in rows.items():
    last = [run["evaluations"][-1] for run in runs]
    mlm_loss = [e.get("valid_generator_loss", e["valid_loss"]) for e in last]
    probe = lambda task, metric: mean_std([e[f"probe/{task}/{metric}"] for e in last])
    score = lambda task, split: [run["scores"][task][split] for run in runs]
    lines.append(
      f"| {name} | {runs[0]['steps']:,} | {np.mean(mlm_loss):.3f} | {probe('punc', 'f1')} | "
      f"{probe('tlc', 'accuracy')} | {mean_std(score('punc', 'dev'))} | {mean_std(score('punc', 'test'))} | "
      f"{mean_std(score('tlc', 'dev'))} | {mean_std(score('tlc', 'test'))} | "
      + ", ".join(f"{100 * s:.2f}" for s in score("punc", "test"))
      + " |"
    )
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", type=pathlib.Path, required=True)
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=1500, help="MLM's steps (the demo's 1,500).")
  args = parser.parse_args()
  out = args.out.resolve()
  out.mkdir(parents=True, exist_ok=True)
  log, start = out / "commands.log", time.perf_counter()
  tasks = out / "tasks"
  if not (tasks / "summary.json").exists():
    poetry.build_poetry_tasks(tasks)

  # Step times: measured once, interleaved with MLM's; a variant added later is timed beside MLM again and
  # scaled by the first MLM time, so that every equal-time run is held to the same MLM step.
  timing = out / "step_seconds.json"
  seconds = json.loads(timing.read_text()) if timing.exists() else {}
  timed = [name for name, (_, equal_time) in VARIANTS.items() if equal_time or name == MLM]
  if missing := [name for name in timed if name not in seconds]:
    names = [MLM, *(name for name in missing if name != MLM)]
    measured = dict(zip(names, step_seconds([VARIANTS[name][0] for name in names])))
    scale = seconds.get(MLM, measured[MLM]) / measured[MLM]
    seconds |= {name: measured[name] * scale for name in missing}
    timing.write_text(json.dumps(seconds, indent=2))
  steps_of = {
    name: round(args.steps * seconds[MLM] / seconds[name]) if equal_time else args.steps
    for name, (_, equal_time) in VARIANTS.items()
  }
  print("step seconds: " + ", ".join(f"{name} {s:.4f}" for name, s in seconds.items()), flush=True)

  rows = {name: [] for name in VARIANTS}
  # MLM and RTD-GDES at equal wall time first, seed by seed (the comparison the table leads with), then the others.
  order = [(name, seed) for seed in range(args.seeds) for name in list(VARIANTS)[:2]]
  order += [(name, seed) for seed in range(args.seeds) for name in list(VARIANTS)[2:]]
  for name, seed in order:
    overrides, _ = VARIANTS[name]
    workdir = out / f"variant{list(VARIANTS).index(name)}_seed{seed}"
    pretrain(log, workdir, tasks, seed, steps_of[name], overrides)
    scores = finetuned_scores(workdir, tasks, out / "finetuned" / workdir.name)
    rows[name].append({"seed": seed, "steps": steps_of[name], "evaluations": evaluations(workdir), "scores": scores})
    print(f"{name}, seed {seed}: {scores}", flush=True)
    record = {
      "rows": rows,
      "step_seconds": seconds,
      "seconds": round(time.perf_counter() - start),
      "machine": platform.processor() or platform.machine(),
      "seeds": args.seeds,
    }
    (out / "results.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))  # after each run
  print(table({name: runs for name, runs in rows.items() if runs}))


if __name__ == "__main__":
  main()

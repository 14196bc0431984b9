"""Is the probe worth watching? The probes' dev scores beside the fine-tuned ones of the same checkpoints.

    python benchmarks/probes.py [--out=/tmp/wyjax-probes] [--seeds=punc=3,tlc=1] [--package=chinese-poetry/package]

1. Derives the demo's two tasks from chinese-poetry into OUT/tasks.
2. Runs the demo's pretraining into OUT/pretrain, a checkpoint every --checkpoint_every steps,
   its step 0 written to OUT/step0; then times it with its probes and without
   (OUT/timed_probes[_N], OUT/timed_no_probes[_N]), in --cost_pairs pairs back to back.
3. Probes every checkpoint (wyjax.train.probes.probe_model) and fine-tunes it on both tasks with
   the demo's recipe, --seeds seeds per task, into OUT/finetune/<step>/.
4. Prints a markdown table: each checkpoint's validation MLM loss, probe and fine-tuned dev scores,
   their Spearman rank correlation, the in-run probes against the command's, and what probing cost.

Every stage is kept in OUT (results.json holds what was measured): a rerun resumes where it stopped.
"""

import argparse
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from wyjax.core import checkpoints, config_files, storage
from wyjax.data import corpus, prepare
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.tasks.builders import poetry
from wyjax.tasks.registry import TASKS
from wyjax.train import pretraining, probes, suite

# The demo's fine-tuning (wyjax/demo.py's defaults): steps per task, an evaluation every quarter.
FINETUNING_STEPS = {poetry.PUNCTUATION: 300, poetry.DYNASTY: 750}
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def records(path: pathlib.Path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines()]


def pretrain(out: pathlib.Path, name: str, options: list[str]) -> dict:
  """Runs the demo's pretraining into OUT/name with `options`; returns its wall, CPU and probes' seconds.

  A finished run is kept: its timing is in OUT/<name>_timing.json. Each run compiles into a
  compilation cache of its own, empty at its start, so every timed run compiles every program, as a
  first run does.
  """
  workdir, timing = out / name, out / f"{name}_timing.json"
  if timing.exists():
    return storage.read_json(timing)
  command = [
    sys.executable,
    "-m",
    "wyjax.pretrain",
    "--config=pretrain/deberta_tiny.py",
    f"--workdir={workdir}",
    *options,
  ]
  print(" ".join(command), flush=True)
  cpu_before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
  env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(out / f"{name}_xla")}
  subprocess.run(command, cwd=REPO_ROOT, check=True, env=env)
  wall, cpu_after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
  metrics = records(workdir / "metrics.jsonl")
  result = {
    "wall_seconds": wall,
    "cpu_seconds": cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime,
    "probe_seconds": sum(r.get("probe_seconds", 0.0) for r in metrics),
    "probe_evaluations": sum("probe_seconds" in r for r in metrics),
    "compile_seconds": sum(r.get("compile_seconds", 0.0) for r in metrics),
  }
  storage.write_json(timing, result)
  return result


def write_step0(out: pathlib.Path, config) -> pathlib.Path:
  """The run's parameters before its first step, as a workdir (model.json, tokenizer, checkpoint 0).

  They are the state pretraining.build's program initialises from config.seed.
  """
  workdir = out / "step0"
  if (workdir / "checkpoints" / "0").exists():
    return workdir
  data_dir = pretraining.prepared_data_dir(config)
  tokenizer = tokenizer_lib.Tokenizer.load(data_dir / "tokenizer")
  run = pretraining.build(config, tokenizer, prepare.read_manifest(data_dir)["sequence_length"])
  params = jax.device_get(run.program.init_state(jax.random.key(config.seed))["params"])
  checkpoints.write_model_info(
    workdir, run.model_config.without_run_choices().replace(dtype="float32").to_dict(), ["mlm_head"], tokenizer
  )
  with checkpoints.manager(workdir) as mngr:
    mngr.save(0, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"params": params})))
    mngr.wait_until_finished()
    checkpoints.seal(epath.Path(mngr.directory) / "0")
  return workdir


def cost_pairs(out: pathlib.Path, spec: str, count: int) -> list[tuple[str, str]]:
  """Times `count` pairs of the demo's pretraining, with the probes of `spec` and without, back to back.

  Pair N runs without probes first when N is odd, so a drift of the machine falls on both.
  Returns their run names [(with, without)].
  """
  pairs = []
  for n in range(1, count + 1):
    suffix = "" if n == 1 else f"_{n}"
    runs = [(f"timed_no_probes{suffix}", []), (f"timed_probes{suffix}", [f"--config.probes={spec}"])]
    for name, options in runs if n % 2 else runs[::-1]:
      pretrain(out, name, options)
    pairs.append((runs[1][0], runs[0][0]))
  return pairs


def steady_seconds(workdir: pathlib.Path) -> float:
  """The seconds of the run's logged training intervals that hold no evaluation.

  An evaluation at step s (s = 0 too) runs after the step-s log, so in the interval that ends at the next one.
  """
  metrics = records(workdir / "metrics.jsonl")
  evaluated = {0} | {r["step"] for r in metrics if "valid_loss" in r}
  logged = [(r["step"], r["step_seconds"]) for r in metrics if "step_seconds" in r]
  starts = [0] + [step for step, _ in logged[:-1]]
  return sum((step - start) * seconds for start, (step, seconds) in zip(starts, logged) if start not in evaluated)


def print_cost(out: pathlib.Path, pairs: list[tuple[str, str]]) -> None:
  """Prints a markdown table of what probing cost each pair, and the means.

  The means are shares of the mean wall time of the runs with probes.
  """
  print(
    "\n| pair | with probes: wall, CPU | the probes' own seconds (each evaluation) | their share of the wall | "
    "without: wall, CPU | the runs' difference | outside the steady steps |"
  )
  print("|---|---|---|---:|---|---:|---:|")
  rows = []
  for n, (probed, unprobed) in enumerate(pairs, 1):
    a, b = (storage.read_json(out / f"{name}_timing.json") for name in (probed, unprobed))
    evaluations = [r["probe_seconds"] for r in records(out / probed / "metrics.jsonl") if "probe_seconds" in r]
    difference = a["wall_seconds"] - b["wall_seconds"]
    outside = difference - steady_seconds(out / probed) + steady_seconds(out / unprobed)
    rows.append((a["wall_seconds"], a["probe_seconds"], difference, outside, a["cpu_seconds"] - b["cpu_seconds"]))
    share = lambda seconds: f"{seconds:.1f} s ({100 * seconds / a['wall_seconds']:.1f}%)"
    print(
      f"| {n} | {a['wall_seconds']:.1f} s, {a['cpu_seconds']:.1f} CPU-s | {a['probe_seconds']:.1f} "
      f"({', '.join(f'{e:.2f}' for e in evaluations)}) | {100 * a['probe_seconds'] / a['wall_seconds']:.2f}% | "
      f"{b['wall_seconds']:.1f} s, {b['cpu_seconds']:.1f} CPU-s | {share(difference)} | {share(outside)} |"
    )
  wall, own, difference, outside, cpu = np.mean(rows, axis=0)
  print(
    f"\nmeans over {len(rows)} pairs, of the {wall:.1f} s with probes: their own {own:.2f} s "
    f"({100 * own / wall:.2f}%), the runs' difference {difference:.2f} s ({100 * difference / wall:.2f}%), "
    f"outside the steady steps {outside:.2f} s ({100 * outside / wall:.2f}%), CPU {cpu:.1f} CPU-s"
  )


def spearman(a, b) -> float:
  """Spearman's rank correlation (ties: average ranks)."""

  def ranks(values):
    values = np.asarray(values, float)
    order = np.argsort(values, kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(len(values))
    for value in np.unique(values):  # ties share their mean rank
      out[values == value] = out[values == value].mean()
    return out

  ra, rb = ranks(a), ranks(b)
  if ra.std() == 0 or rb.std() == 0:
    return float("nan")
  return float(np.corrcoef(ra, rb)[0, 1])


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", default="/tmp/wyjax-probes")
  parser.add_argument("--seeds", default="punc=3,tlc=1", help="fine-tuning seeds per task (TASK=N, comma-separated)")
  parser.add_argument("--checkpoint_every", type=int, default=250)
  parser.add_argument("--package", default=None, help="an unpacked chinese-poetry package/ (default: fetched)")
  parser.add_argument("--cost_pairs", type=int, default=1, help="timed pairs of runs, with probes and without")
  args = parser.parse_args()
  seeds = {task: 1 for task in poetry.TASKS} | {
    task: int(n) for task, n in (e.split("=") for e in args.seeds.split(","))
  }
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  config = config_files.load("pretrain/deberta_tiny")
  tasks_dir = out / "tasks"
  if not (tasks_dir / "summary.json").exists():
    poetry.build_poetry_tasks(tasks_dir, reader=corpus.PoetryReader(args.package))
  spec = ",".join(f"{task}:{tasks_dir / task}" for task in poetry.TASKS)
  # The checkpoints to compare (untimed: the training is the demo's, its checkpoints kept) ...
  pretrain(out, "pretrain", [f"--config.checkpoint_every={args.checkpoint_every}", "--config.keep_checkpoints=1000"])
  # ... and the demo's pretraining as it runs, with its probes and without: what they cost.
  pairs = cost_pairs(out, spec, args.cost_pairs)

  results_file = out / "results.json"
  results = storage.read_json(results_file) if results_file.exists() else {}
  models = {0: write_step0(out, config)} | {
    int(p.name): p for p in sorted((out / "pretrain" / "checkpoints").iterdir()) if p.name.isdigit()
  }
  configs = [suite.task_config(task, data_dir=str(tasks_dir / task)) for task in poetry.TASKS]
  for step, model in sorted(models.items()):
    entry = results.setdefault(str(step), {})
    if "probe" not in entry:
      start = time.perf_counter()
      entry["probe"] = probes.probe_model(model, configs, config.probe_examples)
      entry["probe_seconds"] = time.perf_counter() - start
      storage.write_json(results_file, results)
    if entry.get("seeds") != seeds:  # (a rerun with more seeds keeps the finished ones)
      per_task = {
        task: dict(num_train_steps=n, eval_every=max(1, n // 4), seeds=seeds[task])
        for task, n in FINETUNING_STEPS.items()
      }
      board = suite.run(
        init=str(model),
        data_root=tasks_dir,
        out=out / "finetune" / str(step),
        tasks=list(poetry.TASKS),
        name=f"step {step}",
        batch_size=32,
        per_task=per_task,
      )
      if board["failed"]:
        raise RuntimeError(f"step {step}: {board['failed']}")
      entry["finetuned"] = {
        task: storage.read_json(out / "finetune" / str(step) / task / "results.json")["dev_mean"]
        for task in poetry.TASKS
      }
      entry["seeds"] = seeds
      storage.write_json(results_file, results)
    print(f"step {step}: {entry}", flush=True)

  in_run = {r["step"]: r for r in records(out / "timed_probes" / "metrics.jsonl") if "valid_loss" in r}
  steps = sorted(int(s) for s in results)
  print(
    f"\n# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__}; "
    f"fine-tuning seeds {args.seeds}, their mean\n"
  )
  metric = {task: TASKS[task].main_metric for task in poetry.TASKS}
  print(
    "| step | valid MLM loss | "
    + " | ".join(f"{t.upper()} probe {metric[t]} | {t.upper()} fine-tuned {metric[t]}" for t in poetry.TASKS)
    + " |"
  )
  print("|---|---|" + "---|---|" * len(poetry.TASKS))
  for step in steps:
    entry = results[str(step)]
    loss = f"{in_run[step]['valid_loss']:.3f}" if step in in_run else "–"
    cells = [f"{100 * entry['probe'][t][metric[t]]:.2f} | {100 * entry['finetuned'][t]:.2f}" for t in poetry.TASKS]
    print(f"| {step:,} | {loss} | " + " | ".join(cells) + " |")
  for task in poetry.TASKS:
    probe = [results[str(s)]["probe"][task][metric[task]] for s in steps]
    tuned = [results[str(s)]["finetuned"][task] for s in steps]
    print(f"\n{task.upper()}: Spearman (probe, fine-tuned) over {len(steps)} checkpoints {spearman(probe, tuned):.3f}")
  # The in-run probes (at step 0 and every evaluation) against the command's on the same checkpoints.
  same = [(s, t) for s in steps for t in poetry.TASKS if s in in_run and probes.metric_key(t, metric[t]) in in_run[s]]
  differences = [
    abs(in_run[s][probes.metric_key(t, metric[t])] - results[str(s)]["probe"][t][metric[t]]) for s, t in same
  ]
  print(
    f"\nthe run's probes vs the command's on the same checkpoints, {len(same)} (step, task) pairs: "
    f"largest difference {max(differences, default=0):.2e}"
  )
  print_cost(out, pairs)


if __name__ == "__main__":
  main()

"""Fine-tuning, wyjax vs transformers (PyTorch), on the same exported model and task files.

    JAX_PLATFORMS=cpu python benchmarks/finetune_step.py --tlc=WYWEB/tlc --punc=DIR
        [--init=~/.cache/wyjax/demo/pretrain] [--steps=300] [--torch_device=cpu|cuda]

DIR is PUNC built from the Daizhige sample with a dev split:
`python -m wyjax.tasks build-punc --daizhige=DAIZHIGE --out=DIR
--collections=史藏,子藏,集藏,经藏,医藏,诗藏,道藏,佛藏,易藏,艺藏,儒藏 --dev_fraction=0.2 --test_fraction=0`.

- Both sides fine-tune --init (default: the demo's tiny DeBERTa), exported once, with a fresh head
  and the same recipe (batch 32, AdamW, clipping, warm-up then linear decay), --steps steps, one seed.
- wyjax runs `python -m wyjax.finetune` with configs/<task>.py, with an empty and then a warm
  compilation cache (--no-warm_rerun: the first only); transformers a plain PyTorch loop in a
  subprocess, on features wyjax's task code wrote beforehand. Both dev scores come from the task's
  own decode and metric; --sort_window and --torch_sort_window batch examples close in length.
- Prints one markdown row per run: wall time, median seconds per step after the first 10, steps/s
  and the dev main metric. --profile instead breaks one wyjax run down by phase, in-process.
"""

import argparse
import json
import os
import pathlib
import pickle
import platform
import shutil
import subprocess
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
TASK_HEADS = {"tlc": "sequence", "punc": "token"}


def read_task(task_name: str, config):
  """(the task as config prepares it, its splits from config.data_dir), as wyjax.finetune reads them."""
  from wyjax.tasks import datasets
  from wyjax.tasks.registry import TASKS

  task = TASKS[task_name]
  return task.prepare(task, datasets.load_splits(task.files, config.data_dir), config)


def featurize(task_name: str, data_dir: str, hf_dir: pathlib.Path, out: pathlib.Path):
  """The task's train/dev features as wyjax makes them, pickled for the PyTorch worker."""
  from wyjax.hf import loading
  from wyjax.tasks import datasets
  from wyjax.train import finetuning

  config = finetuning.base_config(task_name)
  config.data_dir = data_dir
  task, splits = read_task(task_name, config)
  tokenizer = loading.load(hf_dir).tokenizer
  features = {
    split: task.featurize_all(splits[split], tokenizer, task.max_length, datasets.file_of(task.files, data_dir, split))[
      0
    ]
    for split in ("train", "dev")
  }
  data = {
    split: [{"input_ids": f["input_ids"], "label": f["labels"] if "labels" in f else f["label"]} for f in fs]
    for split, fs in features.items()
  }
  out.write_bytes(pickle.dumps({"data": data, "num_labels": len(task.labels), "pad_id": tokenizer.pad_id}))
  return task, splits["dev"], features["dev"]


def torch_worker(args):
  """The plain PyTorch loop; writes dev logits and per-step seconds to --logits."""
  import torch
  import transformers

  torch.manual_seed(args.seed)
  loaded = pickle.loads(pathlib.Path(args.features).read_bytes())
  data, pad_id = loaded["data"], loaded["pad_id"]
  model_class = (
    transformers.AutoModelForTokenClassification
    if args.head == "token"
    else transformers.AutoModelForSequenceClassification
  )
  device = torch.device(args.torch_device)
  torch.set_float32_matmul_precision("high")  # TF32 on a GPU, as XLA's default precision is there
  model = model_class.from_pretrained(args.hf, num_labels=loaded["num_labels"]).to(device)
  decay = [p for n, p in model.named_parameters() if not n.endswith("bias") and "LayerNorm" not in n]
  rest = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
  optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
    lr=args.learning_rate,
    betas=(0.9, 0.999),
    eps=1e-6,
  )
  schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * args.steps), args.steps)

  def collate(items):
    longest = max(len(x["input_ids"]) for x in items)
    ids = torch.full((len(items), longest), pad_id, dtype=torch.long)
    labels = torch.full((len(items), longest), -100, dtype=torch.long) if args.head == "token" else None
    for row, x in enumerate(items):
      ids[row, : len(x["input_ids"])] = torch.as_tensor(x["input_ids"])
      if labels is not None:
        labels[row, : len(x["label"])] = torch.as_tensor(x["label"])
    if labels is None:
      labels = torch.as_tensor([int(x["label"]) for x in items])
    return ids.to(device), (ids != pad_id).long().to(device), labels.to(device)

  train, generator, order, seconds = data["train"], np.random.default_rng(args.seed), [], []
  if args.torch_sort_window > 1:  # wyjax's own batches: examples close in length
    from wyjax.tasks import batching

    lengths = np.array([len(x["input_ids"]) for x in train])
    sorted_batches = batching.LengthSortedBatches(
      lengths, batch_size=args.batch_size, sort_window=args.torch_sort_window, seed=args.seed
    )
  model.train()
  for step in range(args.steps):
    if args.torch_sort_window > 1:
      order = list(sorted_batches[step])
    elif len(order) < args.batch_size:
      order = list(generator.permutation(len(train)))
    batch, order = [train[i] for i in order[: args.batch_size]], order[args.batch_size :]
    start = time.perf_counter()
    ids, mask, labels = collate(batch)
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    if device.type == "cuda":
      torch.cuda.synchronize()
    seconds.append(time.perf_counter() - start)
  model.eval()
  logits = []
  with torch.no_grad():
    dev = data["dev"]
    for start in range(0, len(dev), 64):
      items = dev[start : start + 64]
      ids, mask, _ = collate(items)
      out = model(input_ids=ids, attention_mask=mask).logits.float().cpu().numpy()
      logits += [out[row, : len(x["input_ids"])] if args.head == "token" else out[row] for row, x in enumerate(items)]
  pathlib.Path(args.logits).write_bytes(pickle.dumps({"logits": logits, "step_seconds": seconds}))


def profile(task_name: str, data_dir: str, hf_dir, args) -> None:
  """Prints where a wyjax fine-tuning run's time goes in this process, phase by phase, as markdown rows.

  The phases: setup (reading, featurizing, building the program), the input pipeline, each
  bucket's compile and steps, and evaluation (its first call compiles).
  """
  import collections

  import jax

  from wyjax.tasks import batching
  from wyjax.train import finetuning, task_model

  config = finetuning.base_config(task_name)
  config.update(
    data_dir=data_dir,
    init=str(hf_dir),
    num_train_steps=args.steps,
    learning_rate=args.learning_rate,
    batch_size=args.batch_size,
  )
  start = time.perf_counter()
  task, splits = read_task(task_name, config)
  model, pretrained, data = task_model.setup(task, config, config.init, splits)
  rows = [("setup: read, featurize, build the program", time.perf_counter() - start, 1)]
  start = time.perf_counter()
  batches = batching.train_batches(
    data["train"][1],
    batch_size=args.batch_size,
    max_length=data["max_length"],
    pad_id=model.pad_id,
    seed=args.seed,
    sort_window=args.sort_window,
    bucket_count=model.bucket_count,
  )
  batches = [next(batches) for _ in range(args.steps)]
  rows.append((f"input pipeline: {args.steps} batches", time.perf_counter() - start, args.steps))
  state, rng = model.init_state(pretrained, args.seed), model.seed_key(args.seed)
  first, later = {}, collections.defaultdict(list)
  for batch in batches:
    start = time.perf_counter()
    state, metrics = model.train_step(state, batch, rng)
    jax.block_until_ready(metrics)
    seconds, length = time.perf_counter() - start, batch["input_ids"].shape[-1]
    if length in first:
      later[length].append(seconds)
    else:
      first[length] = seconds
  for length in sorted(first):
    rows.append((f"bucket {length}: first step (compiles)", first[length], 1))
    if later[length]:
      median = float(np.median(later[length]))
      rows.append((f"bucket {length}: later steps (median × count)", median * len(later[length]), len(later[length])))
  for call in ("first (compiles)", "second"):
    start = time.perf_counter()
    model.evaluate(state["params"], *data["dev"])
    rows.append((f"dev evaluation, {call}", time.perf_counter() - start, 1))
  print(f"\n| {task_name}: phase | seconds | count |\n|---|---:|---:|")
  for label, seconds, count in rows:
    print(f"| {label} | {seconds:.2f} | {count} |", flush=True)


def timed(command: list[str], env: dict) -> float:
  start = time.perf_counter()
  result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
  if result.returncode:
    raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
  return time.perf_counter() - start


def run_wyjax(task_name: str, data_dir: str, hf_dir, workdir: pathlib.Path, cache: pathlib.Path, args) -> dict:
  env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache)}  # the platform: the caller's JAX_PLATFORMS
  shutil.rmtree(workdir, ignore_errors=True)
  wall = timed(
    [
      sys.executable,
      "-m",
      "wyjax.finetune",
      f"--config=configs/{task_name}.py",
      f"--workdir={workdir}",
      f"--config.data_dir={data_dir}",
      f"--config.init={hf_dir}",
      f"--config.num_train_steps={args.steps}",
      f"--config.learning_rate={args.learning_rate}",
      f"--config.batch_size={args.batch_size}",
      "--config.log_every=10",
      f"--config.seed={args.seed}",
      f"--config.sort_window={args.sort_window}",
    ],
    env,
  )
  records = [json.loads(line) for line in (workdir / f"seed_{args.seed}" / "metrics.jsonl").read_text().splitlines()]
  step_seconds = [r["step_seconds"] for r in records if "step_seconds" in r]
  step_seconds = step_seconds[1:] or step_seconds  # the first interval compiles (unless it is the only one)
  results = json.loads((workdir / "results.json").read_text())
  return {"wall": wall, "step": float(np.median(step_seconds)), "dev": results["dev"][results["main_metric"]]}


def run_torch(task, dev_examples, dev_features, features: pathlib.Path, hf_dir, out: pathlib.Path, args) -> dict:
  logits_file = out / f"{task.name}_torch_logits.pkl"
  wall = timed(
    [
      sys.executable,
      __file__,
      "--worker",
      f"--features={features}",
      f"--hf={hf_dir}",
      f"--head={TASK_HEADS[task.name]}",
      f"--logits={logits_file}",
      f"--steps={args.steps}",
      f"--learning_rate={args.learning_rate}",
      f"--batch_size={args.batch_size}",
      f"--seed={args.seed}",
      f"--torch_device={args.torch_device}",
      f"--torch_sort_window={args.torch_sort_window}",
    ],
    dict(os.environ),
  )
  result = pickle.loads(logits_file.read_bytes())
  predictions = [task.decode(e, f, lg) for e, f, lg in zip(dev_examples, dev_features, result["logits"])]
  return {
    "wall": wall,
    "step": float(np.median(result["step_seconds"][10:])),
    "dev": task.score(dev_examples, predictions)[task.main_metric],
  }


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--tlc", default="")
  parser.add_argument("--punc", default="")
  parser.add_argument("--init", default=str(pathlib.Path("~/.cache/wyjax/demo/pretrain").expanduser()))
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--torch_device", default="cpu")
  parser.add_argument("--sort_window", type=int, default=1, help="wyjax's --config.sort_window")
  parser.add_argument(
    "--torch_sort_window",
    type=int,
    default=1,
    help="> 1: the PyTorch loop draws wyjax's length-sorted batches (its sort_window) instead of "
    "shuffled ones, as transformers' Trainer does with group_by_length",
  )
  parser.add_argument(
    "--warm_rerun",
    action=argparse.BooleanOptionalAction,
    default=True,
    help="rerun wyjax with the compilation cache its first run filled",
  )
  parser.add_argument("--out", default="/tmp/wyjax-finetune-bench")
  parser.add_argument("--profile", action="store_true", help="only wyjax's time per phase, in this process")
  parser.add_argument("--worker", action="store_true", help="internal: the PyTorch loop")
  parser.add_argument("--features", default="")
  parser.add_argument("--hf", default="")
  parser.add_argument("--head", default="")
  parser.add_argument("--logits", default="")
  args = parser.parse_args()
  if args.worker:
    return torch_worker(args)

  import jax
  import torch

  from wyjax.hf import export_folder, loading

  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  hf_dir = export_folder.export(loading.load(args.init), out / "hf", overwrite=True)
  print(
    f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; jax {jax.__version__} "
    f"({jax.devices()[0].platform}), torch {torch.__version__} ({args.torch_device}, {torch.get_num_threads()} "
    f"threads); {args.steps} steps, batch {args.batch_size}, lr {args.learning_rate:g}; "
    f"{time.strftime('%Y-%m-%d')}"
  )
  if not args.profile:
    print("\n| task | run | wall time (s) | s/step | steps/s | dev |\n|---|---|---:|---:|---:|---:|")
  for name, data_dir in (("tlc", args.tlc), ("punc", args.punc)):
    if not data_dir:
      continue
    if args.profile:
      profile(name, data_dir, hf_dir, args)
      continue
    features = out / f"{name}_features.pkl"
    task, dev_examples, dev_features = featurize(name, data_dir, hf_dir, features)
    cache = out / f"{name}_xla_cache"
    shutil.rmtree(cache, ignore_errors=True)
    runs = {"wyjax, empty compilation cache": run_wyjax(name, data_dir, hf_dir, out / f"{name}_wyjax", cache, args)}
    if args.warm_rerun:
      runs["wyjax, warm compilation cache"] = run_wyjax(name, data_dir, hf_dir, out / f"{name}_wyjax", cache, args)
    runs["transformers (PyTorch loop)"] = run_torch(task, dev_examples, dev_features, features, hf_dir, out, args)
    for label, r in runs.items():
      print(
        f"| {name} | {label} | {r['wall']:.1f} | {r['step']:.3f} | {1 / r['step']:.2f} | {100 * r['dev']:.2f} |",
        flush=True,
      )


if __name__ == "__main__":
  main()

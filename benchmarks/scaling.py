"""Predicted pod-scale pretraining: compile-only reports of 4 models on 4 TPU slices, as docs/scaling.md.

    JAX_PLATFORMS=cpu python benchmarks/scaling.py            # about an hour on 2 CPU cores
    JAX_PLATFORMS=cpu python benchmarks/scaling.py --gpus     # one GPU: H100, H200 (40 minutes)

Every cell compiles the real pretraining step through libtpu (`wyjax.pretrain --compile_only`,
no TPU needed) with a fixed number of sequences per chip, data-parallel over the slice; the
first memory lever that fits the chip's HBM is kept: no remat, then remat of the matmul outputs
("dots"), then full remat, then the state sharded over all chips (fsdp). Each result is
appended to benchmarks/scaling.jsonl as it comes, so an interrupted run resumes where it
stopped; the table is rewritten from that file at the end (--table_only: just the table).

--gpus compiles the same steps for one GPU through XLA:GPU (the gpu-compile extra) into
benchmarks/scaling_gpu.jsonl: each base or large model at its sequences per chip on an H100 and
an H200, and at twice as many on the H100, from which the largest batch that fits jax's default
share of the card (XLA_PYTHON_CLIENT_MEM_FRACTION, 75%) is extrapolated, memory being affine in
the batch below the card's size. Each row gives the predicted step (every kernel costed and
calibrated on measured programs, wyjax.aot.gpu_step_time) with the band of its held-out error,
then the uncalibrated sum and the roofline, bounds below it.
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import subprocess
import sys
import time

import jax

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "scaling.jsonl"
# Sequences per chip: what a base model's activations at length 512 allow on 16-GB chips with remat.
MODELS = {"deberta_tiny": 64, "bert_base": 32, "deberta_base": 32, "deberta_large": 16}
SLICES = {"v5p-8": "v5p:2x2x1", "v4-32": "v4:2x2x4", "v5p-128": "v5p:4x4x4", "v5e-256": "v5e:16x16"}
LEVERS = [("none", {}), ("dots", {}), ("full", {}), ("full", {"data": 1, "fsdp": -1})]
GPU_RESULTS = REPO / "benchmarks" / "scaling_gpu.jsonl"
GPUS = {"H100": "h100", "H200": "h200"}
GPU_MODELS = ("bert_base", "deberta_base", "deberta_large")
JAX_MEMORY_FRACTION = 0.75  # of the card's memory, what jax's allocator takes by default


def compile_cell(model: str, topology: str, remat: str, mesh: dict, batch: int | None = None) -> dict:
  if batch is None:
    batch = MODELS[model] * math.prod(int(d) for d in topology.split(":")[1].split("x"))
  command = [
    sys.executable,
    "-m",
    "wyjax.pretrain",
    f"--config=pretrain/{model}.py",
    f"--compile_only={topology}",
    f"--config.batch_size={batch}",
    f"--config.remat={remat}",
    *(f"--config.mesh.{axis}={size}" for axis, size in mesh.items()),
  ]
  start = time.perf_counter()
  result = subprocess.run(
    command,
    cwd=REPO,
    capture_output=True,
    text=True,
    env={**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"},
  )
  record = {
    "model": model,
    "topology": topology,
    "remat": remat,
    "global_batch": batch,
    "compile_seconds": round(time.perf_counter() - start, 1),
  }
  if result.returncode == 0:
    return {**record, "fits": True, **json.loads(result.stdout.strip().splitlines()[-1])}
  return {**record, "fits": False, "mesh": mesh, "error": result.stderr.strip().splitlines()[-1][:500]}


def run(models, slices) -> None:
  done = {(r["model"], r["topology"]) for r in read() if r["fits"] or r.get("last_lever")}
  for model in models:
    for name in slices:
      topology = SLICES[name]
      if (model, topology) in done:
        continue
      for i, (remat, mesh) in enumerate(LEVERS):
        record = compile_cell(model, topology, remat, mesh)
        record["last_lever"] = i == len(LEVERS) - 1
        print(
          json.dumps(
            {
              k: record.get(k)
              for k in ("model", "topology", "remat", "mesh", "fits", "compile_seconds", "hbm_bytes_per_chip")
            }
          ),
          flush=True,
        )
        with RESULTS.open("a") as f:
          f.write(json.dumps(record) + "\n")
        if record["fits"]:
          break


def read(path: pathlib.Path = RESULTS) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_gpus(models) -> None:
  """Compiles each model on one H100 and one H200 at its sequences per chip, and on the H100 at twice as many.

  The H100's two batches give the largest batch's extrapolation; no remat, the configs' own attention.
  """
  done = {(r["model"], r["topology"], r["global_batch"]) for r in read(GPU_RESULTS)}
  cells = [
    (model, topology, MODELS[model] * k) for model in models for topology, k in (("h100", 1), ("h200", 1), ("h100", 2))
  ]
  for model, topology, batch in cells:
    if (model, topology, batch) in done:
      continue
    record = compile_cell(model, topology, "none", {}, batch)
    print(
      json.dumps(
        {
          k: record.get(k)
          for k in (
            "model",
            "topology",
            "global_batch",
            "fits",
            "compile_seconds",
            "hbm_bytes_per_chip",
            "kernels_per_step",
          )
        }
      ),
      flush=True,
    )
    with GPU_RESULTS.open("a") as f:
      f.write(json.dumps(record) + "\n")


def largest_batch(one: dict, two: dict, capacity: float) -> int:
  """The batch whose memory reaches jax's default share of `capacity`, affine through the two compiled ones."""
  per_sequence = (two["hbm_bytes_per_chip"] - one["hbm_bytes_per_chip"]) / (two["global_batch"] - one["global_batch"])
  fixed = one["hbm_bytes_per_chip"] - per_sequence * one["global_batch"]
  return int((JAX_MEMORY_FRACTION * capacity - fixed) // per_sequence)


def gpu_table() -> str:
  records = read(GPU_RESULTS)
  rows = []
  for model in GPU_MODELS:
    for name, topology in GPUS.items():
      cell = sorted(
        (r for r in records if r["model"] == model and r["topology"] == topology and r["fits"]),
        key=lambda r: r["global_batch"],
      )
      if not cell:
        rows.append(f"| {model} | {name} | not compiled yet | | | | | | | | | |")
        continue
      r = cell[0]
      # The H200's cost per sequence is taken from the H100's pair: the same chip, whose programs
      # differ by XLA's scheduling for another memory size (under 3% of HBM, 1% of kernels here).
      pair = [
        next(
          (
            c
            for c in records
            if c["model"] == model
            and c["topology"] == "h100"
            and c["fits"]
            and c["global_batch"] == k * r["global_batch"]
          ),
          None,
        )
        for k in (1, 2)
      ]
      fits = largest_batch(*pair, r["hbm_capacity_bytes"]) if all(pair) else "not compiled"
      (low, high), tokens = r["predicted_step_band_seconds"], r["tokens_per_step"]
      calls = (
        ", ".join(
          f"{t.replace('__cudnn$', 'cuDNN ').replace('__gpu$xla.gpu.triton', 'Triton')} ×{n}"
          for t, n in r["custom_calls"].items()
        )
        or "none"
      )
      rows.append(
        f"| {model} | {name} | {r['global_batch']} × {r['tokens_per_step'] // r['global_batch']} "
        f"| {r['hbm_bytes_per_chip'] / 2**30:.1f} / {r['hbm_capacity_bytes'] / 2**30:.0f} "
        f"| {fits} | {r['kernels_per_step']:,} | {calls} "
        f"| {r['largest_buffers'][0]} | **{r['predicted_step_seconds'] * 1e3:,.1f}, "
        f"{r['predicted_tokens_per_second']:,.0f} tokens/s** | {low * 1e3:,.1f}–{high * 1e3:,.1f} "
        f"({tokens / high:,.0f}–{tokens / low:,.0f} tokens/s) | {r['predicted_uncalibrated_step_seconds'] * 1e3:,.1f} "
        f"| {r['roofline_step_seconds'] * 1e3:,.1f} ({r['bound']}), {r['tokens_per_second']:,.0f} tokens/s |"
      )
  return "\n".join(
    [
      "| model | GPU | batch × length | HBM, GiB (step / card) | largest batch in 75% of the card | kernels per step "
      "| attention custom calls | largest buffer | predicted step (calibrated), ms, tokens/s | held-out error band, ms "
      "(tokens/s) | uncalibrated step, ms | roofline step (lower bound), ms (bound), tokens/s |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|",
      *rows,
    ]
  )


def table() -> str:
  records = read()
  rows = []
  for model in MODELS:
    for name, topology in SLICES.items():
      cell = [r for r in records if r["model"] == model and r["topology"] == topology]
      fitting = [r for r in cell if r["fits"]]
      if not fitting:
        status = f"does not fit: {cell[-1]['error']}" if cell else "not run yet"
        rows.append(f"| {model} | {name} | {status} | | | | | | | |")
        continue
      r = fitting[0]
      mesh = "×".join(f"{a} {s}" for a, s in r["mesh"].items() if s > 1) or "1"
      rows.append(
        f"| {model} | {name} ({r['chips']} chips) | {mesh} | {r['global_batch']:,} | {r['remat']} "
        f"| {r['hbm_bytes_per_chip'] / 2**30:.1f} / {r['hbm_capacity_bytes'] / 2**30:.1f} "
        f"| {r['roofline_step_seconds'] * 1e3:,.0f} ({r['bound']}) | {r['tokens_per_second']:,.0f} "
        f"| {r['mfu_ceiling']:.1%} | {r['flops_per_step_per_chip'] / r['analytic_flops_per_step_per_chip']:.2f} |"
      )
  return "\n".join(
    [
      "| model | slice | mesh | global batch (sequences) | remat | HBM per chip, GiB (used / capacity) "
      "| predicted step, ms (bound) | predicted tokens/s | MFU ceiling | XLA / model FLOPs |",
      "|---|---|---|---|---|---|---|---|---|---|",
      *rows,
    ]
  )


def write_doc(path: pathlib.Path, gpus: bool) -> None:
  text = path.read_text()
  if gpus:
    begin, end, made = "<!-- gpu table -->", "<!-- end gpu table -->", gpu_table()
    stamp = (
      f"Generated by `benchmarks/scaling.py --gpus` on {datetime.date.today()}, jax {jax.__version__} with "
      f"jax-cuda13-plugin {_version('jax-cuda13-plugin')}, compiled by XLA:GPU on a 2-core x86-64 CPU host "
      "without a GPU: predictions, not measurements."
    )
  else:
    begin, end, made = "<!-- scaling table -->", "<!-- end scaling table -->", table()
    stamp = (
      f"Generated by `benchmarks/scaling.py` on {datetime.date.today()}, jax {jax.__version__}, "
      f"libtpu {_version('libtpu')}, compiled on a 2-core x86-64 CPU host: predictions, not measurements."
    )
  new = f"{begin}\n{stamp}\n\n{made}\n{end}"
  path.write_text(text[: text.index(begin)] + new + text[text.index(end) + len(end) :])


def _version(package: str) -> str:
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return "not installed"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default=",".join(MODELS))
  parser.add_argument("--slices", default=",".join(SLICES))
  parser.add_argument("--doc", default=str(REPO / "docs" / "scaling.md"))
  parser.add_argument("--table_only", action="store_true")
  parser.add_argument("--gpus", action="store_true", help="one H100 and one H200 instead of the TPU slices")
  args = parser.parse_args()
  if not args.table_only:
    if args.gpus:
      run_gpus([m for m in args.models.split(",") if m in GPU_MODELS])
    else:
      run(args.models.split(","), args.slices.split(","))
  write_doc(pathlib.Path(args.doc), args.gpus)


if __name__ == "__main__":
  main()

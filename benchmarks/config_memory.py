"""Compile time and memory of every shipped config's programs on this CPU, as `--compile_only=local` compiles them.

Each config's train and evaluation steps at its own batch size and sequence length (the tiny
fresh model where a config names no init; a pretraining config's vocabulary size), with XLA's
buffers for each and the compile's peak resident memory above what the process held before it.

    python benchmarks/config_memory.py --data_root=DIR [--configs=tlc,clue/cmrc2018,pretrain/deberta_base]

DIR holds each task's folder as `wyjax.benchmark --data_root` reads them (DIR/tlc,
DIR/cmrc2018, …); pretraining configs need none. Prints a JSON line per config, then a
markdown table (docs/benchmarks.md, "Compile time and memory of every config");
tests/train/config_memory_test.py pins the figures.
"""

import argparse
import ctypes
import json
import pathlib
import re
import tempfile
import time

import jax

from wyjax.core import config_files
from wyjax.core.host_memory import GiB
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, pretraining_compile, suite


def _status_kib(field: str) -> int:
  return int(re.search(rf"^{field}:\s+(\d+) kB", pathlib.Path("/proc/self/status").read_text(), re.M).group(1))


# jax's events for a program's tracing, lowering and XLA's compile: their sum is a config's compile time.
_COMPILE_EVENTS = (
  "/jax/core/compile/jaxpr_trace_duration",
  "/jax/core/compile/jaxpr_to_mlir_module_duration",
  "/jax/core/compile/backend_compile_duration",
)
_compile_seconds = []  # filled by main's listener


def shipped_configs() -> list[str]:
  """Every config wyjax ships: each task's (its variants too) and each pretraining one."""
  return [t.config_name for t in TASKS.values()] + [n for n in config_files.available() if n.startswith("pretrain/")]


def measure(name: str, data_root: pathlib.Path) -> dict:
  """One config's --compile_only=local: its compile seconds, peak resident bytes and both steps' buffers.

  The compile seconds count the programs its setup builds too; the peak resident bytes above the
  start count its data read and featurized too.
  """
  if name.startswith("pretrain/"):
    config = config_files.load(name)
    config.data_dir = tempfile.mkdtemp()  # no prepared corpus: the config's own vocabulary size
    compile_only = pretraining_compile.compile_only
  else:
    task = next(t for t in TASKS.values() if t.config_name == name)
    config = suite.task_config(task.name, data_dir=str(data_root / task.files.name))
    compile_only = finetuning.compile_only
  ctypes.CDLL("libc.so.6").malloc_trim(0)  # what earlier configs freed is not counted as held
  before = _status_kib("VmRSS")
  pathlib.Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
  _compile_seconds.clear()
  start = time.perf_counter()
  result = compile_only(config, "local")
  return {
    "config": name,
    "tokens_per_step": result["tokens_per_step"],
    "seconds": round(time.perf_counter() - start, 1),
    "compile_seconds": round(sum(_compile_seconds), 1),
    "compile_peak_bytes": (_status_kib("VmHWM") - before) * 1024,
    "train_bytes": result["hbm_bytes_per_chip"],
    "evaluation_bytes": result["evaluation_bytes_per_chip"],
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data_root", type=pathlib.Path, required=True)
  parser.add_argument("--configs", default="", help="comma-separated config names; default: every shipped one")
  args = parser.parse_args()
  names = args.configs.split(",") if args.configs else shipped_configs()
  jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: _compile_seconds.append(seconds) if event in _COMPILE_EVENTS else None
  )
  rows = []
  for name in names:
    rows.append(measure(name, args.data_root))
    print(json.dumps(rows[-1]), flush=True)
  print(
    "\n| config | tokens per step | compile (s) | all (s) | peak memory (GiB) | train step's buffers (GiB) "
    "| evaluation step's buffers (GiB) |\n|---|---:|---:|---:|---:|---:|---:|"
  )
  for row in rows:
    print(
      f"| {row['config']} | {row['tokens_per_step']:,} | {row['compile_seconds']} | {row['seconds']} | "
      f"{row['compile_peak_bytes'] / GiB:.2f} | {row['train_bytes'] / GiB:.2f} | "
      f"{row['evaluation_bytes'] / GiB:.2f} |"
    )


if __name__ == "__main__":
  main()

"""What the benchmarks that run wyjax's commands share: a logged command and a mean ± std cell."""

import pathlib
import subprocess
import sys
import time

import numpy as np


def command(log: pathlib.Path, *args: str) -> str:
  """Runs `python -m args…`, its output appended to `log`; returns its standard output, exits on failure."""
  start = time.perf_counter()
  result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
  with log.open("a", encoding="utf-8") as f:
    f.write(f"$ python -m {' '.join(args)}\n{result.stdout}{result.stderr}")
    f.write(f"[{time.perf_counter() - start:.0f} s, exit {result.returncode}]\n")
  if result.returncode:
    sys.exit(f"failed: python -m {' '.join(args)}\n{result.stderr[-3000:]}")
  return result.stdout


def mean_std(values: list[float]) -> str:
  """A table cell of fractions as percentages: "mean ± std"."""
  return f"{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f}"

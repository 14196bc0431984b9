"""How a run's steps take their scratch on the CPU: kept between steps for small programs, given
back for large ones (wyjax.core.host_memory), each in a real entry point's process."""

import subprocess
import sys

import pytest

# XLA's way with a step's scratch, three times: a worker thread takes 200 MB, writes it, frees
# it. Prints the page faults of the last time, after admitting a program whose scratch is
# `scratch` floats (compiled, never run).
_STEPS_AFTER_ADMITTING = """
import ctypes, resource, sys, threading
import jax, jax.numpy as jnp
from wyjax.core import cli, host_memory
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
def step():
  scratch = libc.malloc(200 << 20)
  ctypes.memset(scratch, 1, 200 << 20)
  libc.free(ctypes.c_void_p(scratch))
def main(argv):
  n = int(argv[1])
  compiled = jax.jit(lambda x: jnp.sort(jnp.outer(x, x), axis=0).sum(0)).lower(jnp.zeros(n)).compile()
  print(compiled.memory_analysis().temp_size_in_bytes, file=sys.stderr)
  host_memory.admit([host_memory.Program("a step", compiled, lambda fits: "")])
  faults = []
  for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    worker = threading.Thread(target=step); worker.start(); worker.join()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
  print(faults[-1])
cli.run(main)
"""


@pytest.mark.parametrize(
  "side, faults_at_least, faults_below",
  [
    (4_000, 0, 1_000),  # 64 MB of scratch: the freed 200 MB is taken again without a fault
    (20_000, 40_000, None),  # 1.6 GB: blocks of 32 MiB and more are given back, faulted in anew
  ],
)
def test_scratch_is_kept_for_small_programs_and_given_back_for_large_ones(side, faults_at_least, faults_below):
  result = subprocess.run(
    [sys.executable, "-c", _STEPS_AFTER_ADMITTING, str(side)], capture_output=True, text=True, timeout=120
  )
  assert result.returncode == 0, result.stderr[-2000:]
  faults = int(result.stdout)
  assert faults >= faults_at_least and (faults_below is None or faults < faults_below), (faults, result.stderr[-500:])

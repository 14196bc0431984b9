"""The machine's memory, for the programs XLA runs on a CPU: refusing what cannot fit, and how glibc serves it.

XLA takes a CPU step's scratch (its temporaries) from malloc at every step and frees it after.
A run compiles its largest programs before its first step and passes them to `admit`, which
refuses one that cannot fit the memory the machine has free, in one line naming what to change,
and chooses how glibc serves their scratch: kept for the next step (`keep_freed_memory`, every
entry point's start) or, for large scratch, mapped and given back (`give_back_large_blocks`).
"""

import ctypes
import dataclasses
import pathlib
import platform
from collections.abc import Callable

import jax

from wyjax.core import guards

GiB = 2**30
# Programs whose scratch is at most this keep it between steps; a larger one's is given back. Small
# scratch mapped afresh has each of its pages faulted in and zeroed at every step (a quarter of the tiny
# model's TLC step on 2 cores); an arena that keeps large scratch fragments when programs of several
# sizes take turns (CMRC 2018's fine-tuning grew to 16 GB resident in two steps, 9 GB given back).
KEEP_AT_MOST = 2**30
# glibc's mallopt parameters (malloc.h) and its largest mmap threshold on a 64-bit machine.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -3, -4, -8
_LARGEST_MMAP_THRESHOLD = 32 * 2**20
_GLIBC_MMAP_MAX = 65536


class DoesNotFit(guards.RunError):
  """A program needs more memory than the machine (or, compiled for other hardware, one chip) has."""


def buffer_bytes(memory) -> int:
  """Bytes of the buffers a compiled program holds on one device, from its memory_analysis().

  Its arguments, its outputs less those aliased to arguments (a donated state), its temporaries.
  """
  return (
    memory.argument_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes + memory.temp_size_in_bytes
  )


def _mallopt(*settings: tuple[int, int]) -> None:
  if platform.libc_ver()[0] != "glibc":
    return
  mallopt = ctypes.CDLL("libc.so.6").mallopt
  for option, value in settings:
    mallopt(option, value)


def keep_freed_memory() -> None:
  """One arena that neither maps nor trims: a step's freed scratch serves the next step.

  For the CPU only: on a GPU the host allocates little per step, while XLA:GPU compiles and
  autotunes on many threads at once, which one arena would serialise."""
  _mallopt((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1))


def give_back_large_blocks() -> None:
  """Maps blocks of 32 MiB and more on their own and unmaps them when freed; smaller ones stay in the arena.

  glibc's way, with its threshold fixed at its largest.
  """
  _mallopt((_M_MMAP_THRESHOLD, _LARGEST_MMAP_THRESHOLD), (_M_MMAP_MAX, _GLIBC_MMAP_MAX))


def _read_int(path: pathlib.Path) -> int | None:
  try:
    text = path.read_text().strip()
  except OSError:
    return None
  return int(text) if text.isdigit() else None


def available_bytes() -> int:
  """Memory a new allocation can take: the kernel's MemAvailable, less where a control group limits it lower.

  The control group is this process's (a container's).
  """
  meminfo = dict(line.split(":", 1) for line in pathlib.Path("/proc/meminfo").read_text().splitlines())
  available = int(meminfo["MemAvailable"].split()[0]) * 1024
  cgroup = pathlib.Path("/sys/fs/cgroup")
  for limit, usage in (
    (cgroup / "memory.max", cgroup / "memory.current"),
    (cgroup / "memory" / "memory.limit_in_bytes", cgroup / "memory" / "memory.usage_in_bytes"),
  ):
    limit_bytes, usage_bytes = _read_int(limit), _read_int(usage)
    if limit_bytes is not None and usage_bytes is not None:
      available = min(available, limit_bytes - usage_bytes)
  return available


@dataclasses.dataclass(frozen=True)
class Program:
  """A compiled program a run is about to execute, and what to change when it cannot fit."""

  name: str  # what it is, as the user would say it: "the training step at 32 × 512 tokens"
  compiled: jax.stages.Compiled
  # The config values that make it fit, given the share of its memory that fits (its scratch
  # grows about as its batch): "--config.batch_size=8 or lower (now 32)".
  advice: Callable[[float], str]

  @property
  def new_bytes(self) -> int:
    """Memory it takes beyond its arguments (which are already held): outputs and scratch."""
    memory = self.compiled.memory_analysis()
    return buffer_bytes(memory) - memory.argument_size_in_bytes

  @property
  def scratch_bytes(self) -> int:
    return self.compiled.memory_analysis().temp_size_in_bytes


def admit(programs: list[Program]) -> None:
  """Refuses (DoesNotFit, one line) a program that needs more memory than the machine has free.

  Else chooses how glibc serves their scratch (the module's docstring). CPU programs only: an
  accelerator's memory is its own (--compile_only reports it).
  """
  programs = [p for p in programs if _on_cpu(p.compiled)]
  if not programs:
    return
  free = available_bytes()
  for program in programs:
    if program.new_bytes > free:
      raise DoesNotFit(
        f"{program.name} needs {program.new_bytes / GiB:.1f} GiB of memory and this machine has "
        f"{free / GiB:.1f} GiB free: {program.advice(free / program.new_bytes)}"
      )
  if max(p.scratch_bytes for p in programs) > KEEP_AT_MOST:
    give_back_large_blocks()


def _on_cpu(compiled: jax.stages.Compiled) -> bool:
  shardings = jax.tree_util.tree_leaves(compiled.input_shardings)
  return all(device.platform == "cpu" for sharding in shardings for device in sharding.device_set)

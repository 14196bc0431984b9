"""What XLA built for a GPU: the kernels a step launches, its custom calls and its buffers.

XLA:GPU compiles for a card it cannot see (aot.devices("h100")), and with --xla_dump_to it
writes what it built: the thunk sequence (every kernel the step launches, in order), the
optimized HLO (custom calls such as cuDNN's attention) and the buffer assignment (every array
the step holds). `compile()` compiles a step with a dump of its own and reads those three, so a
CPU can answer what a GPU step is made of: which attention runs, how many kernels, whether a
float32 [batch, heads, L, L] array exists. The dump's formats are XLA's, read by name; each
reader below says what it expects. A step compiled on a real GPU is autotuned (GEMMs may become
cuBLAS calls instead of the Triton fusions chosen here by heuristics): the same kernels in
number, some of another kind.
"""
import collections
import dataclasses
import re
import tempfile
from pathlib import Path

import jax
import numpy as np

# Thunks that launch work on the GPU: XLA's fusions and its Triton GEMMs (kKernel,
# kCustomKernel), library calls (cuBLAS, cuDNN), collectives, memset and device copies.
LAUNCHES = ("kKernel", "kCustomKernel", "kGemm", "kCublasLtMatmul", "kCuDnn", "kCustomCall", "kTriton",
            "kCollectiveKernel", "kAllReduceStart", "kAllGatherStart", "kReduceScatterStart", "kAllToAllStart",
            "kCollectivePermuteStart", "kMemset32BitValue", "kMemzero", "kCopy", "kConvolution", "kFft")
# A fusion's kind from XLA's name for it (loop_*_fusion, input_reduce_fusion, gemm_fusion_dot...).
_KINDS = (("gemm", r"gemm|dot|cublas|matmul"), ("reduction", r"reduce"), ("transpose", r"transpose"),
          ("select", r"select"), ("random bits", r"xor|threefry|rng"), ("scatter", r"scatter"),
          ("gather", r"gather"), ("copy", r"copy|dynamic.update.slice|concatenate|slice"))
_THUNK = re.compile(r"^\s*\d+: (k\w+)\s+\[[^]]*\]\s*(\S*)")
_CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
_VALUE = re.compile(r"^ value: <\d+ \S+ @\d+> \(size=(\d+),offset=\d+\): (\w+)\[([\d,]*)\]")
_WHILE = re.compile(r"^\s*\d+: kWhile\b")
# `%name = type opcode(...)...`; a fusion's backend_config names its kind ("kind":"__triton_gemm").
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*)$", re.MULTILINE)
_FUSION_KIND = re.compile(r'"kind":"(__[^"]+)"')


@dataclasses.dataclass(frozen=True)
class Buffer:
  dtype: str  # XLA's element type: f32, bf16, s32, pred, ...
  shape: tuple[int, ...]
  bytes: int


@dataclasses.dataclass(frozen=True)
class GpuProgram:
  kernels: collections.Counter  # kind → launches per step (loop bodies counted once)
  custom_calls: collections.Counter  # custom-call target → count in the optimized HLO
  buffers: tuple[Buffer, ...]  # every array value the buffer assignment places
  loops: int  # while loops in the step (scanned layers, gradient accumulation): their bodies count once

  @property
  def kernel_count(self) -> int:
    return sum(self.kernels.values())

  def buffers_of(self, dtype: str, rank: int, min_trailing: int) -> list[Buffer]:
    """Buffers of `dtype` and `rank` whose last two dimensions are both ≥ min_trailing: for
    attention, the [batch, heads, L, L] scores and probabilities a fused path never holds."""
    return [b for b in self.buffers if b.dtype == dtype and len(b.shape) == rank
            and min(b.shape[-2:], default=0) >= min_trailing]

  def summary(self) -> dict:
    return {"kernels_per_step": self.kernel_count, "kernels_by_kind": dict(self.kernels.most_common()),
            "custom_calls": dict(self.custom_calls.most_common()), "while_loops": self.loops}


def kind(thunk: str, name: str, fusions: dict[str, str]) -> str:
  """A launch's kind: cuDNN, cuBLAS and collectives by their thunk; a kernel XLA did not make
  (no instruction of that name: a Pallas kernel's Triton custom call) as "triton kernel"; XLA's
  fusions by their backend kind (Triton GEMMs, Triton softmax and norms) or name."""
  if thunk == "kCuDnn":
    return "cudnn"
  if thunk in ("kGemm", "kCublasLtMatmul"):
    return "gemm"
  if thunk in ("kMemset32BitValue", "kMemzero"):
    return "memset"
  if thunk == "kCopy":
    return "device copy"
  if "Start" in thunk or thunk == "kCollectiveKernel":
    return "collective"
  if name not in fusions:
    return "triton kernel"
  backend = fusions[name]
  if "gemm" in backend:
    return "gemm"
  if backend.startswith("__triton"):
    return "triton fusion"
  for kind_name, pattern in _KINDS:
    if re.search(pattern, name):
      return kind_name
  return "elementwise"


def read_instructions(hlo: str) -> dict[str, str]:
  """Instruction name (as the thunk sequence spells it: '.' → '_') → its fusion's backend
  kind ("" for none) in optimized HLO text."""
  instructions = {}
  for match in _INSTRUCTION.finditer(hlo):
    backend = _FUSION_KIND.search(match.group(2))
    instructions[match.group(1).replace(".", "_")] = backend.group(1) if backend else ""
  return instructions


def read_thunks(text: str, fusions: dict[str, str]) -> tuple[collections.Counter, int]:
  """(kernels by kind, while loops) of a `*thunk_sequence.txt`: one line per thunk, `NNN:
  kKind [prev/next] name ...`, nested sequences indented under the thunk that holds them."""
  kernels = collections.Counter()
  loops = 0
  for line in text.splitlines():
    if _WHILE.match(line):
      loops += 1
    match = _THUNK.match(line)
    if match and match.group(1) in LAUNCHES:
      kernels[kind(match.group(1), match.group(2), fusions)] += 1
  return kernels, loops


def read_buffers(text: str) -> tuple[Buffer, ...]:
  """Array values of a `*buffer-assignment.txt` (` value: <id name @0> (size=N,offset=M):
  f32[2,4,128]{...}`); tuples and zero-size values are left out."""
  buffers = []
  for line in text.splitlines():
    match = _VALUE.match(line)
    if match and int(match.group(1)):
      dims = tuple(int(d) for d in match.group(3).split(",") if d)
      buffers.append(Buffer(match.group(2), dims, int(match.group(1))))
  return tuple(buffers)


def read_dump(folder: Path) -> tuple[GpuProgram, str]:
  """The program of the one module in `folder` whose thunk sequence exists (the step), and its
  optimized HLO text."""
  thunk_files = sorted(folder.glob("*thunk_sequence.txt"))
  if len(thunk_files) != 1:
    raise RuntimeError(f"{folder}: expected one compiled GPU module, found {len(thunk_files)}")
  prefix = thunk_files[0].name[:-len("thunk_sequence.txt")]
  hlo = _one(folder, f"{prefix}*gpu_after_optimizations.txt").read_text()
  kernels, loops = read_thunks(thunk_files[0].read_text(), read_instructions(hlo))
  return GpuProgram(
      kernels=kernels, custom_calls=collections.Counter(_CUSTOM_CALL.findall(hlo)),
      buffers=read_buffers(_one(folder, f"{prefix}*gpu_after_optimizations-buffer-assignment.txt").read_text()),
      loops=loops), hlo


def _one(folder: Path, pattern: str) -> Path:
  found = sorted(folder.glob(pattern))
  if len(found) != 1:
    raise RuntimeError(f"{folder}: expected one {pattern}, found {[p.name for p in found]}")
  return found[0]


def compile(lowered) -> tuple:
  """(compiled, GpuProgram, XLA's cost analysis or None) of a step lowered for GPU devices."""
  with tempfile.TemporaryDirectory(prefix="wyjax-gpu-program-") as folder:
    compiled = lowered.compile(compiler_options={"xla_dump_to": folder})
    program, hlo = read_dump(Path(folder))
  return compiled, program, cost_analysis(hlo)


def cost_analysis(hlo: str) -> dict | None:
  """XLA's HloCostAnalysis of the optimized GPU module, through the CPU client (an executable
  compiled without a GPU has none: `cost_analysis()` returns None). Its FLOPs and bytes are per
  device; custom calls (cuDNN's attention) count nothing. None where this jaxlib lacks the
  private entry points it needs."""
  try:
    from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
    from jaxlib import _hlo  # pylint: disable=g-import-not-at-top
    module = _hlo.hlo_module_from_text(hlo)
    cpu = jax.devices("cpu")[0].client
    cost = xla_client._xla.hlo_module_cost_analysis(cpu, module)  # pylint: disable=protected-access
  except (ImportError, AttributeError, RuntimeError):
    return None
  return {k: float(v) for k, v in cost.items() if k in ("flops", "bytes accessed", "transcendentals")
          and np.isfinite(v)}

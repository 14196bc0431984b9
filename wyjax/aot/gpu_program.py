"""What XLA built for a GPU: the kernels a step launches, each with its FLOPs and bytes, and its buffers.

`compile()` compiles a step lowered for GPU devices (targets.devices("h100") on any host) with
--xla_dump_to and reads what XLA wrote: the thunk sequence (every kernel the step launches, in
order; thunk_metadata: the HLO instruction each runs), the optimized HLO (optimized_hlo) and the
buffer assignment (every array the step holds). The dump's formats are XLA's, read by name; each
reader below says what it expects.
"""

import collections
import dataclasses
import math
import re
import tempfile
from pathlib import Path

import jax
import numpy as np

from wyjax.aot import triton_ir
from wyjax.aot.optimized_hlo import (
  Instruction,
  arrays,
  computations,
  dots,
  gemm_shape,
  io_bytes,
  matmul_precision,
  operand_shape,
  read_hlo,
  shape_bytes,
  xla_estimate,
)

# FLOPs of cuDNN's flash attention: two [L, L] matmuls forward, five backward (the scores
# recomputed, then dV, dP, dQ, dK: FlashAttention-2, Dao 2023, its Algorithm 2).
ATTENTION_MATMULS = {False: 2, True: 5}

# Thunks that launch work on the GPU: XLA's fusions and its Triton GEMMs (kKernel,
# kCustomKernel), library calls (cuBLAS, cuDNN), collectives, memset and device copies.
LAUNCHES = (
  "kKernel",
  "kCustomKernel",
  "kGemm",
  "kCublasLtMatmul",
  "kCuDnn",
  "kCustomCall",
  "kTriton",
  "kCollectiveKernel",
  "kMemset32BitValue",
  "kMemzero",
  "kCopy",
  "kConvolution",
  "kFft",
)
_COLLECTIVE = re.compile(
  r"^k(AllReduce|AllGather|ReduceScatter|AllToAll|RaggedAllToAll|CollectivePermute|"
  r"CollectiveBroadcast|Send|Recv)(Start)?$"
)
# A fusion's kind from XLA's name for it (loop_*_fusion, input_reduce_fusion, gemm_fusion_dot...).
_KINDS = (
  ("gemm", r"gemm|dot|cublas|matmul"),
  ("reduction", r"reduce"),
  ("transpose", r"transpose"),
  ("select", r"select"),
  ("random bits", r"xor|threefry|rng"),
  ("scatter", r"scatter"),
  ("gather", r"gather"),
  ("copy", r"copy|dynamic.update.slice|concatenate|slice"),
)
ATOMICS = "triton kernel, atomics"  # a Pallas kernel that adds atomically: the DeBERTa kernel's backward
_THUNK = re.compile(r"^(\s*)(\d+): (k\w+)\s+\[[^]]*\]\s*(\S*)(?:.*grid: \[(\d+), (\d+), (\d+)\])?")
_ANNOTATION = re.compile(r'profile_annotation: "([^"]+)"\s*thunk_id: (\d+)')
_VALUE = re.compile(r"^ value: <\d+ \S+ @\d+> \(size=(\d+),offset=\d+\): (\w+)\[([\d,]*)\]")


# --- The launches ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Launch:
  """One kernel the step launches, with what bounds its time."""

  name: str  # the HLO instruction it runs
  kind: str  # as kernels_by_kind counts it
  kernel: str = ""  # the kernel the GPU runs it as (identical fusions share one), as a profile names it
  repeats: int = 1  # the trip counts of the loops around it (1 where XLA knows none)
  blocks: int = 0  # its grid; 0 where the grid on a GPU is not this compile's (GEMMs, library calls)
  bytes: float = 0.0  # its operands and results
  flops: float = 0.0  # matrix-unit FLOPs: GEMMs, attention, a Triton kernel's dots
  gemms: tuple[tuple[int, int, int, int], ...] = ()  # (b, m, n, k) of each GEMM it runs
  precision: str = "bf16"  # of those FLOPs: "bf16", "tf32" or "f32"
  xla_seconds: float | None = None  # XLA's estimate, where it wrote one that prices this kernel
  collective: str = ""  # "all-reduce", "all-gather", ...: costed at the interconnect
  peers: int = 1  # the devices a collective spans


def kind(thunk: str, name: str, fusions: dict[str, str]) -> str:
  """A launch's kind, as kernels_by_kind counts it.

  cuDNN, cuBLAS and collectives by their thunk; a kernel XLA did not make (a Pallas kernel's
  Triton call) as "triton kernel"; XLA's fusions by their backend kind or name.
  """
  if thunk == "kCuDnn":
    return "cudnn"
  if thunk in ("kGemm", "kCublasLtMatmul"):
    return "gemm"
  if thunk in ("kMemset32BitValue", "kMemzero"):
    return "memset"
  if thunk == "kCopy":
    return "device copy"
  if _COLLECTIVE.match(thunk) or thunk == "kCollectiveKernel":
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


def _trip_count(instruction: Instruction | None) -> int:
  found = instruction and re.search(r'"known_trip_count":\{"n":"(\d+)"', instruction.attributes)
  return int(found.group(1)) if found else 1


def read_launches(thunks: str, metadata: str, hlo: dict) -> tuple[tuple[Launch, ...], int]:
  """(every launch, the number of while loops) of a `*thunk_sequence.txt`.

  The sequence has one line per thunk, `NNN: kKind [prev/next] kernel grid: [x, y, z] ...`, a
  loop's thunks indented under its kWhile. The instruction each runs is thunk_metadata's
  profile_annotation for its id (the sequence names XLA's deduplicated kernel, which identical
  fusions share), else the sequence's name.
  """
  annotations = {int(i): name for name, i in _ANNOTATION.findall(metadata)}
  by_kernel_name = {name.replace(".", "_"): i for name, i in hlo.items()}
  fusions = {name: i.backend_kind for name, i in by_kernel_name.items()}
  members = computations(hlo)
  launches, loops, stack = [], 0, []  # stack: (indent of a kWhile, its repeats)
  for line in thunks.splitlines():
    found = _THUNK.match(line)
    if not found:
      continue
    indent, thunk_id, thunk, sequence_name = len(found.group(1)), int(found.group(2)), found.group(3), found.group(4)
    while stack and indent <= stack[-1][0]:
      stack.pop()
    name = annotations.get(thunk_id, sequence_name)
    instruction = hlo.get(name) or by_kernel_name.get(name)
    repeats = stack[-1][1] if stack else 1
    if thunk == "kWhile":
      loops += 1
      stack.append((indent, repeats * _trip_count(instruction)))
    elif thunk in LAUNCHES or _COLLECTIVE.match(thunk):
      grid = math.prod(int(g) for g in found.group(5, 6, 7)) if found.group(5) else 0
      triton_call = instruction is not None and instruction.target == "__gpu$xla.gpu.triton"
      launch_kind = "triton kernel" if triton_call else kind(thunk, name.replace(".", "_"), fusions)
      launch = _launch(launch_kind, thunk, name, instruction, hlo, members, repeats, grid)
      launches.append(dataclasses.replace(launch, kernel=sequence_name or name))
  return tuple(launches), loops


def _launch(
  launch_kind: str,
  thunk: str,
  name: str,
  instruction: Instruction | None,
  hlo: dict,
  members: dict,
  repeats: int,
  grid: int,
) -> Launch:
  """A launch with its FLOPs and bytes read from the instruction it runs."""
  if instruction is None:
    return Launch(name, launch_kind, repeats, grid)
  common = dict(name=name, kind=launch_kind, repeats=repeats, bytes=io_bytes(hlo, instruction))
  if thunk == "kCopy":
    return Launch(**{**common, "bytes": 2 * shape_bytes(instruction.shape)})
  if launch_kind == "collective":
    return _collective(instruction, hlo, common)
  if instruction.target.startswith("__cudnn$fmha"):
    return Launch(**common, flops=_attention_flops(instruction, hlo))
  if instruction.target.startswith("__cublas"):
    (dtype, lhs), (_, rhs) = (arrays(operand_shape(hlo, o))[0] for o in instruction.operands[:2])
    precision = matmul_precision(dtype, instruction.attributes)
    return _gemms(common, [gemm_shape(lhs, rhs, instruction.attributes)], precision)
  if instruction.target == "__gpu$xla.gpu.triton":
    flops, moved, atomic = triton_ir.counts(instruction.attributes)
    common.update(kind=ATOMICS if atomic else launch_kind, bytes=moved or common["bytes"])
    return Launch(**common, blocks=grid, flops=flops)
  called = re.search(r"calls=%?([\w.\-]+)", instruction.attributes)
  if launch_kind in ("gemm", "cudnn") and called:
    return _gemms(common, *dots(hlo, called.group(1), members))  # its grid and XLA's estimate: the untuned tiling's
  return Launch(**common, blocks=grid, xla_seconds=xla_estimate(instruction))


def _attention_flops(instruction: Instruction, hlo: dict) -> float:
  """FLOPs of cuDNN's flash attention: ATTENTION_MATMULS products of its scores with the head dimension.

  The scores are [batch, heads, Lq, Lk] (its backend config's intermediate_tensor_shape); 2 FLOPs a product.
  """
  scores = re.search(
    r'"intermediate_tensor_shape":\{"dimensions":\["(\d+)","(\d+)","(\d+)","(\d+)"\]', instruction.attributes
  )
  if not scores:
    return 0.0
  batch, heads, queries, keys = map(int, scores.groups())
  query = arrays(operand_shape(hlo, instruction.operands[0]))[0][1]
  head_dim = math.prod(query) // (batch * heads * queries)
  backward = instruction.target.endswith("Backward")
  return 2.0 * ATTENTION_MATMULS[backward] * batch * heads * queries * keys * head_dim


def _gemms(common: dict, shapes: list[tuple[int, int, int, int]], precision: str) -> Launch:
  flops = sum(2.0 * math.prod(shape) for shape in shapes)
  return Launch(**common, flops=flops, gemms=tuple(shapes), precision=precision)


def _collective(instruction: Instruction, hlo: dict, common: dict) -> Launch:
  """A collective's launch: its operands' bytes and the size of its replica groups.

  The groups in any of XLA's three spellings: {{0,1},{2,3}}, [2,2]<=[4] (groups of 2),
  mesh['x'=2,'y'=4] {'y'} (groups of 4).
  """
  operation = re.sub(r"-(start|done)$", "", instruction.opcode)
  listed = re.search(r"replica_groups=\{\{([\d,]*)\}", instruction.attributes)
  iota = re.search(r"replica_groups=\[\d+,(\d+)\]<=", instruction.attributes)
  mesh = re.search(r"replica_groups=mesh\[([^]]*)\] \{([^}]*)\}", instruction.attributes)
  if listed:
    peers = len(listed.group(1).split(","))
  elif iota:
    peers = int(iota.group(1))
  elif mesh:
    sizes = dict(re.findall(r"'(\w+)'=(\d+)", mesh.group(1)))
    peers = math.prod(int(sizes[axis]) for axis in re.findall(r"'(\w+)'", mesh.group(2)))
  else:
    peers = 1
  operands = sum(shape_bytes(operand_shape(hlo, o)) for o in instruction.operands)
  return Launch(**{**common, "bytes": operands}, collective=operation, peers=max(peers, 1))


# --- The program and its buffers ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Buffer:
  """An array the step's buffer assignment places."""

  dtype: str  # XLA's element type: f32, bf16, s32, pred, ...
  shape: tuple[int, ...]
  bytes: int


@dataclasses.dataclass(frozen=True)
class GpuProgram:
  """What XLA built for a step: its launches by kind, custom calls and buffers."""

  kernels: collections.Counter  # kind → launches per step (loop bodies counted once)
  custom_calls: collections.Counter  # custom-call target → count in the optimized HLO
  buffers: tuple[Buffer, ...]  # every array value the buffer assignment places
  loops: int  # while loops in the step (scanned layers, gradient accumulation): their bodies count once
  launches: tuple[Launch, ...] = ()  # every launch in order, for predict()

  @property
  def kernel_count(self) -> int:
    """Launches per step (loop bodies counted once)."""
    return sum(self.kernels.values())

  def buffers_of(self, dtype: str, rank: int, min_trailing: int) -> list[Buffer]:
    """Buffers of `dtype` and `rank` whose last two dimensions are both ≥ min_trailing.

    For attention: the [batch, heads, L, L] scores and probabilities a fused path never holds.
    """
    return [
      b
      for b in self.buffers
      if b.dtype == dtype and len(b.shape) == rank and min(b.shape[-2:], default=0) >= min_trailing
    ]

  def summary(self) -> dict:
    """The figures a compile-only report carries of the program."""
    return {
      "kernels_per_step": self.kernel_count,
      "kernels_by_kind": dict(self.kernels.most_common()),
      "custom_calls": dict(self.custom_calls.most_common()),
      "while_loops": self.loops,
    }


def read_buffers(text: str) -> tuple[Buffer, ...]:
  """Array values of a `*buffer-assignment.txt`; tuples and zero-size values are left out.

  A value's line: ` value: <id name @0> (size=N,offset=M): f32[2,4,128]{...}`.
  """
  buffers = []
  for line in text.splitlines():
    match = _VALUE.match(line)
    if match and int(match.group(1)):
      dims = tuple(int(d) for d in match.group(3).split(",") if d)
      buffers.append(Buffer(match.group(2), dims, int(match.group(1))))
  return tuple(buffers)


def read_dump(folder: Path, module: str = "") -> tuple[GpuProgram, str]:
  """(the program, its optimized HLO text) of a compiled GPU module in the dump folder `folder`.

  The module is the one whose name contains `module`, the largest where several do.
  """
  candidates = [p for p in sorted(folder.glob("*thunk_sequence.txt")) if module in p.name]
  if not candidates:
    raise RuntimeError(
      f"{folder}: no compiled GPU module{f' named *{module}*' if module else ''} (no "
      "*thunk_sequence.txt; dump with XLA_FLAGS=--xla_dump_to=DIR)"
    )
  thunk_file = max(candidates, key=lambda p: p.stat().st_size)
  prefix = thunk_file.name[: -len("thunk_sequence.txt")]
  text = _one(folder, f"{prefix}*gpu_after_optimizations.txt").read_text()
  hlo = read_hlo(text)
  metadata = folder / f"{prefix}thunk_metadata.txt"
  launches, loops = read_launches(thunk_file.read_text(), metadata.read_text() if metadata.exists() else "", hlo)
  buffers = read_buffers(_one(folder, f"{prefix}*gpu_after_optimizations-buffer-assignment.txt").read_text())
  return GpuProgram(
    kernels=collections.Counter(launch.kind for launch in launches),
    custom_calls=collections.Counter(i.target for i in hlo.values() if i.target),
    buffers=buffers,
    loops=loops,
    launches=launches,
  ), text


def _one(folder: Path, pattern: str) -> Path:
  found = sorted(folder.glob(pattern))
  if len(found) != 1:
    raise RuntimeError(f"{folder}: expected one {pattern}, found {[p.name for p in found]}")
  return found[0]


# What compile() asks XLA for besides the dump: its own estimate of every fusion; and with no GPU attached, no
# autotuning, whose deviceless path compiles each fusion apart to keep its defaults (the same program: docs/scaling.md).
DUMP_OPTIONS, DEVICELESS_OPTIONS = {"xla_gpu_collect_cost_model_stats": True}, {"xla_gpu_autotune_level": 0}


def compile(lowered, estimates: bool = True) -> tuple:
  """(compiled, GpuProgram, XLA's cost analysis or None) of a step lowered for GPU devices.

  estimates: XLA writes its estimate of every fusion. It has a cost model for Hopper only (jax 0.12
  fails an A100's compile with "Cannot find key: sm_80"); elsewhere fusions are costed from their bytes.
  """
  options = {**(DUMP_OPTIONS if estimates else {}), **(DEVICELESS_OPTIONS if jax.default_backend() != "gpu" else {})}
  with tempfile.TemporaryDirectory(prefix="wyjax-gpu-program-") as folder:
    compiled = lowered.compile(compiler_options={"xla_dump_to": folder, **options})
    program, hlo = read_dump(Path(folder))
  return compiled, program, cost_analysis(hlo)


def cost_analysis(hlo: str) -> dict | None:
  """XLA's HloCostAnalysis of the optimized GPU module, through the CPU client; None where this jaxlib cannot.

  An executable compiled without a GPU has none of its own (`cost_analysis()` returns None). Its
  FLOPs and bytes are per device; custom calls (cuDNN's attention) count nothing.
  """
  try:
    from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
    from jaxlib import _hlo  # pylint: disable=g-import-not-at-top

    module = _hlo.hlo_module_from_text(hlo)
    cpu = jax.devices("cpu")[0].client
    cost = xla_client._xla.hlo_module_cost_analysis(cpu, module)  # pylint: disable=protected-access
  except (ImportError, AttributeError, RuntimeError):
    return None
  return {
    k: float(v) for k, v in cost.items() if k in ("flops", "bytes accessed", "transcendentals") and np.isfinite(v)
  }

"""What XLA built for a GPU: the kernels a step launches, each with its FLOPs and bytes.

XLA:GPU compiles for a card it cannot see (aot.devices("h100")), and with --xla_dump_to it
writes what it built: the thunk sequence (every kernel the step launches, in order, and
thunk_metadata: the HLO instruction each runs), the optimized HLO (fusions, custom calls such as
cuDNN's attention) and the buffer assignment (every array the step holds). `compile()` compiles
a step with a dump of its own and reads those, so a CPU can answer what a GPU step is made of:
which attention runs, how many kernels, whether a float32 [batch, heads, L, L] array exists, and
(wyjax.core.gpu_step_time) how long it will take. The dump's formats are XLA's, read by name;
each reader below says what it expects.
"""

import collections
import dataclasses
import json
import math
import re
import tempfile
from pathlib import Path

import jax
import numpy as np

from wyjax.core import triton_ir

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
_BYTES = {
  "pred": 1,
  "s8": 1,
  "u8": 1,
  "s16": 2,
  "u16": 2,
  "f16": 2,
  "bf16": 2,
  "s32": 4,
  "u32": 4,
  "f32": 4,
  "s64": 8,
  "u64": 8,
  "f64": 8,
  "c64": 8,
  "c128": 16,
  "f8e4m3fn": 1,
  "f8e5m2": 1,
  "s4": 0.5,
  "u4": 0.5,
}
_ARRAY = re.compile(r"(\w+)\[([\d,]*)\]")
_HEAD = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = ")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) ")
_THUNK = re.compile(r"^(\s*)(\d+): (k\w+)\s+\[[^]]*\]\s*(\S*)(?:.*grid: \[(\d+), (\d+), (\d+)\])?")
_ANNOTATION = re.compile(r'profile_annotation: "([^"]+)"\s*thunk_id: (\d+)')
_VALUE = re.compile(r"^ value: <\d+ \S+ @\d+> \(size=(\d+),offset=\d+\): (\w+)\[([\d,]*)\]")


# --- The optimized HLO --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Instruction:
  name: str
  shape: str  # XLA's text: "bf16[32,512]{1,0}", or a tuple "(f32[8]{0}, s32[])"
  opcode: str
  operands: tuple[str, ...]  # names; "name#1" is element 1 of name's tuple
  attributes: str  # the rest of the line: calls=, custom_call_target=, backend_config=...
  computation: str

  @property
  def backend_kind(self) -> str:
    """A fusion's backend kind ("__triton_gemm", "__triton", "__cudnn$fusion"; "" for XLA's own)."""
    found = re.search(r'"kind":"(__[^"]+)"', self.attributes)
    return found.group(1) if found else ""

  @property
  def target(self) -> str:
    found = re.search(r'custom_call_target="([^"]+)"', self.attributes)
    return found.group(1) if found else ""


def arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
  """(dtype, dims) of each array in an HLO shape's text."""
  return [
    (dtype, tuple(int(d) for d in dims.split(",") if d)) for dtype, dims in _ARRAY.findall(shape) if dtype in _BYTES
  ]


def shape_bytes(shape: str) -> float:
  return sum(_BYTES[dtype] * math.prod(dims) for dtype, dims in arrays(shape))


def _closing(text: str, start: int) -> int:
  """The index of the bracket closing the one at text[start]."""
  depth = 0
  for i in range(start, len(text)):
    depth += text[i] in "([{"
    depth -= text[i] in ")]}"
    if not depth:
      return i
  return len(text) - 1


def read_hlo(text: str) -> dict[str, Instruction]:
  """Every instruction of an optimized HLO module's text, by name (names are unique in a module):
  `[ROOT ]%name = shape opcode(%a, %b#1, /*index=5*/%c), attributes` inside `%computation (...) {`."""
  instructions, computation = {}, ""
  for line in text.splitlines():
    if line and not line[0].isspace() and line.rstrip().endswith("{"):
      found = _COMPUTATION.match(line)
      computation = found.group(1) if found else ""
      continue
    head = _HEAD.match(line)
    if not head:
      continue
    rest = line[head.end() :]
    if rest.startswith("("):
      end = _closing(rest, 0)
      shape, rest = rest[: end + 1], rest[end + 2 :]
    else:
      shape, _, rest = rest.partition(" ")
    opcode, _, rest = rest.partition("(")
    end = _closing("(" + rest, 0) - 1
    operands = tuple(o.strip().lstrip("%") for o in re.sub(r"/\*.*?\*/", "", rest[:end]).split(",") if o.strip())
    instructions[head.group(1)] = Instruction(head.group(1), shape, opcode, operands, rest[end + 1 :], computation)
  return instructions


def _elements(shape: str) -> list[str]:
  """The elements of a tuple shape's text, "(f32[8]{0}, (s32[], bf16[2,3]{1,0}))", each whole."""
  inner, elements, depth, start = shape[1 : _closing(shape, 0)], [], 0, 0
  for i, char in enumerate(inner):
    depth += char in "([{"
    depth -= char in ")]}"
    if char == "," and not depth:
      elements.append(inner[start:i].strip())
      start = i + 1
  return elements + [inner[start:].strip()]


def operand_shape(hlo: dict, operand: str) -> str:
  """An operand's shape: "name#1#0" is element 0 of element 1 of name's (nested) tuple."""
  name, *path = operand.split("#")
  shape = hlo[name].shape if name in hlo else ""
  for index in map(int, path):
    elements = _elements(shape) if shape.startswith("(") else []
    shape = elements[index] if index < len(elements) else ""
  return shape


def io_bytes(hlo: dict, instruction: Instruction) -> float:
  """What an instruction reads and writes: its operands and its result, each once."""
  return shape_bytes(instruction.shape) + sum(shape_bytes(operand_shape(hlo, o)) for o in instruction.operands)


def xla_estimate(instruction: Instruction) -> float | None:
  """Seconds of XLA's own estimate of a fusion (GpuPerformanceModel: the reification_cost entry
  without a name, which --xla_gpu_collect_cost_model_stats=true writes), or None."""
  found = re.search(r'"reification_cost":(\[.*?\])', instruction.attributes)
  if not found:
    return None
  estimates = {entry.get("name", ""): entry for entry in json.loads(found.group(1))}
  seconds = estimates.get("", {}).get("exec_time_us", math.nan) * 1e-6
  return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _members(hlo: dict) -> dict[str, list]:
  members = collections.defaultdict(list)
  for instruction in hlo.values():
    members[instruction.computation].append(instruction)
  return members


def _dims(attributes: str, name: str) -> list[int]:
  """A dot's dimension numbers, in HLO's spelling (lhs_contracting_dims={1,2}) or a backend
  config's ("lhs_contracting_dimensions":["1","2"])."""
  found = re.search(rf"{name}_dims=\{{([\d,]*)\}}", attributes) or re.search(
    rf'"{name}_dimensions":\[([^]]*)\]', attributes
  )
  return [int(d.strip('" ')) for d in found.group(1).split(",") if d.strip('" ')] if found else []


def gemm_shape(lhs: tuple[int, ...], rhs: tuple[int, ...], attributes: str) -> tuple[int, int, int, int]:
  """(b, m, n, k) of a dot: its batch, the left operand's free size, the right one's, the contracted size."""
  batch, contracting = _dims(attributes, "lhs_batch"), _dims(attributes, "lhs_contracting")
  rhs_batch, rhs_contracting = _dims(attributes, "rhs_batch"), _dims(attributes, "rhs_contracting")
  free = lambda dims, taken: math.prod(d for i, d in enumerate(dims) if i not in taken)
  return (
    math.prod(lhs[i] for i in batch),
    free(lhs, batch + contracting),
    free(rhs, rhs_batch + rhs_contracting),
    math.prod(lhs[i] for i in contracting),
  )


def _precision(dtype: str, attributes: str) -> str:
  """A matmul's: "bf16" (of any narrower type), "tf32" (float32 at XLA's default) or "f32" (precision HIGHEST)."""
  return "bf16" if dtype != "f32" else "f32" if "highest" in attributes.lower() else "tf32"


def dots(hlo: dict, computation: str, members: dict) -> tuple[list[tuple[int, int, int, int]], str]:
  """((b, m, n, k) of every dot in a fused computation and the computations it calls, their precision)."""
  shapes, precision = [], "bf16"
  for instruction in members.get(computation, ()):
    if instruction.opcode == "dot":
      (dtype, lhs), (_, rhs) = (arrays(operand_shape(hlo, o))[0] for o in instruction.operands[:2])
      shapes.append(gemm_shape(lhs, rhs, instruction.attributes))
      precision = _precision(dtype, instruction.attributes)
    for called in re.findall(r"calls=%?([\w.\-]+)", instruction.attributes):
      inner, inner_precision = dots(hlo, called, members)
      shapes += inner
      precision = inner_precision if inner else precision
  return shapes, precision


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
  """A launch's kind: cuDNN, cuBLAS and collectives by their thunk; a kernel XLA did not make (a Pallas kernel's Triton
  call) as "triton kernel" (ATOMICS where its IR adds atomically); XLA's fusions by their backend kind or name."""
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
  """(every launch, while loops) of a `*thunk_sequence.txt`: one line per thunk, `NNN: kKind
  [prev/next] kernel grid: [x, y, z] ...`, a loop's thunks indented under its kWhile. The
  instruction each runs is thunk_metadata's profile_annotation for its id (the sequence names
  XLA's deduplicated kernel, which identical fusions share), else the sequence's name."""
  annotations = {int(i): name for name, i in _ANNOTATION.findall(metadata)}
  by_kernel_name = {name.replace(".", "_"): i for name, i in hlo.items()}
  fusions = {name: i.backend_kind for name, i in by_kernel_name.items()}
  members = _members(hlo)
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
    return _gemms(common, [gemm_shape(lhs, rhs, instruction.attributes)], _precision(dtype, instruction.attributes))
  if instruction.target == "__gpu$xla.gpu.triton":
    flops, moved, atomic = triton_ir.counts(instruction.attributes)
    common.update(kind=ATOMICS if atomic else launch_kind, bytes=moved or common["bytes"])
    return Launch(**common, blocks=grid, flops=flops)
  called = re.search(r"calls=%?([\w.\-]+)", instruction.attributes)
  if launch_kind in ("gemm", "cudnn") and called:
    return _gemms(common, *dots(hlo, called.group(1), members))  # its grid and XLA's estimate: the untuned tiling's
  return Launch(**common, blocks=grid, xla_seconds=xla_estimate(instruction))


def _attention_flops(instruction: Instruction, hlo: dict) -> float:
  """cuDNN's flash attention: ATTENTION_MATMULS products of [batch, heads, Lq, Lk] scores (its
  backend config's intermediate_tensor_shape) with the head dimension, 2 FLOPs each."""
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
  """A collective: its operands' bytes and the size of its replica groups, in any of XLA's three
  spellings: {{0,1},{2,3}}, [2,2]<=[4] (groups of 2), mesh['x'=2,'y'=4] {'y'} (groups of 4)."""
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
  dtype: str  # XLA's element type: f32, bf16, s32, pred, ...
  shape: tuple[int, ...]
  bytes: int


@dataclasses.dataclass(frozen=True)
class GpuProgram:
  kernels: collections.Counter  # kind → launches per step (loop bodies counted once)
  custom_calls: collections.Counter  # custom-call target → count in the optimized HLO
  buffers: tuple[Buffer, ...]  # every array value the buffer assignment places
  loops: int  # while loops in the step (scanned layers, gradient accumulation): their bodies count once
  launches: tuple[Launch, ...] = ()  # every launch in order, for predict()

  @property
  def kernel_count(self) -> int:
    return sum(self.kernels.values())

  def buffers_of(self, dtype: str, rank: int, min_trailing: int) -> list[Buffer]:
    """Buffers of `dtype` and `rank` whose last two dimensions are both ≥ min_trailing: for
    attention, the [batch, heads, L, L] scores and probabilities a fused path never holds."""
    return [
      b
      for b in self.buffers
      if b.dtype == dtype and len(b.shape) == rank and min(b.shape[-2:], default=0) >= min_trailing
    ]

  def summary(self) -> dict:
    return {
      "kernels_per_step": self.kernel_count,
      "kernels_by_kind": dict(self.kernels.most_common()),
      "custom_calls": dict(self.custom_calls.most_common()),
      "while_loops": self.loops,
    }


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


def read_dump(folder: Path, module: str = "") -> tuple[GpuProgram, str]:
  """The program of a compiled GPU module in `folder` (the one whose name contains `module`, the
  largest where several do) and its optimized HLO text."""
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
  """(compiled, GpuProgram, XLA's cost analysis or None) of a step lowered for GPU devices. estimates: XLA
  writes its estimate of every fusion; it has a cost model for Hopper only (jax 0.12 fails an A100's compile
  with "Cannot find key: sm_80"), elsewhere fusions are costed from their bytes."""
  options = {**(DUMP_OPTIONS if estimates else {}), **(DEVICELESS_OPTIONS if jax.default_backend() != "gpu" else {})}
  with tempfile.TemporaryDirectory(prefix="wyjax-gpu-program-") as folder:
    compiled = lowered.compile(compiler_options={"xla_dump_to": folder, **options})
    program, hlo = read_dump(Path(folder))
  return compiled, program, cost_analysis(hlo)


def cost_analysis(hlo: str) -> dict | None:
  """XLA's HloCostAnalysis of the optimized GPU module, through the CPU client (an executable compiled without a
  GPU has none: `cost_analysis()` returns None). Its FLOPs and bytes are per device; custom calls (cuDNN's
  attention) count nothing. None where this jaxlib lacks the private entry points it needs."""
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

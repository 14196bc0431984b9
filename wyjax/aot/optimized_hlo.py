"""The optimized HLO module XLA:GPU dumps, read by name: its instructions, their shapes, bytes and dots.

The text is XLA's (`*gpu_after_optimizations.txt`); each reader below says what it expects.
"""

import collections
import dataclasses
import json
import math
import re

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


@dataclasses.dataclass(frozen=True)
class Instruction:
  """One instruction of the module, as its line spells it."""

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
    """A custom call's target ("__cudnn$fmhaSoftmax", "__gpu$xla.gpu.triton"); "" for other instructions."""
    found = re.search(r'custom_call_target="([^"]+)"', self.attributes)
    return found.group(1) if found else ""


def arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
  """(dtype, dims) of each array in an HLO shape's text."""
  return [
    (dtype, tuple(int(d) for d in dims.split(",") if d)) for dtype, dims in _ARRAY.findall(shape) if dtype in _BYTES
  ]


def shape_bytes(shape: str) -> float:
  """Bytes of the arrays in an HLO shape's text."""
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
  """Every instruction of an optimized HLO module's text, by name (names are unique in a module).

  A line is `[ROOT ]%name = shape opcode(%a, %b#1, /*index=5*/%c), attributes`, inside `%computation (...) {`.
  """
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
  """Seconds of XLA's own estimate of a fusion, or None where it wrote none (or an impossible one).

  The estimate is GpuPerformanceModel's: the reification_cost entry without a name, which
  --xla_gpu_collect_cost_model_stats=true writes.
  """
  found = re.search(r'"reification_cost":(\[.*?\])', instruction.attributes)
  if not found:
    return None
  estimates = {entry.get("name", ""): entry for entry in json.loads(found.group(1))}
  seconds = estimates.get("", {}).get("exec_time_us", math.nan) * 1e-6
  return seconds if math.isfinite(seconds) and seconds >= 0 else None


def computations(hlo: dict) -> dict[str, list]:
  """The module's instructions by the computation they are in."""
  members = collections.defaultdict(list)
  for instruction in hlo.values():
    members[instruction.computation].append(instruction)
  return members


def _dims(attributes: str, name: str) -> list[int]:
  """A dot's dimension numbers, in HLO's spelling or a backend config's.

  HLO's: lhs_contracting_dims={1,2}; a backend config's: "lhs_contracting_dimensions":["1","2"].
  """
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


def matmul_precision(dtype: str, attributes: str) -> str:
  """A matmul's: "bf16" (of any narrower type), "tf32" (float32 at XLA's default) or "f32" (precision HIGHEST)."""
  return "bf16" if dtype != "f32" else "f32" if "highest" in attributes.lower() else "tf32"


def dots(hlo: dict, computation: str, members: dict) -> tuple[list[tuple[int, int, int, int]], str]:
  """(b, m, n, k) of every dot in a fused computation and the computations it calls, and their precision.

  members: the module's computations().
  """
  shapes, precision = [], "bf16"
  for instruction in members.get(computation, ()):
    if instruction.opcode == "dot":
      (dtype, lhs), (_, rhs) = (arrays(operand_shape(hlo, o))[0] for o in instruction.operands[:2])
      shapes.append(gemm_shape(lhs, rhs, instruction.attributes))
      precision = matmul_precision(dtype, instruction.attributes)
    for called in re.findall(r"calls=%?([\w.\-]+)", instruction.attributes):
      inner, inner_precision = dots(hlo, called, members)
      shapes += inner
      precision = inner_precision if inner else precision
  return shapes, precision

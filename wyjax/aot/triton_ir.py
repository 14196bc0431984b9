"""A Triton kernel's FLOPs and bytes, counted from the IR in its custom call's backend config.

That is what a Pallas kernel on a GPU does, for gpu_program's launches (XLA gives it no cost of its
own). Which branch of a conditional runs depends on the kernel's inputs, which the IR does not
hold: a kernel that knows how often its conditionals take lax.cond's true branch says so in a name
scope (disentangled_attention_gpu.taken_scope), which XLA keeps in the custom call's metadata.
"""

import math
import re
from typing import NamedTuple

from wyjax.kernels.disentangled_attention_gpu import TAKEN_SCOPE

_TRITON_ELEMENT = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8}
_FOLD = {
  "arith.addi": lambda a, b: a + b,
  "arith.subi": lambda a, b: a - b,
  "arith.muli": lambda a, b: a * b,
  "arith.divsi": lambda a, b: a // b,
  "arith.divui": lambda a, b: a // b,
  "arith.ceildivsi": lambda a, b: -(-a // b),
  "arith.minsi": min,
  "arith.maxsi": max,
}


class Counts(NamedTuple):
  """What a kernel does: its FLOPs and the bytes it moves."""

  flops: float
  bytes: float  # loads, stores and atomics (an atomic's tile read and written)
  atomic_bytes: float  # the atomics' share of `bytes` (gpu_program gives a kernel with any a kind of its own)


NOTHING = Counts(0.0, 0.0, 0.0)
_TAKEN = re.compile(rf'op_name="[^"]*\b{re.escape(TAKEN_SCOPE)}(\d\.\d+)\b')


def counts(attributes: str) -> Counts:
  """The FLOPs and bytes of a Triton custom call (a Pallas kernel); NOTHING where this jaxlib cannot read its IR.

  attributes: its HLO line's backend config and metadata. Each tt.dot counts 2·M·N·K and each
  load, store and atomic its tile's bytes, times the trip counts of the loops around it (constant
  bounds; a loop whose bound is computed at run time counts once), times the grid. A conditional's
  branches count at the fractions of its runs that the kernel's taken scope gives them; without
  one, both count whole. Loads count as HBM traffic even where L2 serves them.
  """
  taken = _TAKEN.search(attributes)
  grid = [re.search(rf"grid_{axis} = (\d+)", attributes) for axis in "xyz"]
  ir_text = re.search(r'ir = "((?:[^"\\]|\\.)*)"', attributes)
  if not ir_text or not all(grid):
    return NOTHING
  try:
    from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
    from jax._src.lib import triton  # pylint: disable=g-import-not-at-top
    from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top

    context = mlir.make_ir_context()
    triton.dialect.register_dialect(context)
    with context:
      module = ir.Module.parse(_unescape(ir_text.group(1)))
      counted = _walk(module.body, 1, float(taken.group(1)) if taken else None)
  except (ImportError, AttributeError, RuntimeError, ValueError):
    return NOTHING
  programs = math.prod(int(g.group(1)) for g in grid)
  return Counts(*(count * programs for count in counted))


def _unescape(text: str) -> bytes:
  """HLO's escaping of the IR's bytes (\\XX hex, \\" and \\\\) undone."""
  out, i = bytearray(), 0
  while i < len(text):
    if text[i] == "\\" and text[i + 1] in '"\\':
      out.append(ord(text[i + 1]))
      i += 2
    elif text[i] == "\\":
      out.append(int(text[i + 1 : i + 3], 16))
      i += 3
    else:
      out += text[i].encode()
      i += 1
  return bytes(out)


def _tile(value_type) -> tuple[int, int]:
  """(elements, bytes per element) of a Triton value's type.

  The type: tensor<64x64xbf16>, of pointers tensor<64x!tt.ptr<f32>>, or a scalar.
  """
  found = re.match(r"tensor<((?:\d+x)*)(?:!tt\.ptr<)?(\w+)>+$", str(value_type))
  if not found:
    return 1, _TRITON_ELEMENT.get(str(value_type), 4)
  return math.prod(int(d) for d in found.group(1).split("x") if d), _TRITON_ELEMENT.get(found.group(2), 4)


def _constant(value) -> int | None:
  """A value's integer when its operation is a constant, or arithmetic on constants; else None."""
  operation = value.owner
  name = getattr(getattr(operation, "operation", None), "name", "")
  if name == "arith.constant":
    try:
      return int(str(operation.attributes["value"]).split(":")[0])
    except ValueError:
      return None
  if name in _FOLD:
    left, right = _constant(operation.operands[0]), _constant(operation.operands[1])
    return None if left is None or right is None else _FOLD[name](left, right)
  return None


def _walk(block, trips: float, taken: float | None) -> Counts:
  """Counts of a block run `trips` times.

  Pallas lowers lax.cond(p, true, false) to an scf.if whose then-region is the false branch (jax's
  branches[0]): that region runs 1 - taken of the times.
  """
  flops = moved = atomic = 0.0
  for operation in block.operations:
    name = operation.operation.name
    if name == "tt.dot":
      rows_by_depth = str(operation.operands[0].type)
      depth = int(re.match(r"tensor<\d+x(\d+)", rows_by_depth).group(1))
      flops += trips * 2 * _tile(operation.result.type)[0] * depth
    elif name in ("tt.load", "tt.descriptor_load", "tt.descriptor_gather"):
      moved += trips * math.prod(_tile(operation.result.type))
    elif name in ("tt.store", "tt.descriptor_store"):
      moved += trips * math.prod(_tile(operation.operands[1].type))
    elif name in ("tt.atomic_rmw", "tt.atomic_cas"):
      read_and_written = 2 * trips * math.prod(_tile(operation.result.type))
      moved, atomic = moved + read_and_written, atomic + read_and_written
    inner = trips
    if name == "scf.for":
      low, high, step = (_constant(v) for v in list(operation.operands)[:3])
      inner = trips * (max(0, -(-(high - low) // step)) if None not in (low, high, step) and step else 1)
    regions = list(operation.operation.regions)
    shares = (1 - taken, taken) if name == "scf.if" and taken is not None and len(regions) == 2 else (1,) * len(regions)
    for region, share in zip(regions, shares):
      for inner_block in region.blocks:
        more = _walk(inner_block, inner * share, taken)
        flops, moved, atomic = flops + more.flops, moved + more.bytes, atomic + more.atomic_bytes
  return Counts(flops, moved, atomic)

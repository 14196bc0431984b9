"""How fast a GEMM runs on a GPU, from XLA's own measurements on an H100 (xla_gemm_sm90.json).

The table (its source and commit inside) holds the FLOP/s XLA's authors measured for batched
GEMMs [b, m, k] · [b, k, n] at every b in {1, 2, 4} and m, n, k in {256, 512, ..., 4096}, in bf16
and in float32 (TF32). A shape between those points is interpolated as XLA's MatmulInterpolator
does, so a dimension past the table's range runs at its edge's rate.
"""

import functools
import itertools
import json
import pathlib

from wyjax.aot.accelerators import GPU_CARDS

TABLE = pathlib.Path(__file__).with_name("xla_gemm_sm90.json")
LOWEST = (1, 256, 256, 256)  # (b, m, k, n): the table's smallest and largest dimensions
HIGHEST = (4, 4096, 4096, 4096)


@functools.cache
def _table() -> tuple[str, dict[str, dict[tuple[int, int, int, int], float]]]:
  """(the card it was measured on, precision ("bf16", "tf32") → {(b, m, k, n): FLOP/s})."""
  data = json.loads(TABLE.read_text())
  precisions = data["columns"][4:]
  table = {precision: {} for precision in precisions}
  for row in data["rows"]:
    b, m, n, k = row[:4]
    for precision, flops in zip(precisions, row[4:]):
      table[precision][(b, m, k, n)] = float(flops)
  return data["card"], table


def _below(x: int) -> int:  # the power of two at or below x
  return 1 << (x.bit_length() - 1)


def _above(x: int) -> int:  # the power of two at or above x
  return 1 << (x - 1).bit_length()


def measured_flops(b: int, m: int, n: int, k: int, precision: str = "bf16") -> float:
  """FLOP/s of a [b, m, k] · [b, k, n] GEMM on the table's card, interpolated; precision "bf16" or "tf32".

  As XLA's MatmulInterpolator (xla/service/gpu/model/matmul_interpolator.cc): in each dimension of
  (b, m, k, n) the powers of two below and above the shape's, clamped to the table's range, give 16
  corners, averaged with weights 1 / (1 + the squared distance from the shape to the corner, in
  elements). A batch past 4 runs at a batch of 4's rate (pessimistic: a large batch fills the SMs),
  a dimension below 256 at the 256 one's (optimistic: small tiles run slower).
  """
  point = (max(b, 1), max(m, 1), max(k, 1), max(n, 1))
  table = _table()[1][precision]
  sides = [
    (min(max(_below(x), low), high), min(max(_above(x), low), high)) for x, low, high in zip(point, LOWEST, HIGHEST)
  ]
  weighted = total = 0.0
  for corner in itertools.product(*sides):
    weight = 1.0 / (1.0 + sum((c - x) ** 2 for c, x in zip(corner, point)))
    weighted += weight * table[corner]
    total += weight
  return weighted / total


def fraction_of_peak(b: int, m: int, n: int, k: int, precision: str = "bf16") -> float:
  """The share of the card's peak at `precision` such a GEMM reached: "bf16", "tf32" or "f32".

  "f32" (precision HIGHEST, on the CUDA cores, which the table did not measure) takes TF32's share.
  Another card's GEMMs are taken to reach the same share of its own peak.
  """
  column = "bf16" if precision == "bf16" else "tf32"
  card = GPU_CARDS[_table()[0]]
  return measured_flops(b, m, n, k, column) / card.matmul_rate(column)

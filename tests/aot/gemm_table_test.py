"""A GEMM's rate from XLA's measured H100 table (wyjax.aot.gemm_table), against figures read
here from the table's source (tensorflow/tensorflow 9bebee8e, third_party/xla/xla/service/gpu/
model/matmul_interpolator_data.h, kDefaultMatmulPTable "sm_90") and averaged by hand as XLA's
MatmulInterpolator weighs them: 1 / (1 + squared distance) over the power-of-two corners."""

import pytest

from wyjax.aot import gemm_table

H100_BF16, H100_TF32 = 989e12, 494.5e12
# (b, m, n, k) → (BF16xBF16->BF16, F32xF32->F32) FLOP/s, as the source writes them.
SOURCE = {
  (1, 4096, 4096, 4096): (786048187408492, 403834320513611),
  (1, 4096, 512, 512): (239247286987522, 124045959334565),
  (1, 4096, 512, 1024): (372827022222222, 186284147120055),
  (1, 4096, 1024, 512): (345921979381443, 145414656554712),
  (1, 4096, 1024, 1024): (491640029304029, 258857720347155),
  (1, 4096, 4096, 512): (543391611336032, 235160276828734),
  (1, 4096, 4096, 1024): (681092181414525, 310285168039300),
  (4, 256, 256, 256): (24745156342182, 17848102127659),
}


def test_every_shape_of_the_grid_is_the_table_s_own_figure():
  for (b, m, n, k), (bf16, tf32) in SOURCE.items():
    assert gemm_table.measured_flops(b, m, n, k, "bf16") == bf16
    assert gemm_table.measured_flops(b, m, n, k, "tf32") == tf32
  table = gemm_table._table()[1]  # pylint: disable=protected-access
  assert {len(table["bf16"]), len(table["tf32"])} == {3 * 5 * 5 * 5}  # b 1, 2, 4; m, n, k 256 … 4096


def test_bert_base_s_projection_is_the_mean_of_its_four_neighbours():
  """16,384 × 768 × 768: m clamps to 4,096 on both sides; k and n lie halfway between 512 and
  1,024, so the four distinct corners are equidistant: their plain mean, 37% of the bf16 peak."""
  mean = sum(SOURCE[(1, 4096, n, k)][0] for n in (512, 1024) for k in (512, 1024)) / 4
  assert gemm_table.measured_flops(1, 16384, 768, 768) == pytest.approx(mean, rel=1e-12)
  assert gemm_table.fraction_of_peak(1, 16384, 768, 768) == pytest.approx(mean / H100_BF16, rel=1e-12)
  assert gemm_table.fraction_of_peak(1, 16384, 768, 768) == pytest.approx(0.366, abs=1e-3)


def test_a_nearer_corner_weighs_more():
  """k = 640 between 512 (128 away) and 1,024 (384 away): weights 1 / (1 + 128²) and 1 / (1 + 384²)."""
  near, far = 1 / (1 + 128**2), 1 / (1 + 384**2)
  for column, precision in ((0, "bf16"), (1, "tf32")):
    by_hand = (near * SOURCE[(1, 4096, 4096, 512)][column] + far * SOURCE[(1, 4096, 4096, 1024)][column]) / (near + far)
    assert gemm_table.measured_flops(1, 4096, 4096, 640, precision) == pytest.approx(by_hand, rel=1e-12)


def test_small_and_batched_shapes_clamp_to_the_table_s_edges():
  """Below 256 a dimension takes 256's figure and a batch past 4 takes 4's (XLA's clamps); float32
  at precision HIGHEST takes TF32's share of the peak."""
  assert gemm_table.measured_flops(384, 64, 64, 64) == SOURCE[(4, 256, 256, 256)][0]
  assert gemm_table.fraction_of_peak(1, 4096, 4096, 4096, "f32") == pytest.approx(
    SOURCE[(1, 4096, 4096, 4096)][1] / H100_TF32, rel=1e-12
  )

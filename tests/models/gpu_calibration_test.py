"""The calibrated GPU step (wyjax.core.gpu_step_time): each calibration group's kernels take its
factor and each launch the fitted time, by hand on launches written here; and the shipped factors
(wyjax/core/gpu_calibration.json) are the least-squares fit on the split's fit points only
(benchmarks/gpu_predictions.py), with the error each half reports."""
import collections
import json
import pathlib
import sys

import numpy as np
import pytest

from wyjax.core import gpu_cards, gpu_program, gpu_step_time

REPO = pathlib.Path(__file__).resolve().parents[2]
H100_PEAK, H100_BANDWIDTH = 989e12, 3.35e12
LAUNCH = 1e-6  # XLA's kKernelLaunchOverhead, in every uncalibrated kernel
GEMM_2048_4096_4096 = 760440385269121  # XLA's measured H100 table: bf16, b 1, m 2048, n 4096, k 4096
MIB4 = 4 * 2**20


def test_each_group_takes_its_factor_and_each_launch_the_fitted_time():
  """A GEMM run twice in a loop (matmul), an elementwise fusion (memory), a Pallas kernel, cuDNN's
  attention (matmul too) and an all-reduce (no factor: as costed, its latency no launch)."""
  launches = (
      gpu_program.Launch("gemm_fusion", "gemm", repeats=2, bytes=MIB4, flops=2 * 2048 * 4096 * 4096,
                         gemms=((1, 2048, 4096, 4096),)),
      gpu_program.Launch("loop_add_fusion", "elementwise", bytes=MIB4),
      gpu_program.Launch("pallas_kernel", "triton kernel", blocks=132, bytes=MIB4, flops=1e9),
      gpu_program.Launch("attention", "cudnn", bytes=MIB4, flops=1e12),
      gpu_program.Launch("all-reduce", "collective", bytes=MIB4, collective="all-reduce", peers=2))
  program = gpu_program.GpuProgram(collections.Counter(l.kind for l in launches), collections.Counter(), (), 1,
                                   launches)
  fitted = gpu_step_time.Calibration({"matmul": 0.5, "memory": 2.0, "pallas kernel": 3.0}, 4e-6, (0.9, 1.2), "test")
  prediction = gpu_step_time.predict(program, gpu_cards.CARDS["h100"], fitted)
  gemm = 2 * 2048 * 4096 * 4096 / GEMM_2048_4096_4096
  memory = MIB4 / H100_BANDWIDTH
  pallas = max(1e9 / H100_PEAK, memory)
  attention = 1e12 / (H100_PEAK * 0.75)
  ring = 5e-6 + MIB4 / 450e9  # all-reduce over 2: 2(n − 1)/n = 1 of its bytes at NVLink, plus 5 µs
  uncalibrated = [2 * (gemm + LAUNCH), memory + LAUNCH, pallas + LAUNCH, attention + LAUNCH, ring]
  calibrated = [0.5 * 2 * gemm + 2 * 4e-6, 2.0 * memory + 4e-6, 3.0 * pallas + 4e-6, 0.5 * attention + 4e-6, ring]
  assert [k.uncalibrated for k in prediction.kernels] == pytest.approx(uncalibrated, rel=1e-9)
  assert [k.seconds for k in prediction.kernels] == pytest.approx(calibrated, rel=1e-9)
  assert prediction.seconds == pytest.approx(sum(calibrated), rel=1e-9)
  assert prediction.band() == pytest.approx((0.9 * sum(calibrated), 1.2 * sum(calibrated)), rel=1e-9)
  assert prediction.by_kind()["gemm"] == pytest.approx(calibrated[0], rel=1e-9)


def _shipped():
  sys.path.insert(0, str(REPO / "benchmarks"))
  import gpu_predictions  # pylint: disable=g-import-not-at-top
  records = [json.loads(line) for line in gpu_predictions.RESULTS.read_text().splitlines()]
  return gpu_predictions, records, json.loads(gpu_step_time.CALIBRATION.read_text())


def _least_squares(records: list[dict], columns) -> np.ndarray:
  """Factors minimising the squared relative error over `records` of measured ≈ Σ factor × column
  + XLA's 1 µs × launches: the normal equations, each row divided by its measurement."""
  measured = np.array([r["measured_seconds"] for r in records])
  rows = np.array([[column(r) for column in columns] for r in records]) / measured[:, None]
  target = 1 - np.array([r["launches"] for r in records]) * LAUNCH / measured
  return np.linalg.solve(rows.T @ rows, rows.T @ target)


def test_the_shipped_factor_is_fitted_on_the_fit_half_only():
  """The split of #62 item 5: fitted on the three steps measured at e7dca87, the 14 older programs
  held out. A factor per group (GEMMs with cuDNN, XLA's other kernels) fits them with one below
  zero, so one factor takes every group's work, and a launch XLA's 1 µs."""
  module, records, shipped = _shipped()
  held_out = {r["name"] for r in records if r["held_out"]}
  assert set(module.FIT) == set(shipped["fitted_on"]) and len(records) == 17
  assert held_out == set(shipped["held_out"]) == {r["name"] for r in records} - set(module.FIT) and len(held_out) == 14
  fit_points = [r for r in records if not r["held_out"]]
  per_group = _least_squares(fit_points, [lambda r, g=g: r["work_by_group"][g] for g in ("matmul", "memory")])
  assert per_group.min() < 0 and shipped["refused_per_group_fit"] == pytest.approx(
      dict(zip(("matmul", "memory"), per_group)), rel=1e-6)
  work = lambda r: sum(r["work_by_group"].values())
  (factor,) = _least_squares(fit_points, [work])
  assert shipped["factors"] == pytest.approx(dict.fromkeys(("matmul", "memory", "pallas kernel"), factor), rel=1e-9)
  assert shipped["launch_seconds"] == LAUNCH and not shipped["launch_fitted"]
  (leaked,) = _least_squares(records, [work])  # had a held-out point been fitted on, the factor would move
  assert abs(leaked / factor - 1) > 0.01


def test_the_reported_errors_are_those_of_the_shipped_factors():
  """measured ÷ (Σ factor × work + launch time × launches), point by point; the band is the held-out range."""
  _, records, shipped = _shipped()
  ratios = {r["name"]: r["measured_seconds"] / (sum(shipped["factors"].get(g, 1.0) * s for g, s in r["work_by_group"].items())
                                                + shipped["launch_seconds"] * r["launches"]) for r in records}
  assert {**shipped["fitted_on"], **shipped["held_out"]} == pytest.approx(ratios, abs=1e-4)
  held = [ratios[name] for name in shipped["held_out"]]
  assert shipped["held_out_band"] == pytest.approx([min(held), max(held)], rel=1e-9)
  assert gpu_step_time.calibration().band == tuple(shipped["held_out_band"])

"""The calibrated GPU step (wyjax.aot.gpu_step_time): each kernel takes the factor of its kind, by
hand on launches written here; the fit (benchmarks/gpu_predictions.py) on kernel points with
known answers, and on a profile joined kernel by kernel; and the shipped factors
(wyjax/aot/gpu_calibration.json) are the ratio of sums of the split's fit steps' kernels only,
with the error each half reports."""

import collections
import json
import pathlib
import sys

import pytest

from wyjax.aot import gpu_program, gpu_step_time
from wyjax.aot.accelerators import GPU_CARDS

REPO = pathlib.Path(__file__).resolve().parents[2]
H100_PEAK, H100_BANDWIDTH = 989e12, 3.35e12
LAUNCH = 1e-6  # XLA's kKernelLaunchOverhead, in every uncalibrated kernel
GEMM_2048_4096_4096 = 760440385269121  # XLA's measured H100 table: bf16, b 1, m 2048, n 4096, k 4096
MIB4 = 4 * 2**20


def test_each_kind_takes_its_factor_launch_included():
  """A GEMM run twice in a loop, an elementwise fusion, a Pallas kernel (a kind without a factor:
  the default), cuDNN's attention and an all-reduce (as costed)."""
  launches = (
    gpu_program.Launch(
      "gemm_fusion", "gemm", repeats=2, bytes=MIB4, flops=2 * 2048 * 4096 * 4096, gemms=((1, 2048, 4096, 4096),)
    ),
    gpu_program.Launch("loop_add_fusion", "elementwise", bytes=MIB4),
    gpu_program.Launch("pallas_kernel", "triton kernel", blocks=132, bytes=MIB4, flops=1e9),
    gpu_program.Launch("attention", "cudnn", bytes=MIB4, flops=1e12),
    gpu_program.Launch("all-reduce", "collective", bytes=MIB4, collective="all-reduce", peers=2),
  )
  program = gpu_program.GpuProgram(
    collections.Counter(launch.kind for launch in launches), collections.Counter(), (), 1, launches
  )
  fitted = gpu_step_time.Calibration({"gemm": 0.5, "elementwise": 2.0, "cudnn": 3.0}, 1.5, (0.9, 1.2), "test")
  prediction = gpu_step_time.predict(program, GPU_CARDS["h100"], fitted)
  gemm = 2 * 2048 * 4096 * 4096 / GEMM_2048_4096_4096
  memory = MIB4 / H100_BANDWIDTH
  pallas = max(1e9 / H100_PEAK, memory)
  attention = 1e12 / (H100_PEAK * 0.75)
  ring = 5e-6 + MIB4 / 450e9  # all-reduce over 2: 2(n − 1)/n = 1 of its bytes at NVLink, plus 5 µs
  uncalibrated = [2 * (gemm + LAUNCH), memory + LAUNCH, pallas + LAUNCH, attention + LAUNCH, ring]
  calibrated = [0.5 * uncalibrated[0], 2.0 * uncalibrated[1], 1.5 * uncalibrated[2], 3.0 * uncalibrated[3], ring]
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


def test_a_step_measured_at_another_commit_is_another_point():
  """gpu_predictions.py --measured replaces a record of its own commit and name, never another commit's."""
  module, *_ = _shipped()
  step = "BERT-base step, 32 × 512, attention=auto"
  older, again = {"commit": "e7dca87", "name": step, "measured_seconds": 0.125}, {"commit": "1fe8d02", "name": step}
  measured = [{"commit": "1fe8d02", "name": step, "measured_seconds": 0.029}]
  assert module.merged([older, {**again, "measured_seconds": 0.05}], measured) == [older, *measured]


def _point(commit, name, measured, costed, kernels=None):
  """A record as gpu_predictions writes one: a step's time, its uncalibrated seconds by kind and, for a
  profiled step, its measured seconds and kernels by kind."""
  return {
    "commit": commit,
    "name": name,
    "measured_seconds": sum(measured.values()) if kernels else measured,
    "uncalibrated_seconds_by_kind": costed,
    "date": "2026-11-28",
    "predictor": "test",
    **({"measured_seconds_by_kind": measured, "measured_kernels_by_kind": kernels} if kernels else {}),
  }


def test_the_fit_is_each_kind_s_ratio_of_sums_over_the_fit_steps_kernels(monkeypatch):
  """Two profiled fit steps: gemm 3 + 5 ms measured against 4 + 4 costed, 1.0; cudnn 6 against 2,
  3.0; an unmatched 1 ms kernel costs nothing, so takes no factor; every other kind (a Pallas
  kernel) the pooled 15 / 10 = 1.5. A held-out step of gemm 10 ms, Pallas 2 costed predicts
  10 + 3 = 13 ms; measured 26, its ratio is 2. Fitted on, it would move the gemm factor; fitted
  on for its Pallas kernel only (as the sixth split fits dcc430c's step), it gives that kind its
  ratio, 3, moves no other, and joins the pooled factor: (15 + 6) / (10 + 2)."""
  module, *_ = _shipped()
  fit_points = [
    _point("a", "one step, x", {"gemm": 3e-3, "cudnn": 6e-3}, {"gemm": 4e-3, "cudnn": 2e-3}, {"gemm": 10, "cudnn": 4}),
    _point("a", "two step, x", {"gemm": 5e-3, "unmatched": 1e-3}, {"gemm": 4e-3}, {"gemm": 10, "unmatched": 1}),
  ]
  held_out = _point("b", "three step, x", 26e-3, {"gemm": 10e-3, "triton kernel": 2e-3})
  monkeypatch.setattr(module, "FIT", {(r["commit"], r["name"]): module.ALL_KINDS for r in fit_points})
  fitted = module.fit([*fit_points, held_out])
  assert fitted["factors"] == pytest.approx({"gemm": 1.0, "cudnn": 3.0}, rel=1e-12)
  assert fitted["default_factor"] == pytest.approx(1.5, rel=1e-12)
  assert fitted["fitted_on_kernels"]["gemm"] == {"kernels": 20, "measured_ms": 8.0, "uncalibrated_ms": 8.0}
  assert fitted["held_out"] == {"three step, x (b)": pytest.approx(2.0, rel=1e-9)}
  assert fitted["held_out_band"] == pytest.approx([2.0, 2.0], rel=1e-9)
  assert fitted["fitted_on"] == {
    "one step, x (a)": pytest.approx(9 / 10, abs=1e-4),  # 9 ms against 4 + 6
    "two step, x (a)": pytest.approx(6 / 4, abs=1e-4),
  }
  leaked = {
    **held_out,
    "measured_seconds_by_kind": {"gemm": 20e-3, "triton kernel": 6e-3},
    "measured_kernels_by_kind": {"gemm": 5, "triton kernel": 1},
  }
  other = _point("c", "four step, x", 1e-3, {"gemm": 1e-3})  # a fit needs a held-out point to report
  fitted_before = {**module.FIT}
  monkeypatch.setattr(module, "FIT", {**fitted_before, ("b", "three step, x"): module.ALL_KINDS})
  assert module.fit([*fit_points, leaked, other])["factors"]["gemm"] == pytest.approx(28 / 18, rel=1e-12)
  monkeypatch.setattr(module, "FIT", {**fitted_before, ("b", "three step, x"): ("triton kernel",)})
  fitted = module.fit([*fit_points, leaked, other])
  assert fitted["factors"] == pytest.approx({"gemm": 1.0, "cudnn": 3.0, "triton kernel": 3.0}, rel=1e-12)
  assert fitted["default_factor"] == pytest.approx(21 / 12, rel=1e-12)
  assert set(fitted["held_out"]) == {"four step, x (c)"}


def test_a_profiled_step_is_joined_kernel_by_kernel_into_its_record(tmp_path):
  """gpu_predictions.py --measured on a profile folder: the trace's kernels a step by the kind the
  join gives them (tests/profile_vs_prediction_test.py's trace: two steps, each an elementwise
  fusion twice at 15 µs, a GEMM at 100, a cuDNN kernel at 50, an unknown one at 8)."""
  from tests import profile_vs_prediction_test as profiled  # pylint: disable=g-import-not-at-top

  module, *_ = _shipped()
  folder = tmp_path / "pretrain-BERT-base-wyjax-auto"
  profiled._gpu_trace(folder, steps=2)  # pylint: disable=protected-access
  (folder / "prediction.json").write_text(json.dumps({**profiled.PREDICTION, "measured_step_seconds": 0.2e-3}))
  r = module.measured_record(folder, "abc1234")
  assert (r["name"], r["commit"], r["measured_seconds"], r["date"]) == (
    "BERT-base step, 32 × 512, attention=auto",
    "abc1234",
    0.2e-3,
    "2026-11-28",
  )
  assert r["measured_seconds_by_kind"] == pytest.approx(
    {"gemm": 100e-6, "cudnn": 50e-6, "elementwise": 30e-6, "unmatched": 8e-6, "reduction": 0.0}, rel=1e-9
  )
  assert r["measured_kernels_by_kind"] == {"gemm": 1, "cudnn": 1, "elementwise": 2, "unmatched": 1, "reduction": 0}
  assert r["uncalibrated_seconds_by_kind"] == pytest.approx({"gemm": 35e-6, "elementwise": 20e-6, "reduction": 3e-6})
  (folder / "prediction.json").write_text(
    json.dumps({**profiled.PREDICTION, "measured_step_seconds": 0.2e-3, "batch": 4, "length": 4096})
  )  # gpu.py --length=4096
  assert module.measured_record(folder, "abc1234")["name"] == "BERT-base step, 4 × 4096, attention=auto"


def test_the_shipped_factors_are_the_fit_steps_kernel_sums_only():
  """The sixth split of #62: every kind fitted on the kernels of the three steps measured and
  profiled at 5f2479d (2026-11-29), the Pallas kernel's two kinds on dcc430c's DeBERTa-base step
  through it and nothing else of that step; the other 23 held out (1fe8d02's, a000c01's and
  254118f's steps, e7dca87's three, the 14 of 2026-11-26, dcc430c's BERT-base); each kind's
  factor its measured ÷ uncalibrated seconds summed over the steps that fit it, the default
  every fitted kernel's."""
  module, records, shipped = _shipped()
  fit_points = [r for r in records if not r["held_out"]]
  steps = {
    ("5f2479d", f"{model} step, 32 × 512, attention={attention}"): module.ALL_KINDS
    for model, attention in (
      ("BERT-base", "auto"),
      ("DeBERTa-base", "auto"),
      ("DeBERTa-base", "auto/attention_dropout=0.1"),
    )
  }
  pallas = ("triton kernel", gpu_program.ATOMICS)
  assert module.FIT == {**steps, ("dcc430c", "DeBERTa-base step, 32 × 512, attention=pallas"): pallas}
  assert {(r["commit"], r["name"]) for r in fit_points} == set(module.FIT)
  assert set(shipped["fitted_on"]) == {f"{r['name']} ({r['commit']})" for r in fit_points}
  assert set(shipped["held_out"]) == {f"{r['name']} ({r['commit']})" for r in records if r["held_out"]}
  assert len(records) == 27 and len(shipped["held_out"]) == 23
  fitted = lambda r, field: {
    kind: x for kind, x in r[field].items() if module.FIT[r["commit"], r["name"]] is module.ALL_KINDS or kind in pallas
  }
  sums = lambda field, kind: sum(fitted(r, field).get(kind, 0.0) for r in fit_points)
  kinds = {kind for r in fit_points for kind in fitted(r, "measured_seconds_by_kind")}
  by_hand = {
    kind: sums("measured_seconds_by_kind", kind) / sums("uncalibrated_seconds_by_kind", kind)
    for kind in kinds
    if sums("uncalibrated_seconds_by_kind", kind)
  }
  assert shipped["factors"] == pytest.approx(by_hand, rel=1e-12)
  assert {"gemm", "cudnn", "transpose", "reduction", *pallas} <= set(by_hand)
  pallas_step = next(r for r in fit_points if r["commit"] == "dcc430c")
  for kind in pallas:  # that step alone fits them
    assert by_hand[kind] == pytest.approx(
      pallas_step["measured_seconds_by_kind"][kind] / pallas_step["uncalibrated_seconds_by_kind"][kind], rel=1e-12
    )
  pooled = sum(sum(fitted(r, "measured_seconds_by_kind").values()) for r in fit_points) / sum(
    sum(fitted(r, "uncalibrated_seconds_by_kind").values()) for r in fit_points
  )
  assert shipped["default_factor"] == pytest.approx(pooled, rel=1e-12)
  # The profiles' kernels sum to the fit steps' measured times within 3% (29.37 against 29.47 ms, 74.41 against
  # 72.47, 70.56 against 69.84; dcc430c's 110.0 against 109.4).
  for r in fit_points:
    assert sum(r["measured_seconds_by_kind"].values()) == pytest.approx(r["measured_seconds"], rel=0.03)
  for held_out in (r for r in records if r["held_out"] and "measured_seconds_by_kind" in r):  # fitted on, it would move
    moved = (sums("measured_seconds_by_kind", "gemm") + held_out["measured_seconds_by_kind"].get("gemm", 0.0)) / (
      sums("uncalibrated_seconds_by_kind", "gemm") + held_out["uncalibrated_seconds_by_kind"].get("gemm", 0.0)
    )
    assert abs(moved / shipped["factors"]["gemm"] - 1) > 0.01, held_out["name"]


def test_the_reported_errors_are_those_of_the_shipped_factors():
  """measured ÷ Σ factor of kind × uncalibrated seconds of kind, point by point; the band is the held-out range."""
  _, records, shipped = _shipped()
  calibrated = lambda r: sum(
    shipped["factors"].get(kind, shipped["default_factor"]) * s for kind, s in r["uncalibrated_seconds_by_kind"].items()
  )
  ratios = {f"{r['name']} ({r['commit']})": r["measured_seconds"] / calibrated(r) for r in records}
  assert {**shipped["fitted_on"], **shipped["held_out"]} == pytest.approx(ratios, abs=1e-4)
  held = [ratios[name] for name in shipped["held_out"]]
  assert shipped["held_out_band"] == pytest.approx([min(held), max(held)], rel=1e-9)
  assert gpu_step_time.calibration().band == tuple(shipped["held_out_band"])


def test_the_gpu_kernel_s_backward_is_kinded_apart_in_the_records():
  """The Pallas GPU kernel's training programs with DeBERTa's relative terms carry seconds of
  gpu_program.ATOMICS (its _dq_kernel and _dkv_kernel add the relative scores' gradients atomically); its
  forward passes and BERT's plain flash attention none. c147d65's DeBERTa-base step compiled here and
  dcc430c's record, split by its profile's kernels, cost the same backward (13.05 ms; 13.11 while
  both branches of its adds counted, which no tile pair of 512 tokens takes both of). At 1,024 and
  4,096 keys, where 22% and 75% of tile pairs add row sums, the backward costs less than both
  branches did (1.95 against 2.11 ms, 6.18 against 8.21)."""
  _, records, _ = _shipped()
  through_the_kernel = {r["name"]: r["uncalibrated_seconds_by_kind"] for r in records if r["route"] == "kernel"}
  assert len(through_the_kernel) == 8
  for name, by_kind in through_the_kernel.items():
    trains, relative = "forward," not in name, not name.startswith("BERT")
    assert (gpu_program.ATOMICS in by_kind) == (trains and relative), name
  compiled, profiled = (
    r["uncalibrated_seconds_by_kind"][gpu_program.ATOMICS]
    for r in records
    if r["route"] == "kernel" and r["name"].startswith("DeBERTa-base step")
  )
  assert compiled == pytest.approx(13.05e-3, abs=0.01e-3) and profiled == pytest.approx(compiled, abs=0.01e-3)
  backward = {
    r["name"].split(", ")[1]: r["uncalibrated_seconds_by_kind"][gpu_program.ATOMICS]
    for r in records
    if r["route"] == "kernel" and r["name"].startswith("attention") and "forward+backward" in r["name"]
  }
  assert backward == pytest.approx({"L = 512": 1.088e-3, "L = 1024": 1.955e-3, "L = 4096": 6.184e-3}, abs=0.001e-3)

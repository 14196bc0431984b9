"""A run's metrics: metrics.jsonl and TensorBoard's event file, written without importing torch
(tensorboardX imports it wherever it is installed: 1.6 s of every training command)."""

import json
import subprocess
import sys

from wyjax.core import run_metrics


def test_metrics_reach_jsonl_and_tensorboard_without_importing_torch(tmp_path):
  script = (
    f"import sys\nfrom wyjax.core import run_metrics\nwriter = run_metrics.MetricWriter({str(tmp_path)!r})\n"
    "writer.write(3, {'loss': 1.5})\nwriter.close()\n"
    "assert 'torch' not in sys.modules, 'writing the metrics imported torch'\n"
    "import torch  # still importable\n"
  )
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={"JAX_PLATFORMS": "cpu"})
  assert result.returncode == 0, result.stderr[-2000:]
  assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 3, "loss": 1.5}
  (events,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
  assert b"loss" in events.read_bytes()


def test_the_step_clock_sets_the_evaluations_apart_and_starts_each_lap_at_the_last():
  ticks = iter([10.0, 11.0, 14.0, 15.0, 17.5, 18.0, 18.25])
  clock = run_metrics.StepClock(clock=lambda: next(ticks))  # started at 10
  with clock.set_apart():  # 11 → 14: an evaluation's 3 s
    pass
  assert clock.lap() == 2.0  # at 15: 5 s, 3 of them the evaluation's
  with clock.set_apart():  # 17.5 → 18
    pass
  assert clock.lap() == 2.75  # at 18.25: from 15, without the 0.5 s

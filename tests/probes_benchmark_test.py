"""benchmarks/probes.py's arithmetic: the rank correlation it reports and the steady training
time it subtracts from a run's wall time (the whole benchmark takes an hour: docs/benchmarks.md)."""

import json
import math

import pytest

from benchmarks import probes as probes_benchmark


@pytest.mark.parametrize(
  "a, b, expected",
  [
    ([1, 2, 3, 4], [10, 20, 30, 40], 1.0),
    ([1, 2, 3, 4], [0.4, 0.3, 0.2, 0.1], -1.0),
    ([1, 2, 2, 3], [1, 2, 3, 4], 4.5 / math.sqrt(4.5 * 5)),  # tied ranks 1.5, 1.5 (by hand)
  ],
)
def test_spearman(a, b, expected):
  assert probes_benchmark.spearman(a, b) == pytest.approx(expected)


def test_spearman_of_a_constant_is_undefined():
  assert math.isnan(probes_benchmark.spearman([1, 1, 1], [1, 2, 3]))


def test_steady_seconds_leave_out_the_intervals_that_evaluate(tmp_path):
  """Logs every 10 steps at 1, 2, 3 and 4 s a step and an evaluation at step 20; step 0 counts as
  evaluated with or without its record (a run evaluates where it starts; here it has none). The
  intervals 0-10 and 20-30 hold evaluations, so the steady time is 10 × 2 + 10 × 4 seconds."""
  logged = [{"step": step, "step_seconds": seconds} for step, seconds in ((10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0))]
  metrics = [*logged[:2], {"step": 20, "valid_loss": 4.0}, *logged[2:]]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
  assert probes_benchmark.steady_seconds(tmp_path) == pytest.approx(60.0)

"""benchmarks/gpu.py, the GPU yardstick, as CI can run it: every part with tiny sizes on the CPU
(--smoke), one markdown table; a part over its budget is stopped with a row saying so."""

import json
import re
import subprocess
import sys

import pytest

from tests.train.conftest import REPO_ROOT, pretrain_env

GPU_BENCHMARK = REPO_ROOT / "benchmarks" / "gpu.py"


def _table(result, heading: str = "") -> list[list[str]]:
  """The rows of the markdown table after `heading` (the first table without one), to the next heading."""
  assert result.returncode == 0, result.stderr[-3000:]
  text = result.stdout.split(heading, 1)[1] if heading else result.stdout
  return [
    [cell.strip() for cell in line.strip("|").split("|")]
    for line in text.split("\n## ")[0].splitlines()
    if line.startswith("| ") and not line.startswith(("| part", "| trace"))
  ]


def test_every_part_measures_both_sides_on_the_cpu(shared_data, tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      str(GPU_BENCHMARK),
      "--smoke",
      f"--data={shared_data}",
      f"--out={tmp_path}",
      "--attentions=auto",
      "--rtd_attentions=auto",
      "--bert_attentions=xla",
      "--length=128",
      f"--profile={tmp_path / 'traces'}",
    ],
    cwd=REPO_ROOT,
    env=pretrain_env(TMPDIR=str(tmp_path)),
    capture_output=True,
    text=True,
    timeout=1500,
  )
  rows = _table(result)
  assert result.stdout.startswith("# no GPU (CPU); Python 3.")
  assert not [r for r in rows if r[1] == "–"], result.stdout  # no part failed or overran
  by_part = {part: [r for r in rows if r[0] == part] for part in ("pretrain", "finetune", "predict", "attention")}
  for part in ("pretrain", "finetune", "predict"):
    measurements = {r[1] for r in by_part[part]}
    for measurement in measurements:  # each: wyjax, transformers, and wyjax's rate over theirs
      sides = [r[2] for r in by_part[part] if r[1] == measurement]
      if measurement.startswith("DeBERTa-v3-base"):  # replaced-token detection: transformers has no such step
        assert set(sides) == {"wyjax"}, (measurement, sides)
        continue
      assert {"wyjax", "transformers", "wyjax ÷ transformers"} <= set(sides), (measurement, sides)
      assert all(
        re.fullmatch(r"\*\*\d+\.\d\d×\*\* .+", r[3])
        for r in by_part[part]
        if r[1] == measurement and r[2] == "wyjax ÷ transformers"
      )
  assert len({r[1] for r in by_part["pretrain"]}) == 3 and len({r[1] for r in by_part["finetune"]}) == 1
  assert all(" pretraining step, 2 × 128, bf16" in r[1] for r in by_part["pretrain"])  # 256 tokens, --length=128
  assert {r[5].split(";")[0] for r in by_part["pretrain"] if r[2] == "wyjax"} == {"attention=auto", "attention=xla"}
  assert all(re.search(r"[\d,]+ tokens/s", r[3]) for r in by_part["pretrain"] if r[2] != "wyjax ÷ transformers")
  assert all(
    re.search(r"s wall, [\d.]+ s/step .* dev \d+\.\d\d", r[3])
    for r in by_part["finetune"]
    if r[2] != "wyjax ÷ transformers"
  )
  (attention,) = by_part["attention"]  # the GPU kernel, interpreted, against the XLA path
  errors = re.fullmatch(r"largest relative error: output (\S+), gradients (\S+)", attention[3])
  assert errors and max(float(errors[1]), float(errors[2])) < 1e-4, attention
  # --profile: each side's trace of the pretrain and predict parts, its top kernels (ops, on a CPU) by time
  kernels = _table(result, "## Top kernels by time")
  traces = {trace.split(" (")[0] for trace, *_ in kernels}
  assert traces == {
    "pretrain-DeBERTa-base-wyjax-auto",
    "pretrain-DeBERTa-base-transformers",
    "pretrain-DeBERTa-v3-base-wyjax-auto",
    "pretrain-BERT-base-wyjax-xla",
    "pretrain-BERT-base-transformers",
    "predict-wyjax",
    "predict-transformers",
  }, traces
  for trace in traces:
    rows = [r for r in kernels if r[0] == f"{trace} (CPU ops)"]
    assert 1 <= len(rows) <= 10 and all(float(r[2]) >= 0 and int(r[3]) >= 1 for r in rows), (trace, rows)
    assert float(rows[0][2]) > 0 and [float(r[2]) for r in rows] == sorted((float(r[2]) for r in rows), reverse=True)
  # Every wyjax step profiled before any transformers step: torch's profiler keeps CUPTI from jax's after it.
  written = {
    path.relative_to(tmp_path / "traces").parts[0]: path.stat().st_mtime
    for path in (tmp_path / "traces").glob("pretrain-*/**/*trace.json*")
  }
  assert len(written) == 5 and max(t for name, t in written.items() if "-wyjax-" in name) < min(
    t for name, t in written.items() if name.endswith("-transformers")
  ), written
  # The profile against the prediction of its compile: none on a CPU, each wyjax pretraining trace says so ...
  joined = result.stdout.split("## Profile against prediction", 1)[1]
  for trace in ("pretrain-DeBERTa-base-wyjax-auto", "pretrain-BERT-base-wyjax-xla", "predict-wyjax"):
    assert f"### {trace}: no prediction.json beside its trace" in joined, joined
  # ... and the join runs on the smoke trace given one: its three costliest CPU ops, predicted at 1 ms each.
  trace = "pretrain-BERT-base-wyjax-xla"
  ops = [r[1].strip("`") for r in kernels if r[0] == f"{trace} (CPU ops)"][:3]
  (tmp_path / "traces" / trace / "prediction.json").write_text(
    json.dumps(
      {
        "card": "h100",
        "steps": 2,
        "kernels": [
          {"name": op, "kernel": op, "kind": "elementwise", "repeats": 1, "uncalibrated": 5e-4, "seconds": 1e-3}
          for op in ops
        ],
      }
    )
  )
  join = subprocess.run(
    [sys.executable, str(REPO_ROOT / "benchmarks" / "profile_vs_prediction.py"), str(tmp_path / "traces")],
    capture_output=True,
    text=True,
  )
  assert join.returncode == 0, join.stderr[-3000:]
  section = join.stdout.split(f"### {trace} (CPU ops): ", 1)[1].split("\n### ", 1)[0]
  measured = float(re.match(r"measured ([\d.]+) ms a step, predicted 3\.000 \(calibrated; h100, 2 steps", section)[1])
  kinds_table = section.split("| kernel (the", 1)[0]
  by_kind = {
    cells[0]: cells[1:]
    for cells in (
      [c.strip() for c in line.strip("|").split("|")] for line in kinds_table.splitlines()[3:] if line.startswith("| ")
    )
  }
  assert by_kind["elementwise"][1] == "3.000" and float(by_kind["elementwise"][0]) > 0, section
  assert sum(float(cells[0]) for cells in by_kind.values()) == pytest.approx(measured, abs=0.01), section


def test_a_part_over_its_budget_is_stopped_with_a_row(shared_data, tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      str(GPU_BENCHMARK),
      "--smoke",
      f"--data={shared_data}",
      f"--out={tmp_path}",
      "--parts=finetune",
      "--budgets=finetune=3",
    ],
    cwd=REPO_ROOT,
    env=pretrain_env(TMPDIR=str(tmp_path)),
    capture_output=True,
    text=True,
    timeout=120,
  )
  (stopped,) = _table(result)
  assert stopped[:4] == ["finetune", "–", "–", "stopped: over its budget of 3 s"], stopped
  assert stopped[5].startswith(str(tmp_path / "wyjax-gpu-finetune.log")) or stopped[5] == "", stopped

"""--compile_only: the real pretraining step compiled for a TPU topology through libtpu, or for
a GPU through XLA:GPU, on this CPU; its report checked against figures computed here
independently."""

import dataclasses
import json
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.aot import accelerators
from wyjax.aot.report import LARGEST_BUFFERS, check_fits
from wyjax.core.host_memory import DoesNotFit
from wyjax.models import EncoderConfig, MaskedLM
from wyjax.train import task_model

TINY = REPO_ROOT / "configs" / "pretrain" / "deberta_tiny.py"
TINY_MODEL = EncoderConfig(**task_model.FRESH_TINY_MODEL, vocab_size=6000)  # deberta_tiny's architecture
# v5p per chip (cloud.google.com/tpu/docs/v5p-training): bf16 peak, HBM bandwidth and capacity.
V5P_PEAK, V5P_BANDWIDTH, V5P_HBM = 459e12, 2765e9, 95e9


def compile_only(tmp_path, topology, *overrides):
  """(exit code, the JSON report or None, stderr) of `wyjax.pretrain --compile_only`, with
  no prepared corpus (the vocabulary size comes from the config)."""
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.pretrain", f"--config={TINY}", f"--compile_only={topology}", *overrides],
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    cwd=tmp_path,
    capture_output=True,
    text=True,
  )
  lines = result.stdout.strip().splitlines()
  return result.returncode, json.loads(lines[-1]) if result.returncode == 0 else None, result.stderr


def test_tiny_pretraining_step_compiled_for_v5p(tmp_path):
  # Dropout off: its random bits cost FLOPs (threefry) that the model's count leaves out. The XLA
  # attention: the fused kernels recompute tiles in the backward (their FLOPs: tests/models/attention_test.py).
  code, report, stderr = compile_only(
    tmp_path,
    "v5p:2x2x1",
    "--config.mesh.data=1",
    "--config.mesh.fsdp=4",
    "--config.model.hidden_dropout_prob=0",
    "--config.model.attention_probs_dropout_prob=0",
    "--config.attention=xla",
  )
  assert code == 0, stderr[-3000:]
  assert report["chips"] == 4 and report["chip"] == "v5p"
  assert report["mesh"] == {"data": 1, "fsdp": 4, "tensor": 1}

  # Parameter bytes of the model, counted here: fsdp shards each over the 4 chips.
  model = MaskedLM(TINY_MODEL)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 128), jnp.int32)))
  total = sum(np.prod(x.shape) * 4 for x in jax.tree_util.tree_leaves(params))
  assert report["params_bytes_per_chip"] == pytest.approx(total / 4, rel=0.05)
  assert report["optimizer_bytes_per_chip"] == pytest.approx(2 * total / 4, rel=0.05)  # Adam's two moments
  assert report["params_bytes_per_chip"] + report["optimizer_bytes_per_chip"] <= report["hbm_bytes_per_chip"]
  assert report["hbm_capacity_bytes"] == V5P_HBM and report["hbm_bytes_per_chip"] < V5P_HBM

  # XLA's FLOPs against the model's count (3 × forward over 32 × 64 tokens, split over 4 chips).
  assert report["flops_per_step_per_chip"] == pytest.approx(report["analytic_flops_per_step_per_chip"], rel=0.15)
  assert report["analytic_flops_per_step_per_chip"] == pytest.approx(tiny_step_flops() / 4, rel=1e-6)

  # The roofline from the chip's published figures.
  seconds = max(report["flops_per_step_per_chip"] / V5P_PEAK, report["bytes_accessed_per_chip"] / V5P_BANDWIDTH)
  assert report["roofline_step_seconds"] == pytest.approx(seconds)
  assert report["tokens_per_second"] == pytest.approx(32 * 64 / seconds)
  assert report["mfu_ceiling"] == pytest.approx(report["analytic_flops_per_step_per_chip"] / (seconds * V5P_PEAK))
  assert 0 < report["mfu_ceiling"] < 1


def _tiny_layer_flops() -> float:
  """One deberta_tiny layer's forward FLOPs per token at 64 tokens, written out (2 per multiply-add)."""
  h, i, length, span = 128, 256, 64, 32
  return 8 * h * h + 4 * h * i + 4 * length * h + 2 * (4 * span * h + 2 * 2 * span * h * h / length)


def tiny_step_flops() -> float:
  """deberta_tiny's training FLOPs per step, written out: 3 × forward."""
  h, v, length, batch = 128, 6000, 64, 32
  predicted = 29 / length  # the MLM head scores ceil(1.5 × 0.3 × 64) = 29 positions per sequence
  return 3 * batch * length * (2 * _tiny_layer_flops() + predicted * (2 * h * h + 2 * h * v))


@pytest.mark.parametrize(
  "topology, chips, mesh",
  [("v5p:2x2x1", 4, ("--config.mesh.data=1", "--config.mesh.fsdp=4")), ("h200", 1, ())],
)
def test_replaced_token_detections_step_compiled_holds_both_models(tmp_path, topology, chips, mesh):
  """The pair's params (GDES: the generator's table, a delta of its shape, no second table; the
  discriminator's head, no MLM head of its own) and FLOPs (the 1-layer generator's MLM, the
  2-layer discriminator over every token and its head), counted here; on a GPU, its calibrated step."""
  code, report, stderr = compile_only(
    tmp_path,
    topology,
    "--config.objective=rtd",
    *mesh,
    "--config.model.hidden_dropout_prob=0",
    "--config.model.attention_probs_dropout_prob=0",
    "--config.attention=xla",
  )
  assert code == 0, stderr[-3000:]
  assert report["chips"] == chips
  h, layer_flops = 128, _tiny_layer_flops()
  sizes = {}
  for depth in (1, 2):
    config = dataclasses.replace(TINY_MODEL, num_hidden_layers=depth)
    params = jax.eval_shape(lambda c=config: MaskedLM(c).init(jax.random.key(0), jnp.zeros((1, 128), jnp.int32)))
    count = lambda tree: sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(tree))
    sizes[depth] = (count(params), count(params["params"]["mlm_head"]))
  rtd_head = h * h + h + h + 1  # dense H→H, dense_prediction H→1
  total = 4 * (sizes[1][0] + sizes[2][0] - sizes[2][1] + rtd_head)
  assert report["params_bytes_per_chip"] == pytest.approx(total / chips, rel=0.05)
  predicted, v = 29 / 64, 6000
  flops = 3 * 32 * 64 * (3 * layer_flops + predicted * (2 * h * h + 2 * h * v) + 2 * h * (h + 1))
  assert report["analytic_flops_per_step_per_chip"] == pytest.approx(flops / chips, rel=1e-6)
  assert report["flops_per_step_per_chip"] == pytest.approx(report["analytic_flops_per_step_per_chip"], rel=0.15)
  if chips == 1:  # the GPU: its program, and the step every kernel of it predicts
    low, high = report["predicted_step_band_seconds"]
    assert low < report["predicted_step_seconds"] < high
    assert report["roofline_step_seconds"] < report["predicted_uncalibrated_step_seconds"]
    assert report["kernels_per_step"] == sum(report["kernels_by_kind"].values()) > 100


def test_a_step_too_big_for_the_chip_exits_with_what_to_change(tmp_path):
  # 2 layers with a 131,072-wide feed-forward: 2.1 B params, 26 GB of state with Adam; a v5e has 16 GB.
  # (A large batch alone would fit: the TPU compiler rematerialises activations to fit HBM.)
  code, _, stderr = compile_only(
    tmp_path,
    "v5e:2x2",
    "--config.model.hidden_size=4096",
    "--config.model.num_attention_heads=32",
    "--config.model.intermediate_size=131072",
  )
  assert code == 1, stderr[-3000:]
  message = stderr.strip().splitlines()[-1]
  assert re.search(r"does not fit v5e:2x2: it needs [\d.]+ GiB per chip, [\d.]+ GiB more than", message), message
  assert "config.mesh.fsdp" in message and "config.remat" in message


def test_unknown_topology_is_refused(tmp_path):
  code, _, stderr = compile_only(tmp_path, "v9z:2x2")
  assert code == 1 and "v9z:2x2" in stderr and "v5p:2x2x1" in stderr and "Traceback" not in stderr


@pytest.mark.parametrize(
  "kind,chip",
  [
    ("TPU v4", "v4"),
    ("TPU v5 lite", "v5e"),
    ("TPU v5", "v5p"),
    ("TPU v6 lite", "v6e"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA L40S", None),
    ("cpu", None),
  ],
)
def test_device_kinds_name_their_chip(kind, chip):
  device = type("Device", (), {"device_kind": kind})()
  assert accelerators.chip_of("local", device) == chip


# H100 SXM5 (NVIDIA's datasheet): bf16 dense peak, HBM bandwidth; 80 GiB of HBM3 stacks.
H100_PEAK, H100_BANDWIDTH, H100_HBM = 989e12, 3350e9, 80 * 2**30
ONE_LAYER = ("--config.model.num_hidden_layers=1", "--config.dtype=bfloat16")


def test_pretraining_step_compiled_for_an_h100_shows_its_gpu_program(tmp_path):
  """XLA:GPU without a GPU (the gpu-compile extra): the report gains the program's kernels by
  kind, custom calls and largest buffers, and a roofline from the H100's published figures."""
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.pretrain", f"--config={TINY}", "--compile_only=h100", *ONE_LAYER],
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    cwd=tmp_path,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  *lines, last = result.stdout.strip().splitlines()
  report = json.loads(last)
  assert any(line.startswith("  GPU program: ") and "kernels per step" in line for line in lines), lines
  assert any(line.startswith("  custom calls: ") for line in lines), lines
  assert report["chip"] == "h100" and report["chips"] == 1 and report["hbm_capacity_bytes"] == H100_HBM
  assert 0 < report["hbm_bytes_per_chip"] < 2**30
  assert report["kernels_per_step"] == sum(report["kernels_by_kind"].values()) > 50
  assert {"gemm", "reduction", "elementwise"} <= set(report["kernels_by_kind"])
  assert len(report["largest_buffers"]) == LARGEST_BUFFERS
  # XLA's FLOPs come from its cost analysis of the optimized GPU module (custom calls count none).
  assert report["flops_per_step_per_chip"] == pytest.approx(report["analytic_flops_per_step_per_chip"], rel=0.25)
  flops = max(report["flops_per_step_per_chip"], report["analytic_flops_per_step_per_chip"])
  seconds = max(flops / H100_PEAK, report["bytes_accessed_per_chip"] / H100_BANDWIDTH)
  assert report["roofline_step_seconds"] == pytest.approx(seconds)
  # The calibrated step leads, with its held-out band; the uncalibrated sum and the roofline follow as bounds.
  low, high = report["predicted_step_band_seconds"]
  assert low < high and report["roofline_step_seconds"] < report["predicted_uncalibrated_step_seconds"]
  step = next(i for i, line in enumerate(lines) if line.startswith("  predicted step on each h100: "))
  shown = float(re.match(r"  predicted step on each h100: ([\d.,]+) ms", lines[step])[1].replace(",", ""))
  assert (
    shown == pytest.approx(report["predicted_step_seconds"] * 1e3, abs=0.051) and "held-out error band" in lines[step]
  )
  assert lines[step + 1].startswith("  bounds below it: ") and "the roofline" in lines[step + 1], lines
  assert not any(line.startswith("  roofline") for line in lines), lines
  # Compiled, a step whose buffers outgrow the card is refused by them (the state alone is refused before compiling).
  smaller_card = {**report, "hbm_capacity_bytes": report["hbm_bytes_per_chip"] - 2**30}
  with pytest.raises(DoesNotFit, match=r"^the step needs [\d.]+ GiB per chip, 1\.0 GiB more than one h100 has"):
    check_fits(smaller_card)


def test_a_step_too_big_for_an_a100_is_refused(tmp_path):
  """One layer with a 1,048,576-wide feed-forward: 8.6 B params, 96 GiB with Adam's moments; an A100
  has 80. Refused from its state before compiling (a compile of it took 67 s here, XLA:GPU first
  rematerialising activations toward the card's memory, before the same refusal)."""
  code, _, stderr = compile_only(
    tmp_path,
    "a100",
    *ONE_LAYER,
    "--config.batch_size=8",
    "--config.model.hidden_size=4096",
    "--config.model.num_attention_heads=32",
    "--config.model.intermediate_size=1048576",
  )
  assert code == 1, stderr[-3000:]
  message = stderr.strip().splitlines()[-1]
  needed = re.search(
    r"the step needs more than ([\d.]+) GiB per chip \(its parameters and optimizer state alone\), "
    r"([\d.]+) GiB more than one a100 has \(80\.0 GiB\)",
    message,
  )
  assert needed, message
  params = 2 * 4096 * 1048576 + 1048576 + 4096  # the feed-forward's two matrices and biases: most of the state
  assert float(needed[1]) == pytest.approx(3 * 4 * params / 2**30, rel=0.02)  # float32 params, Adam's two moments
  assert float(needed[1]) - 80 == pytest.approx(float(needed[2]), abs=0.11)
  assert "config.mesh.fsdp" in message

"""attention.py's GPU path: the Triton kernel (wyjax/kernels/disentangled_attention_gpu.py),
interpreted on CPU through the same wiring as on a GPU (padding to tiles, tables, transposes),
equals the XLA path in output and every gradient (benchmarks/attention.py's kernel_errors, also
its --smoke row); on an abstract H100 mesh attention="auto" picks it for DeBERTa (the XLA path
when XLA_FLAGS asks for deterministic ops; the kernel for BERT where cuDNN does not serve) and
the model lowers to it.

Cases pair the layouts the configs use (pretraining's 32 and 128 log buckets, fine-tuning's
checkpoints of those, WYWMT's prefix-LM mask, BERT) with lengths on and off the tile, each
pos_att_type subset and both dtypes, rather than all combinations: interpreting costs seconds.
The kernel's own tests (dropout, a planted error, the sm_90 compile) are in tests/kernels/.
"""

import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import attention as attention_benchmark
from tests.train.conftest import pretrain_env
from wyjax.core import partitioning
from wyjax.models import Bert, DebertaV2, EncoderConfig, attention


def _config(heads, d, **layout):
  return EncoderConfig(
    vocab_size=40,
    hidden_size=heads * d,
    num_hidden_layers=1,
    num_attention_heads=heads,
    intermediate_size=64,
    max_position_embeddings=512,
    **layout,
  )


def _deberta(heads, d, **layout):
  return _config(
    heads,
    d,
    model_type="deberta-v2",
    relative_attention=True,
    position_biased_input=False,
    share_att_key=True,
    **layout,
  )


# name: (config, length, dtype, prefix-LM mask)
CASES = {
  "tiny_b32_L40_both": (
    _deberta(2, 32, position_buckets=32, max_relative_positions=128, pos_att_type="c2p|p2c"),
    40,
    "float32",
    False,
  ),
  "base_b128_L64_c2p": (_deberta(2, 64, position_buckets=128, pos_att_type="c2p"), 64, "float32", False),
  "raw24_L33_p2c_prefix": (_deberta(2, 16, max_relative_positions=24, pos_att_type="p2c"), 33, "float32", True),
  "b128_L48_both_d128_bf16": (_deberta(2, 128, position_buckets=128, pos_att_type="c2p|p2c"), 48, "bfloat16", False),
  "bert_L40": (_config(2, 32, model_type="bert"), 40, "float32", False),
}


@pytest.mark.parametrize("case", CASES)
def test_gpu_kernel_equals_xla_path(case):
  """Output (at the real queries) and the gradients of q, k, v and the relative projections,
  each within 1e-4 of its largest entry in float32, 2e-2 in bfloat16 (its rounding of scores,
  probabilities and the score tables, which both paths round differently); padding at the start,
  inside and at the end of rows (benchmarks/attention.py's kernel_errors)."""
  config, length, dtype, prefix = CASES[case]
  errors = attention_benchmark.kernel_errors(config, length, dtype, prefix)
  assert max(errors.values()) < (1e-4 if dtype == "float32" else 2e-2), errors


def check_sharded_equals_unsharded():
  """Run with 4 CPU devices (the test below)."""
  config, length, _, _ = CASES["tiny_b32_L40_both"]
  mesh = partitioning.make_mesh({"data": 2, "fsdp": 1, "tensor": 2}, jax.devices()[:4])
  rules = partitioning.rules(partitioning.LOGICAL_AXIS_RULES)
  errors = attention_benchmark.kernel_errors(
    config,
    length,
    wrap=lambda f: partitioning.with_activation_constraints(f, mesh, rules),
    in_shardings=partitioning.replicated(mesh),
  )
  assert max(errors.values()) < 1e-4, errors


def test_sharded_gpu_kernel_equals_xla_path():
  """Under the train steps' mesh and rules (data 2 x tensor 2) each device runs the GPU kernel
  on its batch row and head (shard_map: the distance table split with the heads, the relative
  projections' gradients summed over the batch shards); all equal the XLA path on one device."""
  code = "from tests.models import attention_gpu_test; attention_gpu_test.check_sharded_equals_unsharded()"
  result = subprocess.run(
    [sys.executable, "-c", code],
    env=pretrain_env(devices=4),
    capture_output=True,
    text=True,
    cwd=pathlib.Path(__file__).resolve().parents[2],
  )
  assert result.returncode == 0, result.stderr[-3000:]


def _pick(choice, **changes):
  """attention.implementation's choice for bf16 BERT's inference with a padding mask over 512
  keys and head dimension 64, changed."""
  return attention.implementation(
    choice,
    **{
      "relative": False,
      "training": False,
      "dropout": False,
      "length": 512,
      "dtype": "bfloat16",
      "head_dim": 64,
      **changes,
    },
  )


def test_auto_picks_the_gpu_kernel_where_cudnn_does_not_serve(h100_mesh):
  """...and where the kernel was measured faster than the XLA path: inference at any length,
  training from attention.GPU_KERNEL_TRAINS_FROM keys (docs/benchmarks.md, "GPU")."""
  training = {"training": True, "dropout": True}
  with jax.sharding.use_abstract_mesh(h100_mesh):
    assert _pick("auto", relative=True) == "pallas"  # DeBERTa's inference
    assert _pick("auto", relative=True, **training) == "xla"  # ... its training at 512
    assert _pick("auto", relative=True, **training, length=2047) == "xla"
    assert _pick("auto", relative=True, **training, length=2048) == "pallas"
    assert _pick("pallas", relative=True, **training) == "pallas"  # asked for
    assert _pick("pallas", relative=True, dtype="float32", head_dim=32) == "pallas"
    assert _pick("auto") == "cudnn"  # BERT in bf16 with a padding mask, no dropout
    assert _pick("auto", training=True) == "cudnn"
    assert _pick("auto", **training) == "xla"  # cuDNN has no attention dropout; the kernel trains slower at 512
    assert _pick("auto", **training, length=4096) == "pallas"
    assert _pick("auto", padding_only=False) == "pallas"  # a prefix-LM mask
    assert _pick("auto", dtype="float32") == "pallas"
    assert _pick("xla", relative=True) == "xla"
    assert _pick("auto", relative=True, head_dim=96) == "xla"  # Triton's tiles are powers of two
    with pytest.raises(ValueError, match="head dimension"):
      _pick("pallas", relative=True, head_dim=96)


def test_deterministic_gpu_ops_take_the_xla_path_for_deberta(h100_mesh, monkeypatch):
  """XLA_FLAGS=--xla_gpu_deterministic_ops=true asks for the same bits every run: the GPU
  kernel's backward adds the relative scores' gradients with float atomics in no fixed order, so
  DeBERTa takes the XLA path ("pallas" is refused with the reason). BERT's choices stand: the
  kernel without relative terms has no atomics, and XLA makes cuDNN's backward deterministic."""
  with jax.sharding.use_abstract_mesh(h100_mesh):
    for flags in (
      "--xla_gpu_deterministic_ops=true",
      "--xla_gpu_deterministic_ops",  # the last mention wins:
      "--xla_gpu_deterministic_ops=0 --xla_force_host_platform_device_count=2 --xla_gpu_deterministic_ops=1",
    ):
      monkeypatch.setenv("XLA_FLAGS", flags)
      assert _pick("auto", relative=True) == "xla", flags
      assert _pick("auto", relative=True, training=True, dropout=True, length=4096, dtype="float32") == "xla", flags
      assert _pick("auto") == "cudnn" and _pick("auto", padding_only=False) == "pallas", flags  # BERT
      with pytest.raises(ValueError, match="deterministic_ops"):
        _pick("pallas", relative=True)
    for flags in (
      "--xla_gpu_deterministic_ops=false",
      "--xla_gpu_deterministic_ops=true --xla_gpu_deterministic_ops=0",
      "--xla_gpu_deterministic_ops_extra=true",
    ):
      monkeypatch.setenv("XLA_FLAGS", flags)
      assert _pick("auto", relative=True) == "pallas", flags


def test_deberta_lowers_to_the_gpu_kernel_on_an_h100(h100_mesh):
  """DeBERTa-tiny's layout, bf16, a training step's forward and backward with attention dropout,
  lowered for CUDA on this CPU host: its attention is the three Triton kernels, forward and
  backward (transposed) under the branch scope the predictor costs the backward's adds by (none
  of the 4 tile pairs of 128 tokens lies in one relative row)."""
  config = _deberta(
    4,
    32,
    position_buckets=32,
    max_relative_positions=128,
    pos_att_type="p2c|c2p",
    dtype="bfloat16",
    attention_probs_dropout_prob=0.1,
    attention="pallas",
  )
  model = DebertaV2(config)
  ids = jax.ShapeDtypeStruct((2, 128), jnp.int32)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.ones((1, 8), jnp.int32)))

  def loss(params, ids):
    hidden = model.apply(params, ids, jnp.ones_like(ids), deterministic=False, rngs={"dropout": jax.random.key(1)})
    return hidden.astype(jnp.float32).sum()

  with jax.sharding.use_abstract_mesh(h100_mesh):
    lowered = jax.jit(jax.grad(loss)).trace(params, ids).lower(lowering_platforms=("cuda",))
  hlo = lowered.as_text()
  assert hlo.count("__gpu$xla.gpu.triton") == 3, hlo.count("__gpu$xla.gpu.triton")
  scoped = re.findall(r'"jit\(loss\)/(\S*)/cond_taken_0\.0000/pallas_call"', lowered.as_text(debug_info=True))
  assert sorted(scoped) == ["jvp(DebertaV2)/layer_0/attention", "transpose(jvp(DebertaV2))/layer_0/attention"], scoped


def test_cudnn_dropout_is_only_where_a_config_asks_for_it(h100_mesh, caplog):
  """BERT's training with attention dropout keeps wyjax's own masks (the XLA path) under "auto";
  cuDNN's dropout, whose masks follow its own counter, runs only under attention="cudnn_dropout",
  and says once what it gives up; for DeBERTa too, below the GPU kernel's lengths. Elsewhere
  "cudnn_dropout" picks as "auto" does: float32, no dropout (plain cuDNN), DeBERTa at 4,096 keys
  (the GPU kernel), and every platform but a GPU."""
  training = {"training": True, "dropout": True}
  with jax.sharding.use_abstract_mesh(h100_mesh):
    assert _pick("auto", **training) == "xla"
    assert _pick("cudnn_dropout", **training) == _pick("cudnn_dropout", **training, length=4096) == "cudnn_dropout"
    assert _pick("cudnn_dropout", **training, relative=True) == "cudnn_dropout"
    assert _pick("cudnn_dropout", training=True) == _pick("cudnn_dropout") == "cudnn"
    for changes in (
      {"dtype": "float32"},
      {"padding_only": False},
      {"head_dim": 256},
      {"relative": True, "length": 4096},
    ):
      assert _pick("cudnn_dropout", **training, **changes) == _pick("auto", **training, **changes), changes
  cpu = jax.sharding.AbstractMesh(
    (1,), ("data",), abstract_device=jax.sharding.AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
  )
  with jax.sharding.use_abstract_mesh(cpu):  # a CPU's choice, on whatever machine runs the test
    assert _pick("cudnn_dropout", **training) == "xla"
  attention.warn_cudnn_dropout.cache_clear()
  for _ in range(3):  # each layer of each traced step asks
    attention.warn_cudnn_dropout()
  (warning,) = [r.getMessage() for r in caplog.records if "cudnn_dropout" in r.getMessage()]
  assert "resumed run draws other masks" in warning and "every device" in warning, warning


def test_bert_base_pretrains_through_cudnn_on_a_gpu(h100_mesh):
  """configs/pretrain/bert_base.py sets attention dropout 0 (its docstring says why), so its
  training step's attention is cuDNN's flash attention on a GPU with wyjax's masks elsewhere:
  BERT's SelfAttention asks attention.implementation with the config's own values."""
  from wyjax.core import config_files

  config = config_files.load("pretrain/bert_base.py")
  model = EncoderConfig(**{**config.model.to_dict(), "vocab_size": 100, "dtype": config.dtype})
  assert model.attention_probs_dropout_prob == 0.0 and model.hidden_dropout_prob > 0
  with jax.sharding.use_abstract_mesh(h100_mesh):
    assert (
      attention.implementation(
        config.attention,
        relative=model.relative_attention,
        training=True,
        dropout=model.attention_probs_dropout_prob > 0,
        length=config.corpus.sequence_length,
        dtype=model.dtype,
        head_dim=model.head_dim,
      )
      == "cudnn"
    )


@pytest.mark.parametrize("kind, kernel", [("bert", "fmhaSoftmaxDropout"), ("deberta", "fmhaScaleBiasSoftmaxDropout")])
def test_cudnn_dropout_lowers_to_cudnns_dropout_kernels(kind, kernel):
  """attention="cudnn_dropout": a training pass with attention dropout, lowered for an H100 on
  this CPU host (compile-only devices), calls cuDNN's fused attention with dropout forward and
  backward (padding as sequence lengths; DeBERTa's relative terms as its bias); "auto" on the
  same model calls no cuDNN attention."""
  from wyjax.aot import targets

  dropout = {"dtype": "bfloat16", "attention_probs_dropout_prob": 0.1}
  config = (
    _config(4, 32, model_type="bert", **dropout)
    if kind == "bert"
    else _deberta(4, 32, position_buckets=16, max_relative_positions=64, pos_att_type="p2c|c2p", **dropout)
  )
  mesh = jax.sharding.Mesh(np.array(targets.devices("h100")), ("data",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  ids = jax.ShapeDtypeStruct((2, 128), jnp.int32, sharding=replicated)

  def lowered(choice):
    model = (Bert if kind == "bert" else DebertaV2)(config.replace(attention=choice))
    params = jax.tree_util.tree_map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
      jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.ones((1, 8), jnp.int32))),
    )

    def loss(params, ids):
      hidden = model.apply(params, ids, ids > 0, deterministic=False, rngs={"dropout": jax.random.key(1)})
      return hidden.astype(jnp.float32).sum()

    with jax.sharding.set_mesh(mesh):
      return jax.jit(jax.grad(loss)).lower(params, ids).as_text()

  cudnn_calls = lambda hlo: sorted(re.findall(r"custom_call @(__cudnn\$\w+)", hlo))
  assert cudnn_calls(lowered("cudnn_dropout")) == [f"__cudnn${kernel}", f"__cudnn${kernel}Backward"]
  assert cudnn_calls(lowered("auto")) == []

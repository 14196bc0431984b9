"""attention.py's GPU path: the Triton kernel (wyjax/kernels/disentangled_attention_gpu.py),
interpreted on CPU through the same wiring as on a GPU (padding to tiles, tables, transposes),
equals the XLA path in output and every gradient; on an abstract H100 mesh attention="auto"
picks it for DeBERTa (and for BERT where cuDNN does not serve) and the model lowers to it.

Cases pair the layouts the configs use (pretraining's 32 and 128 log buckets, fine-tuning's
checkpoints of those, WYWMT's prefix-LM mask, BERT) with lengths on and off the tile, each
pos_att_type subset and both dtypes, rather than all combinations: interpreting costs seconds.
The kernel's own tests (dropout, a planted error, the sm_90 compile) are in tests/kernels/.
"""
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import flax.linen as nn
import jax
import jax.numpy as jnp

from wyjax.core import partitioning
from wyjax.models import DebertaV2, EncoderConfig, attention, deberta_v2, layers


def _config(heads, d, **layout):
  return EncoderConfig(vocab_size=40, hidden_size=heads * d, num_hidden_layers=1, num_attention_heads=heads,
                       intermediate_size=64, max_position_embeddings=512, **layout)


def _deberta(heads, d, **layout):
  return _config(heads, d, model_type="deberta-v2", relative_attention=True, position_biased_input=False,
                 share_att_key=True, **layout)


# name: (config, length, dtype, prefix-LM mask)
CASES = {
    "tiny_b32_L40_both": (_deberta(2, 32, position_buckets=32, max_relative_positions=128, pos_att_type="c2p|p2c"),
                          40, "float32", False),
    "base_b128_L64_c2p": (_deberta(2, 64, position_buckets=128, pos_att_type="c2p"), 64, "float32", False),
    "raw24_L33_p2c_prefix": (_deberta(2, 16, max_relative_positions=24, pos_att_type="p2c"), 33, "float32", True),
    "b128_L48_both_d128_bf16": (_deberta(2, 128, position_buckets=128, pos_att_type="c2p|p2c"), 48, "bfloat16",
                                False),
    "bert_L40": (_config(2, 32, model_type="bert"), 40, "float32", False),
}


def _inputs(config, length, dtype, prefix):
  rng = np.random.default_rng(0)
  heads, d = config.num_attention_heads, config.head_dim
  cast = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32).astype(dtype)
  q, k, v = (cast(2, length, heads, d) for _ in range(3))
  tables = tuple(cast(2 * config.relative_span, heads, d) if term in config.pos_att_type else None
                 for term in ("c2p", "p2c")) if config.relative_attention else (None, None)
  if prefix:  # a causal target after a bidirectional 12-token source, as WYWMT's
    positions = np.arange(length)
    visible = (positions[None, :] <= positions[:, None]) | (positions[None, :] < 12)
    mask = np.broadcast_to(visible, (2, length, length))
  else:  # the second row padded after 29 tokens
    mask = np.arange(length)[None, :] < np.array([[length], [29]])
  return (q, k, v) + tables, layers.expand_mask(jnp.asarray(mask, jnp.int32))


def _attend(config, mask, how):
  """The attention of q, k, v (and the relative projections): the GPU kernel through
  attention.fused_attention, or the XLA path as deberta_v2 and bert run it (in a module: its
  softmax's dropout is one)."""
  scale = np.sqrt(config.head_dim * (1 + len(config.pos_att_type))).astype(np.float32)
  if how == "gpu":
    return lambda q, k, v, pos_key=None, pos_query=None: attention.fused_attention(
        q, k, v, mask, scale=scale, pos_key=pos_key, pos_query=pos_query,
        relative_index=lambda distance: deberta_v2.relative_rows(distance, config), target="gpu")

  class XLA(nn.Module):
    @nn.compact
    def __call__(self, q, k, v, pos_key=None, pos_query=None):
      if config.relative_attention:
        return deberta_v2.xla_attention(config, q, k, v, mask, scale, pos_key, pos_query, None, True)
      scores = jnp.einsum("bqnd,bknd->bnqk", q / scale.astype(q.dtype), k)
      return layers.masked_softmax_attention(scores, mask, v, dropout_rate=0.0, deterministic=True, dtype=q.dtype)

  return lambda *args: XLA().apply({}, *args)


def _outputs_and_grads(config, args, mask, how, weights, wrap=lambda f: f, **jit_kwargs):
  """[output at the real queries, gradients of every argument], from one jitted program."""
  attend = _attend(config, mask, how)
  real = mask[:, 0, 0, :, None, None] if mask.shape[2] == 1 else jnp.ones((), bool)

  def loss(*args):
    output = attend(*args)
    return (output.astype(jnp.float32) * weights).sum(), output * real

  (_, output), grads = jax.jit(wrap(jax.value_and_grad(loss, argnums=range(len(args)), has_aux=True)),
                               **jit_kwargs)(*args)
  return [output, *grads]


def _assert_close(config, ours, ref, tolerance):
  names = ["output", "dq", "dk", "dv"] + [f"dpos_{name}" for term, name in (("c2p", "key"), ("p2c", "query"))
                                          if config.relative_attention and term in config.pos_att_type]
  for name, a, b in zip(names, ours, ref, strict=True):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    np.testing.assert_allclose(a, b, atol=tolerance * np.abs(b).max(), rtol=0, err_msg=name)


def _case(case):
  config, length, dtype, prefix = CASES[case]
  args, mask = _inputs(config, length, dtype, prefix)
  args = tuple(a for a in args if a is not None)
  real = mask[:, 0, 0, :, None, None] if not prefix else jnp.ones((), bool)
  weights = jnp.asarray(np.random.default_rng(1).standard_normal(args[0].shape), jnp.float32) * real
  return config, args, mask, weights


@pytest.mark.parametrize("case", CASES)
def test_gpu_kernel_equals_xla_path(case):
  """Output (at the real queries) and the gradients of q, k, v and the relative projections,
  each within 1e-4 of its largest entry in float32, 2e-2 in bfloat16 (its rounding of scores,
  probabilities and the score tables, which both paths round differently)."""
  config, args, mask, weights = _case(case)
  tolerance = 1e-4 if CASES[case][2] == "float32" else 2e-2
  _assert_close(config, _outputs_and_grads(config, args, mask, "gpu", weights),
                _outputs_and_grads(config, args, mask, "xla", weights), tolerance)


def check_sharded_equals_unsharded():
  """Run with 4 CPU devices (the test below)."""
  config, args, mask, weights = _case("tiny_b32_L40_both")
  mesh = partitioning.make_mesh({"data": 2, "fsdp": 1, "tensor": 2}, jax.devices()[:4])
  rules = partitioning.rules(partitioning.LOGICAL_AXIS_RULES)
  sharded = _outputs_and_grads(config, args, mask, "gpu", weights,
                               wrap=lambda f: partitioning.with_activation_constraints(f, mesh, rules),
                               in_shardings=partitioning.replicated(mesh))
  _assert_close(config, sharded, _outputs_and_grads(config, args, mask, "xla", weights), 1e-4)


def test_sharded_gpu_kernel_equals_xla_path():
  """Under the train steps' mesh and rules (data 2 x tensor 2) each device runs the GPU kernel
  on its batch row and head (shard_map: the distance table split with the heads, the relative
  projections' gradients summed over the batch shards); all equal the XLA path on one device."""
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
  code = "from tests.models import attention_gpu_test; attention_gpu_test.check_sharded_equals_unsharded()"
  result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=pathlib.Path(__file__).resolve().parents[2])
  assert result.returncode == 0, result.stderr[-3000:]


def _h100_mesh():
  device = jax.sharding.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu")
  return jax.sharding.AbstractMesh((1,), ("data",), abstract_device=device)


def test_auto_picks_the_gpu_kernel_where_cudnn_does_not_serve():
  with jax.sharding.use_abstract_mesh(_h100_mesh()):
    pick = lambda choice, **kw: attention.implementation(choice, **{
        "relative": False, "dropout": False, "dtype": "bfloat16", "head_dim": 64, **kw})
    assert pick("auto", relative=True) == "pallas"  # DeBERTa
    assert pick("pallas", relative=True, dtype="float32", head_dim=32) == "pallas"
    assert pick("auto") == "cudnn"  # BERT in bf16 with a padding mask, no dropout
    assert pick("auto", dropout=True) == "pallas"  # BERT training: cuDNN has no attention dropout
    assert pick("auto", padding_only=False) == "pallas"  # a prefix-LM mask
    assert pick("auto", dtype="float32") == "pallas"
    assert pick("xla", relative=True) == "xla"
    assert pick("auto", relative=True, head_dim=96) == "xla"  # Triton's tiles are powers of two
    with pytest.raises(ValueError, match="head dimension"):
      pick("pallas", relative=True, head_dim=96)


def test_deberta_lowers_to_the_gpu_kernel_on_an_h100():
  """DeBERTa-tiny's layout, bf16, a training step's forward and backward with attention dropout,
  lowered for CUDA on this CPU host: its attention is the three Triton kernels."""
  config = _deberta(4, 32, position_buckets=32, max_relative_positions=128, pos_att_type="p2c|c2p",
                    dtype="bfloat16", attention_probs_dropout_prob=0.1)
  model = DebertaV2(config)
  ids = jax.ShapeDtypeStruct((2, 128), jnp.int32)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.ones((1, 8), jnp.int32)))

  def loss(params, ids):
    hidden = model.apply(params, ids, jnp.ones_like(ids), deterministic=False, rngs={"dropout": jax.random.key(1)})
    return hidden.astype(jnp.float32).sum()

  with warnings.catch_warnings(), jax.sharding.use_abstract_mesh(_h100_mesh()):
    warnings.filterwarnings("ignore", "The Pallas Triton backend is deprecated", DeprecationWarning)
    hlo = jax.jit(jax.grad(loss)).trace(params, ids).lower(lowering_platforms=("cuda",)).as_text()
  assert hlo.count("__gpu$xla.gpu.triton") == 3, hlo.count("__gpu$xla.gpu.triton")

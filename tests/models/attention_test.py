"""attention="pallas" (the fused kernels, interpreted on CPU) against the XLA reference.

The cases cover every length, bucketing, pos_att_type subset and key sharing the issue asks for
in pairs rather than all combinations: each kernel compile costs seconds when interpreted.
"""

import pathlib
import subprocess
import sys

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import triton as pltriton

from tests.train.conftest import pretrain_env
from wyjax.aot import targets
from wyjax.core import partitioning
from wyjax.kernels import attention_common as common
from wyjax.kernels import disentangled_attention as kernel
from wyjax.models import Bert, DebertaV2, EncoderConfig, attention

TINY = dict(
  vocab_size=40,
  hidden_size=32,
  num_hidden_layers=1,
  num_attention_heads=2,
  intermediate_size=48,
  max_position_embeddings=1024,
)


def deberta(length_budget=513, **changes):
  layout = dict(
    relative_attention=True,
    position_biased_input=False,
    pos_att_type="c2p|p2c",
    position_buckets=0,
    max_relative_positions=length_budget,
    share_att_key=True,
  )
  return EncoderConfig(**{**TINY, **layout, **changes})


# (config, length): L 1, 7, 128, 513; buckets 0 (raw), 128, 256; c2p, p2c, both, none; keys shared
# and not. Raw positions clipped at a maximum distance: test_prefix_mask_three_d.
CASES = {
  "L1_raw_both_shared": (deberta(max_relative_positions=24), 1),
  "L7_b128_c2p_unshared": (deberta(position_buckets=128, pos_att_type="c2p", share_att_key=False), 7),
  "L128_b256_p2c_shared": (deberta(position_buckets=256, pos_att_type="p2c"), 128),
  "L513_b256_both_unshared": (deberta(position_buckets=256, max_relative_positions=512, share_att_key=False), 513),
  "L7_no_relative": (EncoderConfig(**TINY, model_type="deberta-v2", relative_attention=False), 7),
  "L128_bert": (EncoderConfig(**TINY, model_type="bert"), 128),
}


def _inputs(length, batch=2, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, TINY["vocab_size"], (batch, length))
  mask = np.ones((batch, length), np.int32)
  mask[1, (length + 1) // 2 :] = 0  # a padded row (no padding when length is 1)
  return jnp.asarray(ids), jnp.asarray(mask)


def _model(config):
  return (Bert if config.model_type == "bert" else DebertaV2)(config)


def _outputs_and_grads(config, params, ids, mask, wrap=lambda f: f, **jit_kwargs):
  model = _model(config)

  def loss(params):
    hidden = model.apply(params, ids, mask)
    weights = jnp.cos(jnp.arange(hidden.size, dtype=jnp.float32).reshape(hidden.shape))
    return (hidden * weights * (mask[..., None] if mask.ndim == 2 else 1)).sum(), hidden

  (_, hidden), grads = jax.jit(wrap(jax.value_and_grad(loss, has_aux=True)), **jit_kwargs)(params)
  return hidden, grads


@pytest.mark.parametrize("case", CASES)
def test_pallas_equals_xla(case):
  config, length = CASES[case]
  ids, mask = _inputs(length)
  params = _model(config).init(jax.random.key(0), ids, mask)
  ours, our_grads = _outputs_and_grads(config.replace(attention="pallas"), params, ids, mask)
  ref, ref_grads = _outputs_and_grads(config.replace(attention="xla"), params, ids, mask)
  real = np.asarray(mask, bool)
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(ref)[real], atol=1e-5, rtol=0)
  for path, a, b in zip(
    jax.tree_util.tree_leaves_with_path(ref_grads), jax.tree.leaves(ref_grads), jax.tree.leaves(our_grads)
  ):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-4, rtol=0, err_msg=jax.tree_util.keystr(path[0]))


def test_prefix_mask_three_d():
  """WYWMT's [batch, query, key] masks: a causal block after a bidirectional source prefix; raw
  relative positions clipped at 24 (the sequence is longer)."""
  config = deberta(max_relative_positions=24)
  length, prefix = 40, 15
  ids, _ = _inputs(length)
  visible = (np.arange(length)[None, :] <= np.arange(length)[:, None]) | (np.arange(length)[None, :] < prefix)
  mask = jnp.asarray(np.broadcast_to(visible, (2, length, length)).astype(np.int32))
  params = _model(config).init(jax.random.key(0), ids, mask)
  ours, our_grads = _outputs_and_grads(config.replace(attention="pallas"), params, ids, mask)
  ref, ref_grads = _outputs_and_grads(config.replace(attention="xla"), params, ids, mask)
  np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), atol=1e-5, rtol=0)
  for a, b in zip(jax.tree.leaves(ref_grads), jax.tree.leaves(our_grads)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-4, rtol=0)


def _reference_with_dropout(q, k, v, mask, pos_key, pos_query, rows_of, scale, rate, seed):
  """Plain jnp attention with the kernel's keep mask (`dropout_keep`): [batch, heads, L, d] in."""
  batch, heads, length, _ = q.shape
  pos = np.arange(length)
  rows = rows_of(pos[:, None] - pos[None, :])
  s = jnp.einsum("bnqd,bnkd->bnqk", q, k) + jnp.einsum("bnqd,qknd->bnqk", q, pos_key[rows])
  s = (s + jnp.einsum("bnkd,qknd->bnqk", k, pos_query[rows])) / scale
  p = jax.nn.softmax(jnp.where(mask[:, None], s, np.finfo(np.float32).min), axis=-1)
  keep = jnp.stack(
    [
      jnp.stack(
        [
          common.dropout_keep(
            seed,
            jnp.int32(b * heads + h),
            jnp.asarray(pos[:, None], jnp.int32),
            jnp.asarray(pos[None, :], jnp.int32),
            length,
            rate,
          )
          for h in range(heads)
        ]
      )
      for b in range(batch)
    ]
  )
  return jnp.einsum("bnqk,bnkd->bnqd", jnp.where(keep, p / (1 - rate), 0.0), v)


def test_dropout_matches_reference_with_the_same_mask():
  rate, length, block, rows_of = 0.1, 64, 32, lambda d: np.clip(d + 8, 0, 15)
  rng = np.random.default_rng(1)
  q, k, v = (jnp.asarray(rng.normal(size=(2, 2, length, 16)), jnp.float32) for _ in range(3))
  pos_key, pos_query = (jnp.asarray(rng.normal(size=(16, 2, 16)), jnp.float32) for _ in range(2))
  mask = jnp.ones((2, 1, length), jnp.int32).at[1, :, 50:].set(0)
  seed = jnp.int32(1234)
  spec = kernel.Spec(length=length, block=block, scale=8.0, c2p=True, p2c=True, dropout_rate=rate, interpret=True)

  def ours(q, k, v, pos_key, pos_query):
    tables = kernel.distance_tables(pos_key, pos_query, rows_of, length)
    return kernel.fused_attention(spec, q, k, v, mask, tables, seed)

  def ref(q, k, v, pos_key, pos_query):
    return _reference_with_dropout(q, k, v, mask != 0, pos_key, pos_query, rows_of, 8.0, rate, seed)

  args = (q, k, v, pos_key, pos_query)
  np.testing.assert_allclose(jax.jit(ours)(*args), ref(*args), atol=1e-5, rtol=0)
  weights = jnp.asarray(rng.normal(size=(2, 2, length, 16)), jnp.float32)
  our_grads = jax.jit(jax.grad(lambda *a: (ours(*a) * weights).sum(), argnums=range(5)))(*args)
  ref_grads = jax.grad(lambda *a: (ref(*a) * weights).sum(), argnums=range(5))(*args)
  for a, b in zip(ref_grads, our_grads):
    np.testing.assert_allclose(b, a, atol=1e-4, rtol=0)


def test_dropout_keep_rate_and_independence():
  """P(keep) = 1 - rate, and the masks of neighbouring heads, seeds and shards are uncorrelated."""
  pos = jnp.arange(256, dtype=jnp.int32)
  keep = lambda seed, bh: np.asarray(
    common.dropout_keep(jnp.int32(seed), jnp.int32(bh), pos[:, None], pos[None, :], 256, 0.1)
  )
  a, b, c = keep(7, 0), keep(7, 1), keep(8, 0)
  d = keep(int(common.fold_in(jnp.int32(7), jnp.int32(1))), 0)
  for m in (a, b, c, d):
    assert abs(m.mean() - 0.9) < 0.005, m.mean()  # 65,536 draws: 5 sigma is 0.006
  for m in (b, c, d):
    assert abs((a & m).mean() - 0.81) < 0.006  # independent masks overlap at 0.9²


def test_cost_estimate_matches_an_analytic_count():
  """The declared FLOPs are the kernels' matmuls counted by hand for L = 512, d = 64, both terms."""
  spec = kernel.Spec(length=512, block=128, scale=1.0, c2p=True, p2c=True, dropout_rate=0.0, interpret=False)
  costs = kernel.cost_estimates(spec, batch=2, heads=3, d=64, itemsize=2, mask_rows=1)
  pairs = 2 * 3 * 4 * 4
  qk = 2 * 128 * 128 * 64  # one [128, 64] x [64, 128] product
  window = 2 * 128 * 256 * 64  # [128, 64] x [64, 256]
  flip = 2 * 128**3
  assert costs["forward"].flops == pairs * (qk + 2 * window + qk)  # scores (q.k, c2p, p2c), then p.v
  # dq: scores, dP, dS.k; c2p: flip, window gradient, window.dq; p2c: flip, window gradient
  assert costs["dq"].flops == pairs * (qk + 2 * window + 2 * qk + 2 * flip + 3 * window)
  assert costs["dkv"].flops == pairs * (qk + 2 * window + 3 * qk + flip + window)
  assert costs["forward"].transcendentals == pairs * 128 * 128 + 2 * 3 * 512
  # forward bytes: q and o once, k and v at each of the 16 steps per (batch, head), the mask's
  # key rows at each step, two tables once per head, the log-sum-exp
  tile = 128 * 64 * 2
  assert costs["forward"].bytes_accessed == (
    2 * 6 * 4 * tile + 2 * pairs * tile + pairs * 128 * 4 + 2 * 3 * 1024 * 64 * 2 + 6 * 512 * 4
  )


def check_sharded_equals_unsharded():
  """Run with 4 CPU devices (the test below)."""
  config = deberta(
    position_buckets=128,
    max_relative_positions=512,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    attention="pallas",
  )
  ids, mask = _inputs(24, batch=4)
  params = _model(config).init(jax.random.key(0), ids, mask)
  hidden, grads = _outputs_and_grads(config.replace(attention="xla"), params, ids, mask)
  mesh = partitioning.make_mesh({"data": 2, "fsdp": 1, "tensor": 2}, jax.devices()[:4])
  rules = partitioning.rules(partitioning.LOGICAL_AXIS_RULES)
  hidden_sharded, grads_sharded = _outputs_and_grads(
    config,
    params,
    ids,
    mask,
    wrap=lambda f: partitioning.with_activation_constraints(f, mesh, rules),
    in_shardings=partitioning.replicated(mesh),
  )
  np.testing.assert_allclose(hidden_sharded, hidden, atol=1e-5, rtol=0)
  for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_sharded)):
    np.testing.assert_allclose(b, a, atol=1e-4, rtol=0)


def test_sharded_kernel_equals_unsharded():
  """Under the train steps' mesh and rules (data 2 x tensor 2), each device runs the kernel on its
  batch rows and heads (shard_map); the output and the gradients (the relative tables' summed over
  the batch shards) are the XLA path's on one device."""
  code = "from tests.models import attention_test; attention_test.check_sharded_equals_unsharded()"
  result = subprocess.run(
    [sys.executable, "-c", code],
    env=pretrain_env(devices=4),
    capture_output=True,
    text=True,
    cwd=pathlib.Path(__file__).resolve().parents[2],
  )
  assert result.returncode == 0, result.stderr[-3000:]


def test_kernels_compile_for_tpu_with_their_declared_cost():
  """Through Mosaic (libtpu, no TPU needed): forward and backward compile for a v5p chip, bf16
  with dropout, and the compiler's FLOPs are the kernels' declared estimates (plus, in the
  backward, XLA's rowsum of dO * O)."""
  spec = kernel.Spec(length=256, block=128, scale=8.0, c2p=True, p2c=True, dropout_rate=0.1, interpret=False)
  batch, heads, d = 2, 2, 64
  mesh = jax.sharding.Mesh(np.array(targets.devices("v5p:2x2x1")[:1]), ("data",))
  on_chip = lambda shape, dtype: jax.ShapeDtypeStruct(
    shape, dtype, sharding=jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  )
  qkv = [on_chip((batch, heads, 256, d), jnp.bfloat16)] * 3
  tables = kernel.Tables(*[on_chip((heads, 512, d), jnp.bfloat16)] * 4)
  mask, seed = on_chip((batch, 1, 256), jnp.int32), on_chip((), jnp.int32)
  attend = jax.shard_map(
    lambda q, k, v, mask, tables, seed: kernel.fused_attention(spec, q, k, v, mask, tables, seed),
    mesh=mesh,
    in_specs=jax.sharding.PartitionSpec(),
    out_specs=jax.sharding.PartitionSpec(),
    check_vma=False,
  )
  loss = lambda q, k, v, tables, mask, seed: attend(q, k, v, mask, tables, seed).astype(jnp.float32).sum()
  costs = kernel.cost_estimates(spec, batch, heads, d, itemsize=2, mask_rows=1)

  def flops(fn):
    cost = jax.jit(fn).lower(*qkv, tables, mask, seed).compile().cost_analysis()
    return (cost[0] if isinstance(cost, list) else cost)["flops"]

  assert flops(lambda q, k, v, tables, mask, seed: attend(q, k, v, mask, tables, seed)) == costs["forward"].flops
  backward = flops(jax.grad(loss, argnums=(0, 1, 2, 3)))
  declared = costs["forward"].flops + costs["dq"].flops + costs["dkv"].flops
  assert declared <= backward <= declared * 1.01, (backward, declared)


def test_cudnn_call_computes_bert_attention():
  """The GPU path's jax.nn.dot_product_attention call (run here with its XLA implementation):
  the same scale and mask conventions as BERT's reference attention, at the real positions."""
  rng = np.random.default_rng(2)
  q, k, v = (jnp.asarray(rng.normal(size=(2, 9, 2, 16)), jnp.float32) for _ in range(3))
  mask = jnp.asarray(np.arange(9)[None, None, None, :] < np.array([9, 5])[:, None, None, None])
  ours = attention.cudnn_attention(q, k, v, mask, 4.0, implementation="xla")
  scores = jnp.where(mask, jnp.einsum("bqnd,bknd->bnqk", q, k) / 4.0, -jnp.inf)
  expected = jnp.einsum("bnqk,bknd->bqnd", jax.nn.softmax(scores, -1), v)
  np.testing.assert_allclose(ours[0], expected[0], atol=1e-5)
  np.testing.assert_allclose(ours[1, :5], expected[1, :5], atol=1e-5)


@pytest.fixture
def cudnn_calls(monkeypatch):
  """The models as on a GPU, each jax.nn.dot_product_attention call checked against cuDNN's
  rules as jax states them (jax._src.cudnn: the combined bias/mask must be [B, N|1, T, S],
  16-bit inputs, int32 [B] sequence lengths; flash attention: head dim a multiple of 8 up to
  128) and then run by XLA. CI has no cuDNN: these rules are what it would refuse."""
  from jax._src.cudnn import fused_attention_stablehlo as cudnn

  calls, real = [], jax.nn.dot_product_attention

  def checked(q, k, v, bias=None, mask=None, *, implementation=None, **kwargs):
    assert implementation == "cudnn"
    cudnn.check_layout(
      q,
      k,
      v,
      cudnn.combine_bias_and_mask(bias, mask, q.dtype),
      kwargs.get("query_seq_lengths"),
      kwargs.get("key_value_seq_lengths"),
      None,
      None,
      None,
      None,
      cudnn.AttentionLayout.BTNH,
    )
    assert q.shape[-1] % 8 == 0 and q.shape[-1] <= 128, q.shape
    calls.append(q.shape)
    return real(q, k, v, bias, mask, implementation="xla", **kwargs)

  monkeypatch.setattr(jax.nn, "dot_product_attention", checked)
  monkeypatch.setattr(attention, "platform", lambda: "gpu")
  return calls


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_gpu_padding_reaches_cudnn_as_sequence_lengths(cudnn_calls, model_type):
  """bf16 BERT and RoBERTa on a padded batch call cuDNN in shapes it accepts (before, the
  [B, 1, 1, L] padding mask crashed it) and equal the XLA path at the real tokens."""
  config = EncoderConfig(
    **{**TINY, "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2},
    model_type=model_type,
    dtype="bfloat16",
  )
  ids, mask = _inputs(12)
  params = _model(config.replace(attention="xla")).init(jax.random.key(0), ids, mask)
  on_gpu = _model(config).apply(params, ids, mask)
  assert len(cudnn_calls) == 2  # one per layer
  reference = _model(config.replace(attention="xla")).apply(params, ids, mask)
  assert len(cudnn_calls) == 2
  real = np.asarray(mask, bool)
  np.testing.assert_allclose(
    np.asarray(on_gpu, np.float32)[real], np.asarray(reference, np.float32)[real], atol=0.05, rtol=0.05
  )


def _triton_calls(jaxpr) -> int:
  """The Pallas calls compiled by Triton (the GPU kernel's) in a jaxpr and the jaxprs inside it."""
  return sum(
    isinstance(eqn.params["compiler_params"], pltriton.CompilerParams)
    if eqn.primitive.name == "pallas_call"
    else sum(_triton_calls(p) for p in eqn.params.values() if isinstance(p, jax.extend.core.Jaxpr))
    for eqn in jaxpr.eqns
  )


def test_gpu_takes_its_kernel_where_cudnn_cannot_serve(cudnn_calls):
  """No cuDNN call for float32, attention dropout in training, or a prefix-LM's [B, q, k] mask:
  the GPU kernel instead, one Triton call per layer (traced: on a GPU's platform it is compiled
  for the GPU, which this host cannot run); but training under "auto" on fewer keys than
  attention.GPU_KERNEL_TRAINS_FROM takes the XLA path, which trains faster there."""
  bf16 = EncoderConfig(**{**TINY, "hidden_size": 64, "num_attention_heads": 4}, model_type="bert", dtype="bfloat16")
  ids, mask = _inputs(8)
  params = Bert(bf16.replace(attention="xla")).init(jax.random.key(0), ids, mask)
  dropout = {"deterministic": False, "rngs": {"dropout": jax.random.key(1)}}
  triton_calls = lambda config, mask, **kw: _triton_calls(
    jax.make_jaxpr(lambda p: Bert(config).apply(p, ids, mask, **kw))(params)
  )
  prefix = jnp.asarray(np.tril(np.ones((8, 8), np.int32))[None].repeat(2, 0))
  assert triton_calls(bf16.replace(dtype="float32"), mask) == 1
  assert triton_calls(bf16.replace(attention="pallas"), mask, **dropout) == 1
  assert triton_calls(bf16, mask, **dropout) == 0  # "auto" training on 8 keys: the XLA path
  assert triton_calls(bf16, prefix) == 1
  assert cudnn_calls == []
  assert triton_calls(bf16.replace(attention_probs_dropout_prob=0.0), mask, **dropout) == 0
  assert len(cudnn_calls) == 1  # training without attention dropout: cuDNN


def _relative_errors(ours, reference) -> dict[str, float]:
  """max |ours - reference| / max |reference| of each gradient; one that is zero but for rounding
  (pos_key's bias: the score gradients of a softmax row sum to zero) against 1e-3 of the largest
  entry of them all."""
  top = max(float(np.abs(x).max()) for x in jax.tree.leaves(reference))
  return {
    jax.tree_util.keystr(path): float(
      np.abs(np.asarray(a) - np.asarray(b)).max() / max(float(np.abs(b).max()), 1e-3 * top)
    )
    for (path, b), a in zip(jax.tree_util.tree_leaves_with_path(reference), jax.tree.leaves(ours))
  }


def test_deberta_relative_terms_as_a_cudnn_bias_equal_the_xla_path(monkeypatch):
  """DeBERTa's cuDNN route, float32, two layers, a padded batch: the relative terms by distance
  and skew (`deberta_v2.relative_terms`) divided by the scale are the bias of the call that
  cuDNN runs on a GPU (here jax.nn.dot_product_attention's XLA implementation, which takes the
  same arguments). Output and every gradient equal the XLA path's, and two runs give the same
  bits."""
  config = deberta(position_buckets=16, max_relative_positions=64, num_hidden_layers=2)
  ids, mask = _inputs(40)
  params = _model(config).init(jax.random.key(0), ids, mask)
  ref, ref_grads = _outputs_and_grads(config.replace(attention="xla"), params, ids, mask)
  real_attention = jax.nn.dot_product_attention
  calls = []

  def on_cpu(q, k, v, bias=None, mask=None, *, implementation, **kwargs):
    calls.append(bias.shape)
    return real_attention(q, k, v, bias, mask, implementation="xla", **kwargs)

  monkeypatch.setattr(jax.nn, "dot_product_attention", on_cpu)
  monkeypatch.setattr(attention, "implementation", lambda *args, **kwargs: "cudnn")
  (ours, our_grads), (again, again_grads) = (_outputs_and_grads(config, params, ids, mask) for _ in range(2))
  assert calls[:2] == [(2, 2, 40, 40)] * 2  # traced: one call per layer, a [B, H, L, L] bias
  real = np.asarray(mask, bool)
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(ref)[real], atol=1e-5, rtol=0)
  errors = _relative_errors(our_grads, ref_grads)
  assert max(errors.values()) < 1e-4, errors
  assert all(
    np.array_equal(a, b) for a, b in zip(jax.tree.leaves((ours, our_grads)), jax.tree.leaves((again, again_grads)))
  )


def test_gpu_trains_deberta_through_cudnn_with_its_relative_bias(cudnn_calls):
  """bf16 DeBERTa training without attention dropout on a GPU: cuDNN, in shapes it accepts (a
  [B, H, L, L] bias, lengths), equal to the XLA path at the real tokens; with attention dropout
  or for inference it is not cuDNN."""
  config = deberta(
    position_buckets=16,
    max_relative_positions=64,
    hidden_size=64,
    num_attention_heads=4,
    num_hidden_layers=2,
    dtype="bfloat16",
    attention_probs_dropout_prob=0.0,
  )
  ids, mask = _inputs(24)
  params = _model(config.replace(attention="xla")).init(jax.random.key(0), ids, mask)
  train = {"deterministic": False, "rngs": {"dropout": jax.random.key(1)}}
  on_gpu = _model(config).apply(params, ids, mask, **train)
  assert cudnn_calls == [(2, 24, 4, 16)] * 2
  reference = _model(config.replace(attention="xla")).apply(params, ids, mask, **train)
  real = np.asarray(mask, bool)
  np.testing.assert_allclose(
    np.asarray(on_gpu, np.float32)[real], np.asarray(reference, np.float32)[real], atol=0.05, rtol=0.05
  )
  jax.make_jaxpr(lambda p: _model(config.replace(attention_probs_dropout_prob=0.1)).apply(p, ids, mask, **train))(
    params
  )
  jax.make_jaxpr(lambda p: _model(config).apply(p, ids, mask))(params)
  assert len(cudnn_calls) == 2


def test_auto_trains_deberta_on_a_gpu_through_cudnn_where_xla_trained(h100_mesh):
  """ "auto" gives DeBERTa's training pass to cuDNN where it serves (16-bit, no attention
  dropout, a padding mask) and the XLA path trained before (fewer keys than
  GPU_KERNEL_TRAINS_FROM); the GPU kernel keeps what it was measured faster at."""
  pick = lambda **changes: attention.implementation(
    "auto",
    **{
      "relative": True,
      "training": True,
      "dropout": False,
      "length": 512,
      "dtype": "bfloat16",
      "head_dim": 64,
      **changes,
    },
  )
  with jax.sharding.use_abstract_mesh(h100_mesh):
    assert pick() == "cudnn"
    assert pick(length=attention.GPU_KERNEL_TRAINS_FROM - 1) == "cudnn"
    assert pick(length=attention.GPU_KERNEL_TRAINS_FROM) == "pallas"
    assert pick(training=False) == "pallas"
    assert pick(dropout=True) == "xla"
    assert pick(dtype="float32") == "xla"
    assert pick(padding_only=False) == "xla"
    assert (
      attention.implementation(
        "pallas", relative=True, training=True, dropout=False, length=512, dtype="bfloat16", head_dim=64
      )
      == "pallas"
    )  # asked for by name


def test_auto_is_xla_on_cpu_and_pallas_on_a_tpu_mesh():
  training = dict(relative=True, training=True, dropout=True, length=512)
  assert attention.implementation("auto", **training) == "xla"
  assert attention.implementation("pallas", **training) == "pallas"
  mesh = jax.sharding.Mesh(np.array(targets.devices("v5p:2x2x1")[:1]), ("data",))
  with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
    assert attention.implementation("auto", **training) == "pallas"
    assert attention.implementation("xla", **training) == "xla"

"""The GPU (Triton) disentangled-attention kernel: interpreted on CPU against plain jnp with the
same dropout mask, its dropout mask read back from its output, a planted backward error caught,
and its three kernels compiled for an H100 (sm_90) through Triton's own compiler on this host.

The parity with the XLA path through attention.py's wiring is in tests/models/attention_gpu_test.py.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from wyjax.kernels import attention_common as common
from wyjax.kernels import disentangled_attention_gpu as gpu
from wyjax.models import deberta_v2
from wyjax.models.config import EncoderConfig

H100_SHARED_BYTES = 227 * 1024  # the most shared memory one block may use on an H100


def _rows_of(distance):
  """Relative rows of 2S = 16 embeddings: exact to ±4, then coarser (several distances a row,
  as log buckets), clipped."""
  distance = np.asarray(distance)
  bucket = np.sign(distance) * np.minimum(np.abs(distance), 4 + np.abs(distance) // 4)
  return np.clip(bucket + 8, 0, 15).astype(np.int32)


def _inputs(length, heads=2, d=16, seed=1):
  rng = np.random.default_rng(seed)
  q, k, v = (jnp.asarray(rng.normal(size=(2, heads, length, d)), jnp.float32) for _ in range(3))
  pos_key, pos_query = (jnp.asarray(rng.normal(size=(16, heads, d)), jnp.float32) for _ in range(2))
  return q, k, v, pos_key, pos_query


def _kernel(spec, key_mask, seed):
  """The kernel on [batch, heads, L, d] inputs padded to whole tiles; key_mask: [batch, L]."""
  pad = spec.padded_length - spec.length

  def attend(q, k, v, pos_key, pos_query):
    to_tiles = lambda x: jnp.pad(x, ((0, 0), (0, 0), (0, pad), (0, 0)))
    mask = jnp.pad(key_mask.astype(jnp.int32), ((0, 0), (0, pad)))[:, None, :]
    tables = gpu.distance_tables(pos_key, pos_query, _rows_of, spec.padded_length)
    return gpu.fused_attention(spec, to_tiles(q), to_tiles(k), to_tiles(v), mask, tables, seed)[:, :, : spec.length]

  return attend


def _reference(spec, key_mask, seed):
  """Plain jnp with the kernel's keep mask (attention_common.dropout_keep)."""

  def attend(q, k, v, pos_key, pos_query):
    batch, heads, length, _ = q.shape
    pos = np.arange(length)
    rows = _rows_of(pos[:, None] - pos[None, :])
    s = jnp.einsum("bnqd,bnkd->bnqk", q, k) + jnp.einsum("bnqd,qknd->bnqk", q, pos_key[rows])
    s = (s + jnp.einsum("bnkd,qknd->bnqk", k, pos_query[rows])) / spec.scale
    p = jax.nn.softmax(jnp.where(key_mask[:, None, None, :], s, common.MASKED), axis=-1)
    keep = jnp.stack(
      [
        jnp.stack(
          [
            common.dropout_keep(
              seed,
              jnp.int32(b * heads + h),
              jnp.asarray(pos[:, None], jnp.int32),
              jnp.asarray(pos[None, :], jnp.int32),
              spec.padded_length,
              spec.dropout_rate,
            )
            for h in range(heads)
          ]
        )
        for b in range(batch)
      ]
    )
    return jnp.einsum("bnqk,bnkd->bnqd", jnp.where(keep, p / (1 - spec.dropout_rate), 0.0), v)

  return attend


def _assert_close(ours, ref, rtol=1e-4):
  """Every array within rtol of the reference's largest entry."""
  for name, a, b in zip(("output", "dq", "dk", "dv", "dpos_key", "dpos_query"), ours, ref):
    scale = float(jnp.max(jnp.abs(b)))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=rtol * scale, rtol=0, err_msg=name)


def _outputs_and_grads(attend, args, weights):
  """[output, gradients of every argument], from one jitted program, its float32 products exact
  on a GPU too (its default there is TF32: interpreted kernel and reference differed by 5e-4)."""

  def loss(*a):
    output = attend(*a)
    return (output * weights).sum(), output

  with jax.default_matmul_precision("highest"):
    (_, output), grads = jax.jit(jax.value_and_grad(loss, argnums=range(len(args)), has_aux=True))(*args)
  return [output, *grads]


@pytest.fixture(scope="module")
def dropout_case():
  """L = 40 in tiles of 16 (the last one part padding), a padded batch row, rate 0.2."""
  spec = common.Spec(length=40, block=16, scale=4.0, c2p=True, p2c=True, dropout_rate=0.2, interpret=True)
  key_mask = jnp.ones((2, 40), bool).at[1, 31:].set(False)
  args = _inputs(40)
  weights = jnp.asarray(np.random.default_rng(2).normal(size=args[0].shape), jnp.float32)
  seed = jnp.int32(1234)
  ref = _outputs_and_grads(_reference(spec, key_mask, seed), args, weights)
  return spec, key_mask, seed, args, weights, ref


def test_output_and_gradients_equal_jnp_with_the_same_dropout_mask(dropout_case):
  spec, key_mask, seed, args, weights, ref = dropout_case
  _assert_close(_outputs_and_grads(_kernel(spec, key_mask, seed), args, weights), ref)


def test_a_planted_backward_error_fails_the_comparison(dropout_case, monkeypatch):
  """The score gradient 0.1% off (the backward kernels' one shared formula; the forward does not
  use it): the output still matches, the gradients no longer do."""
  spec, key_mask, seed, args, weights, ref = dropout_case
  right = common.score_gradient
  monkeypatch.setattr(common, "score_gradient", lambda *a: 1.001 * right(*a))
  ours = _outputs_and_grads(_kernel(spec, key_mask, seed), args, weights)
  _assert_close(ours[:1], ref[:1])
  with pytest.raises(AssertionError, match="dq"):
    _assert_close(ours, ref)


def test_score_gradients_add_at_their_relative_rows():
  """The backward's adds of a tile's score gradients into a score table's gradient, against
  numpy's np.add.at: where the tile's distances fall in one relative row (its B sums added) and
  where they spread over many (each entry added). Both occur in the dropout case above too: 2 of
  its 9 tile pairs lie in one row (distances all ≥ 12 or all ≤ -16)."""
  block, width = 16, 8
  rng = np.random.default_rng(3)
  ds = rng.normal(size=(block, block)).astype(np.float32)
  for relative in (np.full((block, block), 5, np.int32), rng.integers(0, width, (block, block), dtype=np.int32)):

    def kernel(relative_ref, ds_ref, table_ref):
      table_ref[...] = jnp.zeros(table_ref.shape, jnp.float32)
      rows = jax.lax.broadcasted_iota(jnp.int32, (block, 1), 0)
      gpu._add_score_gradients(table_ref, rows, relative_ref[...], ds_ref[...])

    table = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((block, width), jnp.float32), interpret=True)(
      relative, ds
    )
    expected = np.zeros((block, width), np.float32)
    np.add.at(expected, (np.arange(block)[:, None], relative), ds)
    np.testing.assert_allclose(table, expected, atol=1e-5, rtol=0)


def _taken(scope) -> float:
  """The fraction a scope gives the GPU step's predictor, read from a program traced inside it."""

  def traced(x):
    with scope:
      return jnp.sin(x)

  return float(re.search(r"cond_taken_(\d\.\d+)", jax.jit(traced).lower(1.0).as_text(debug_info=True)).group(1))


def test_the_branch_scope_counts_the_tile_pairs_in_one_relative_row(dropout_case):
  """The fraction of tile pairs whose adds take the one-row branch: the dropout case's 2 of 9
  (above); DeBERTa-base's at 1,024 tokens in tiles of 64, counted here tile by tile on its [L, L]
  table of relative rows (none at 512 tokens, where every pair's distances span rows)."""
  assert _taken(gpu.branch_scope(_rows_of, dropout_case[0])) == pytest.approx(2 / 9, abs=1e-4)
  config = EncoderConfig(vocab_size=8, relative_attention=True, position_buckets=256, max_relative_positions=512)
  rows_of = lambda distance: deberta_v2.relative_rows(distance, config)
  for length in (512, 1024):
    spec = common.Spec(length=length, block=gpu.BLOCK, scale=8.0, c2p=True, p2c=True, dropout_rate=0.0, interpret=False)
    tiles = length // gpu.BLOCK
    table = deberta_v2.relative_position_index(np.arange(length), np.arange(length), config)
    table = table.reshape(tiles, gpu.BLOCK, tiles, gpu.BLOCK).transpose(0, 2, 1, 3).reshape(tiles, tiles, -1)
    one_row = int(np.sum(table.min(axis=-1) == table.max(axis=-1)))
    assert (length, one_row > 0) in ((512, False), (1024, True))
    assert _taken(gpu.branch_scope(rows_of, spec)) == pytest.approx(one_row / tiles**2, abs=1e-4)


def test_dropout_keep_rate_and_independence_read_from_the_kernel():
  """With q = k = 0 every probability is 1/L and v = the identity reads the mask back:
  o[i, j] = keep[i, j] / ((1 - rate) L). 4 streams (2 batch rows x 2 heads) of 128 x 128 draws
  per seed; the kernel keeps 1 - rate of them, and masks of neighbouring heads, rows and steps
  (seeds) overlap as independent ones would (0.9² = 0.81)."""
  length, rate = 128, 0.1
  spec = common.Spec(length=length, block=32, scale=1.0, c2p=False, p2c=False, dropout_rate=rate, interpret=True)
  zeros = jnp.zeros((2, 2, length, length), jnp.float32)
  eye = jnp.broadcast_to(jnp.eye(length, dtype=jnp.float32), zeros.shape)
  mask = jnp.ones((2, 1, length), jnp.int32)
  attend = lambda seed: gpu.fused_attention(spec, zeros, zeros, eye, mask, gpu.Tables(), seed)
  read = jax.jit(lambda seed: attend(seed) * (1 - rate) * length > 0.5)
  step, next_step = np.asarray(read(jnp.int32(7))), np.asarray(read(jnp.int32(8)))
  assert abs(step.mean() - (1 - rate)) < 0.006, step.mean()  # 65,536 draws: 5 sigma is 0.0059
  pairs = {
    "heads": (step[:, 0], step[:, 1]),
    "batch rows": (step[0], step[1]),
    "query rows": (step[..., :-1, :], step[..., 1:, :]),
    "steps": (step, next_step),
  }
  for name, (a, b) in pairs.items():
    assert abs((a & b).mean() - (1 - rate) ** 2) < 0.01, (name, (a & b).mean())


def _triton_calls(lowered):
  """(name, Triton IR, num_warps, num_stages) of each Pallas Triton call of a program lowered for CUDA."""
  from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
  from jaxlib.triton import dialect as triton_dialect  # pylint: disable=g-import-not-at-top

  calls = []

  def walk(op):
    for region in op.regions:
      for block in region.blocks:
        for inner in block.operations:
          if inner.operation.name == "stablehlo.custom_call" and "triton" in str(inner.attributes["call_target_name"]):
            calls.append(ir.DictAttr(inner.attributes["mhlo.backend_config"]))
          walk(inner.operation)

  module = lowered.compiler_ir("stablehlo")
  walk(module.operation)
  context = ir.Context()
  triton_dialect.register_dialect(context)
  with context:
    return [
      (
        ir.StringAttr(c["name"]).value,
        ir.Module.parse(ir.StringAttr(c["ir"]).value_bytes).operation.get_asm(enable_debug_info=False),
        ir.IntegerAttr(c["num_warps"]).value,
        ir.IntegerAttr(c["num_stages"]).value,
      )
      for c in calls
    ]


@pytest.mark.parametrize(
  "dtype,d,relative,mask_rows",
  [
    ("bfloat16", 64, True, 1),  # DeBERTa-base in training: padding mask, dropout
    ("float32", 128, True, 512),  # the largest tiles: float32, d = 128, a prefix-LM mask
    ("bfloat16", 32, False, 1),  # BERT with dropout, DeBERTa-tiny's head dimension
  ],
)
def test_kernels_compile_for_an_h100(dtype, d, relative, mask_rows, h100_mesh, tmp_path):
  """Forward and backward lowered for CUDA on this CPU host (an abstract H100 mesh tells Pallas
  the target), then each Triton kernel compiled by Triton to a cubin for sm_90 with ptxas, as
  XLA's Triton would on the GPU; each fits an H100 block's shared memory."""
  import triton  # pylint: disable=g-import-not-at-top
  from triton.backends.compiler import GPUTarget  # pylint: disable=g-import-not-at-top

  spec = common.Spec(
    length=500, block=gpu.BLOCK, scale=8.0, c2p=relative, p2c=relative, dropout_rate=0.1, interpret=False
  )
  lp, heads = spec.padded_length, 2
  shape = lambda *s, dt=dtype: jax.ShapeDtypeStruct(s, dt)
  tables = (
    gpu.Tables(shape(heads, 256, d), shape(heads, 256, d), shape(heads, 2 * lp, dt=jnp.int32))
    if relative
    else gpu.Tables()
  )
  loss = lambda q, k, v, tables, mask, seed: gpu.fused_attention(spec, q, k, v, mask, tables, seed).sum()
  with jax.sharding.use_abstract_mesh(h100_mesh):
    lowered = (
      jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3), allow_int=True))
      .trace(
        *[shape(2, heads, lp, d)] * 3,
        tables,
        shape(2, mask_rows, lp, dt=jnp.int32),
        shape(dt=jnp.int32),
      )
      .lower(lowering_platforms=("cuda",))
    )
  calls = _triton_calls(lowered)
  assert [name for name, *_ in calls] == ["_forward_kernel", "_dq_kernel", "_dkv_kernel"]
  for name, source, warps, stages in calls:
    path = tmp_path / f"{name}.ttir"
    path.write_text(source)
    compiled = triton.compile(
      str(path), target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages}
    )
    assert compiled.asm["cubin"], name
    assert 0 < compiled.metadata.shared <= H100_SHARED_BYTES, (name, compiled.metadata.shared)

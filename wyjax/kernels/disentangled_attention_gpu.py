"""DeBERTa's disentangled attention as flash-style Pallas kernels for NVIDIA GPUs (Triton; interpreted anywhere).

A program per (query or key tile, batch row, head) loops over the other axis's tiles with an
online softmax, and no [L, L] tensor reaches HBM. Scores, for query i and key j, with r(i - j) the
relative row (the log bucket) of their distance:

    s[i, j] = (q_i·k_j + c2p[i, r(i - j)] + p2c[j, r(i - j)]) / scale
    c2p = q · pos_keyᵀ,  p2c = k · pos_queryᵀ      [batch, heads, Lp, 2S], once per layer (XLA)

A tile reads r from a [2Lp] table of distances and gathers its relative scores from the two score
tables (FlashDeBERTa's scheme). The backward recomputes each tile's probabilities from the saved
log-sum-exp (one kernel for dq, one for dk and dv), each adding the tile's score gradients into
dc2p or dp2c atomically: these gradients are not bitwise reproducible, and XLA's
--xla_gpu_deterministic_ops cannot change that (attention.py takes the XLA path under it).
Attention dropout hashes attention_common's counters, so the three kernels see one mask that is
never stored. Without c2p and p2c this is plain flash attention, with no atomics.
"""

import contextlib
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from wyjax.kernels import attention_common as common
from wyjax.kernels.attention_common import MASKED, Spec

# Pallas's Triton backend, not Mosaic GPU: on sm_90 Mosaic GPU cannot gather per element, which the relative
# scores need.
BLOCK = 64  # queries and keys per tile; untuned (an H200 measured 64 only): FlashDeBERTa finds small tiles best
HEAD_DIMS = (16, 32, 64, 128)  # Triton's tiles are powers of two, its matmuls 16 deep at least
# The prefix of the name scope (`taken_scope`) that tells the GPU step's predictor how often the
# kernels' conditionals take lax.cond's true branch: XLA keeps it in the custom call's op_name.
TAKEN_SCOPE = "cond_taken_"


class Tables(NamedTuple):
  """The relative terms' inputs, None without them.

  pos_key and pos_query [heads, 2S, d] (None without c2p, p2c) and rows [heads, 2Lp] int32, the
  relative row of distance t - (Lp - 1), the same for every head (a heads axis so that shard_map
  splits it as the projections).
  """

  pos_key: jax.Array | None = None
  pos_query: jax.Array | None = None
  rows: jax.Array | None = None


def distance_tables(pos_key, pos_query, relative_index, padded_length: int) -> Tables:
  """[2S, heads, d] relative projections (or None) → `Tables`: the projections, and the row of every distance.

  relative_index maps distances i - j (numpy) to rows of the projections.
  """
  if pos_key is None and pos_query is None:
    return Tables()
  heads = (pos_key if pos_key is not None else pos_query).shape[1]
  rows = np.asarray(relative_index(np.arange(2 * padded_length) - padded_length + 1), np.int32)
  heads_first = lambda table: None if table is None else jnp.transpose(table, (1, 0, 2))
  return Tables(heads_first(pos_key), heads_first(pos_query), jnp.broadcast_to(rows, (heads, rows.size)))


def one_row_pairs(relative_index, spec: Spec) -> float:
  """The fraction of (query tile, key tile) pairs whose distances all fall in one relative row.

  Those are the pairs whose score gradients `_add_score_gradients` adds as row sums.
  relative_index: numpy distances → rows, as `distance_tables` takes it.
  """
  tiles, block = spec.padded_length // spec.block, spec.block
  offsets = np.arange(1 - tiles, tiles)  # query tile − key tile: tiles − |offset| pairs each
  rows = relative_index(offsets[:, None] * block + np.arange(1 - block, block))  # each offset's distances
  one_row = rows.min(axis=1) == rows.max(axis=1)
  return float(np.sum((tiles - np.abs(offsets)) * one_row) / tiles**2)


def taken_scope(fraction: float) -> str:
  """The name of the scope saying that `fraction` of a kernel's conditional runs take lax.cond's true branch."""
  return f"{TAKEN_SCOPE}{fraction:.4f}"


def branch_scope(relative_index, spec: Spec):
  """A name scope saying how often the backward kernels take `_add_score_gradients`' one-row branch.

  The distance table decides that fraction (`one_row_pairs`) before they run; the GPU step's
  predictor (wyjax.aot.triton_ir) costs their branches by it. It names ops, and changes nothing
  they compute.
  """
  if not (spec.c2p or spec.p2c):
    return contextlib.nullcontext()
  return jax.named_scope(taken_scope(one_row_pairs(relative_index, spec)))


def score_tables(q, k, pos_key, pos_query):
  """c2p = q·pos_keyᵀ and p2c = k·pos_queryᵀ, [batch, heads, Lp, 2S] in the compute dtype (None without the term).

  As the XLA path computes them.
  """
  c2p = None if pos_key is None else jnp.einsum("bhqd,hrd->bhqr", q, pos_key)
  p2c = None if pos_query is None else jnp.einsum("bhkd,hrd->bhkr", k, pos_query)
  return c2p, p2c


def _input_names(spec: Spec, backward: bool):
  relative = ("rows",) * (spec.c2p or spec.p2c) + ("c2p",) * spec.c2p + ("p2c",) * spec.p2c
  return ("seed", "q", "k", "v", "mask") + relative + (("do", "lse", "delta") if backward else ())


def _iota(shape, axis):
  return jax.lax.broadcasted_iota(jnp.int32, shape, axis)


def _relative_rows(spec: Spec, r: common.Refs, rows, cols):
  """The relative rows of queries at positions `rows` ([B, 1]) × keys at `cols` ([1, B]), for c2p and p2c.

  p2c's are of the same pairs key-major ([B_keys, B_queries]); None without the term.
  """
  at = lambda queries, keys: r.rows[queries - keys + (spec.padded_length - 1)]
  return at(rows, cols) if spec.c2p else None, at(rows.T, cols.T) if spec.p2c else None


def _scores(spec: Spec, r: common.Refs, q, k, mask, cols, relative, c2p_rows, p2c_rows):
  """Masked float32 scores of a tile.

  relative: `_relative_rows`; c2p_rows ([B, 1], queries) and p2c_rows ([B, 1], keys) index the
  program's blocks of the score tables. p2c is gathered key-major and transposed, so that
  neighbouring threads read neighbouring entries of a row.
  """
  s = common.dot_nt(q, k)
  c2p_relative, p2c_relative = relative
  if spec.c2p:
    s += r.c2p[c2p_rows, c2p_relative].astype(jnp.float32)
  if spec.p2c:
    s += r.p2c[p2c_rows, p2c_relative].astype(jnp.float32).T
  return common.mask_scores(spec, s, mask, cols)


def _add_score_gradients(table, rows, relative, ds):
  """table[rows, relative] += ds, atomically: a tile's score gradients [B, B] at the rows they were gathered from.

  rows [B, 1]: the tile's rows of the table. Where a tile pair's distances all fall in one relative
  row (distant tiles, under log buckets or clipping), the B² adds would contend for B places: their
  sums are added instead, B adds to B places (`branch_scope` gives the fraction of tile pairs that do).
  """
  lowest = jnp.min(relative)
  jax.lax.cond(
    lowest == jnp.max(relative),
    lambda: jax.ref.addupdate(table, (rows, jnp.full_like(rows, lowest)), ds.sum(axis=1, keepdims=True)),
    lambda: jax.ref.addupdate(table, (rows, relative), ds),
  )


def _dropout_stream(r: common.Refs):
  """(seed, batch row · heads + head) of the program's dropout; the grid is (tile, batch, head).

  Read outside the loops: interpret mode finds program ids only at the kernel's top level.
  """
  return r.seed[0], pl.program_id(1) * pl.num_programs(2) + pl.program_id(2)


def _dropout(spec: Spec, stream, rows, cols):
  return common.dropout(spec, *stream, rows, cols, spec.padded_length)


def _forward_kernel(spec: Spec, *refs):
  """Grid (query tile, batch, head): o and the log-sum-exp of the tile's queries."""
  r = common.Refs(_input_names(spec, backward=False) + ("o", "lse"), refs)
  block = spec.block
  local = _iota((block, 1), 0)
  rows = pl.program_id(0) * block + local
  q, stream = r.q[...], _dropout_stream(r)

  def step(key_tile, carry):
    m, total, acc = carry
    keys = pl.ds(key_tile * block, block)
    cols = key_tile * block + _iota((1, block), 1)
    relative = _relative_rows(spec, r, rows, cols)
    s = _scores(spec, r, q, r.k[keys, :], r.mask[:, keys], cols, relative, local, cols.T)
    m, total, p, correction = common.softmax_step(s, m, total)
    p = _dropout(spec, stream, rows, cols)(p)
    return m, total, correction * acc + common.dot(p.astype(r.v.dtype), r.v[keys, :])

  init = (
    jnp.full((block, 1), MASKED, jnp.float32),
    jnp.zeros((block, 1), jnp.float32),
    jnp.zeros(q.shape, jnp.float32),
  )
  m, total, acc = jax.lax.fori_loop(0, spec.padded_length // block, step, init)
  r.o[...] = (acc / total).astype(r.o.dtype)
  r.lse[...] = (m + jnp.log(total))[:, 0]


def _dq_kernel(spec: Spec, *refs):
  """Grid (query tile, batch, head): dq, and dc2p at the tile's rows (added to the zeros it aliases)."""
  relative_grad = ("dc2p_zeros",) * spec.c2p
  r = common.Refs(_input_names(spec, backward=True) + relative_grad + ("dq",) + ("dc2p",) * spec.c2p, refs)
  block = spec.block
  local = _iota((block, 1), 0)
  rows = pl.program_id(0) * block + local
  q, do, stream = r.q[...], r.do[...], _dropout_stream(r)
  lse, delta = r.lse[...][:, None], r.delta[...][:, None]

  def step(key_tile, dq):
    keys = pl.ds(key_tile * block, block)
    cols = key_tile * block + _iota((1, block), 1)
    k, mask = r.k[keys, :], r.mask[:, keys]
    relative = _relative_rows(spec, r, rows, cols)
    s = _scores(spec, r, q, k, mask, cols, relative, local, cols.T)
    dropout = _dropout(spec, stream, rows, cols)
    dp = dropout(common.dot_nt(do, r.v[keys, :]))
    ds = common.score_gradient(spec, jnp.exp(s - lse), dp, delta, mask)
    if spec.c2p:
      _add_score_gradients(r.dc2p, local, relative[0], ds)
    return dq + common.dot(ds.astype(k.dtype), k)

  r.dq[...] = jax.lax.fori_loop(0, spec.padded_length // block, step, jnp.zeros(q.shape, jnp.float32))


def _dkv_kernel(spec: Spec, mask_rows: int, *refs):
  """Grid (key tile, batch, head): dk, dv, and dp2c at the tile's rows (added to the zeros it aliases)."""
  relative_grad = ("dp2c_zeros",) * spec.p2c
  r = common.Refs(_input_names(spec, backward=True) + relative_grad + ("dk", "dv") + ("dp2c",) * spec.p2c, refs)
  block = spec.block
  local = _iota((1, block), 1)
  cols = pl.program_id(0) * block + local
  k, v, stream = r.k[...], r.v[...], _dropout_stream(r)

  def step(query_tile, carry):
    dk, dv = carry
    queries = pl.ds(query_tile * block, block)
    rows = query_tile * block + _iota((block, 1), 0)
    q, do = r.q[queries, :], r.do[queries, :]
    mask = r.mask[...] if mask_rows == 1 else r.mask[queries, :]
    relative = _relative_rows(spec, r, rows, cols)
    s = _scores(spec, r, q, k, mask, cols, relative, rows, local.T)
    p = jnp.exp(s - r.lse[queries][:, None])
    dropout = _dropout(spec, stream, rows, cols)
    dv += common.dot_tn(dropout(p).astype(do.dtype), do)
    dp = dropout(common.dot_nt(do, v))
    ds = common.score_gradient(spec, p, dp, r.delta[queries][:, None], mask)
    if spec.p2c:
      _add_score_gradients(r.dp2c, local.T, relative[1], ds.T)  # key-major, as gathered
    return dk + common.dot_tn(ds.astype(q.dtype), q), dv

  zeros = jnp.zeros(k.shape, jnp.float32)
  dk, dv = jax.lax.fori_loop(0, spec.padded_length // block, step, (zeros, zeros))
  r.dk[...] = dk
  r.dv[...] = dv.astype(r.dv.dtype)


# Block specs. Grids run (tile, batch, head); `tile` is the program's own query or key tile, and
# the other axis's tiles are sliced from the whole sequence in the kernel's loop.
def _own(spec: Spec, width: int):
  """The program's tile of a [batch, heads, Lp, width] array."""
  return pl.BlockSpec((None, None, spec.block, width), lambda t, b, h: (b, h, t, 0))


def _whole(spec: Spec, width: int):
  """The whole sequence of a [batch, heads, Lp, width] array."""
  return pl.BlockSpec((None, None, spec.padded_length, width), lambda t, b, h: (b, h, 0, 0))


def _in_specs(spec: Spec, mask_rows: int, d: int, width: int, key_major: bool, backward: bool):
  """Block specs of `_input_names`: the own tile of the major axis, the whole sequence of the other.

  width: 2S, the score tables' last axis.
  """
  lp, block = spec.padded_length, spec.block
  query, key = (_whole, _own) if key_major else (_own, _whole)
  if mask_rows == 1:
    mask = (
      pl.BlockSpec((None, 1, block), lambda t, b, h: (b, 0, t))
      if key_major
      else pl.BlockSpec((None, 1, lp), lambda t, b, h: (b, 0, 0))
    )
  else:
    mask = (
      pl.BlockSpec((None, lp, block), lambda t, b, h: (b, 0, t))
      if key_major
      else pl.BlockSpec((None, block, lp), lambda t, b, h: (b, t, 0))
    )
  specs = [pl.BlockSpec((1,), lambda t, b, h: (0,)), query(spec, d), key(spec, d), key(spec, d), mask]
  if spec.c2p or spec.p2c:
    specs.append(pl.BlockSpec((None, 2 * lp), lambda t, b, h: (h, 0)))
  specs += [query(spec, width)] * spec.c2p + [key(spec, width)] * spec.p2c
  if backward:
    per_query = (
      pl.BlockSpec((None, None, lp), lambda t, b, h: (b, h, 0))
      if key_major
      else pl.BlockSpec((None, None, block), lambda t, b, h: (b, h, t))
    )
    specs += [query(spec, d), per_query, per_query]  # do, lse, delta
  return specs


def _call(kernel, spec: Spec, q, grid, in_specs, out_shape, out_specs, aliases=None):
  """The pallas_call of a kernel: eight warps for d = 128, the loop's loads double-buffered where they fit.

  Not double-buffered where a row of q is over 256 bytes (float32, d = 128): two stages would pass
  the 227 KiB of shared memory an H100 block may have.
  """
  row_bytes = q.shape[-1] * q.dtype.itemsize
  return pl.pallas_call(
    kernel,
    grid=grid,
    in_specs=in_specs,
    out_specs=out_specs,
    out_shape=out_shape,
    input_output_aliases=aliases or {},
    interpret=spec.interpret,
    compiler_params=pltriton.CompilerParams(
      num_warps=4 if q.shape[-1] <= 64 else 8, num_stages=2 if row_bytes <= 256 else 1
    ),
  )


def _width(c2p, p2c) -> int:
  """2S, the score tables' last axis (0 without relative terms)."""
  table = c2p if c2p is not None else p2c
  return 0 if table is None else table.shape[-1]


def _relative_inputs(tables: Tables, c2p, p2c):
  return tuple(x for x in (tables.rows, c2p, p2c) if x is not None)


def _forward(spec: Spec, q, k, v, mask, tables: Tables, seed):
  batch, heads, lp, d = q.shape
  c2p, p2c = score_tables(q, k, tables.pos_key, tables.pos_query)
  width = _width(c2p, p2c)
  return _call(
    functools.partial(_forward_kernel, spec),
    spec,
    q,
    (lp // spec.block, batch, heads),
    _in_specs(spec, mask.shape[1], d, width, key_major=False, backward=False),
    [jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((batch, heads, lp), jnp.float32)],
    [_own(spec, d), pl.BlockSpec((None, None, spec.block), lambda t, b, h: (b, h, t))],
  )(seed.reshape(1), q, k, v, mask, *_relative_inputs(tables, c2p, p2c))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fused_attention(spec: Spec, q, k, v, mask, tables: Tables, seed):
  """softmax(disentangled scores, masked) · v, dropout on the probabilities.

  q, k, v: [batch, heads, Lp, d] with Lp a multiple of spec.block (keys from spec.length on are
  never attended); mask: int32 [batch, 1 or Lp, Lp], nonzero where a query may attend a key;
  tables: `distance_tables` (c2p, p2c entries as spec says); seed: int32 scalar of the dropout
  hash. Returns [batch, heads, Lp, d].
  """
  return _forward(spec, q, k, v, mask, tables, seed)[0]


def _fused_attention_fwd(spec, q, k, v, mask, tables, seed):
  o, lse = _forward(spec, q, k, v, mask, tables, seed)
  return o, (q, k, v, mask, tables, seed, o, lse)


def _fused_attention_bwd(spec, residuals, do):
  q, k, v, mask, tables, seed, o, lse = residuals
  batch, heads, lp, d = q.shape
  (c2p, p2c), tables_vjp = jax.vjp(score_tables, q, k, tables.pos_key, tables.pos_query)
  width = _width(c2p, p2c)
  delta = jnp.sum(do.astype(jnp.float32) * o.astype(jnp.float32), axis=-1)
  args = (seed.reshape(1), q, k, v, mask, *_relative_inputs(tables, c2p, p2c), do, lse, delta)
  grid = (lp // spec.block, batch, heads)
  f32 = lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32)
  dc2p = [jnp.zeros(c2p.shape, jnp.float32)] if spec.c2p else []  # the score tables' gradients,
  dp2c = [jnp.zeros(p2c.shape, jnp.float32)] if spec.p2c else []  # added to in place
  dq, *dc2p = _call(
    functools.partial(_dq_kernel, spec),
    spec,
    q,
    grid,
    _in_specs(spec, mask.shape[1], d, width, key_major=False, backward=True) + [_own(spec, width)] * spec.c2p,
    [f32(q)] + [f32(x) for x in dc2p],
    [_own(spec, d)] + [_own(spec, width)] * spec.c2p,
    {len(args): 1} if spec.c2p else None,
  )(*args, *dc2p)
  dk, dv, *dp2c = _call(
    functools.partial(_dkv_kernel, spec, mask.shape[1]),
    spec,
    q,
    grid,
    _in_specs(spec, mask.shape[1], d, width, key_major=True, backward=True) + [_own(spec, width)] * spec.p2c,
    [f32(k), jax.ShapeDtypeStruct(v.shape, v.dtype)] + [f32(x) for x in dp2c],
    [_own(spec, d)] * 2 + [_own(spec, width)] * spec.p2c,
    {len(args): 2} if spec.p2c else None,
  )(*args, *dp2c)
  grads = Tables()
  if spec.c2p or spec.p2c:  # through the score tables' matmuls
    cast = lambda grad, table: grad[0].astype(table.dtype) if grad else None
    dq_tables, dk_tables, dpos_key, dpos_query = tables_vjp((cast(dc2p, c2p), cast(dp2c, p2c)))
    dq, dk, grads = dq + dq_tables, dk + dk_tables, Tables(dpos_key, dpos_query)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv, None, grads, None


fused_attention.defvjp(_fused_attention_fwd, _fused_attention_bwd)

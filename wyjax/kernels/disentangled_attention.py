"""DeBERTa's disentangled attention as flash-style Pallas kernels for TPUs (Mosaic; interpreted anywhere).

Scores, for query i and key j at distance d = i - j (without c2p and p2c, plain flash attention: BERT):

    s[i, j] = (q_i·k_j + q_i·c2p_table[d] + k_j·p2c_table[d]) / scale

- The tables are the relative projections gathered by distance (`distance_tables`): a (query tile, key
  tile) pair scores a window of 2B consecutive rows by a [B, 2B] matmul, and a strided roll (`_skew`)
  lines each query's B keys up.
- Dropout hashes its keep mask from (seed, batch·head, i, j) (`attention_common.dropout_keep`): no kernel
  stores it. The backward recomputes the scores from the saved log-sum-exp: one kernel accumulates dq and
  the tables' gradients, one dk and dv.
The GPU kernel is disentangled_attention_gpu; the tile math both use is attention_common's.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from wyjax.kernels import attention_common as common
from wyjax.kernels.attention_common import MASKED, Spec

LANES = 128


class Tables(NamedTuple):
  """Relative projections gathered by distance, [heads, 2Lp, d] each (None without the term).

  Descending tables run from distance Lp - 1 down to -Lp, ascending ones from -Lp + 1 up to Lp,
  so that every tile's window starts at a multiple of the block (`_window_starts`). The scores
  read pos_key descending (c2p) and pos_query ascending (p2c); the backward, which can only roll
  rows the other way, writes the gradients of the opposite orders.
  """

  c2p: jax.Array | None = None  # pos_key, descending
  c2p_grad: jax.Array | None = None  # pos_key, ascending
  p2c: jax.Array | None = None  # pos_query, ascending
  p2c_grad: jax.Array | None = None  # pos_query, descending


def distance_tables(pos_key, pos_query, relative_index, padded_length: int) -> Tables:
  """[2S, heads, d] relative projections (or None) → `Tables`.

  relative_index maps distances i - j (numpy) to rows of the projections.
  """
  if pos_key is None and pos_query is None:
    return Tables()
  descending = relative_index(padded_length - 1 - np.arange(2 * padded_length))
  ascending = relative_index(np.arange(2 * padded_length) - padded_length + 1)
  gather = lambda table, rows: None if table is None else jnp.transpose(table[rows], (1, 0, 2))
  return Tables(
    gather(pos_key, descending), gather(pos_key, ascending), gather(pos_query, ascending), gather(pos_query, descending)
  )


def _window_starts(query_tile, key_tile, tiles: int, block: int):
  """First rows of a tile pair's windows in the descending and ascending tables.

  Window row w holds distance (i0 - j0) + B - 1 - w, resp. (i0 - j0) - B + 1 + w.
  """
  descending = (tiles - 1 - query_tile + key_tile) * block
  ascending = (tiles - 1 + query_tile - key_tile) * block
  return pl.multiple_of(descending, block), pl.multiple_of(ascending, block)


def _skew(x, block: int):
  """Row a of [B, 2B] rolled right by B + 1 + a: then column b < B holds x[a, B - 1 - a + b]."""
  return pltpu.roll(x, block + 1, 1, stride=1, stride_axis=0)


def _spread(ds):
  """[B, B] gradients of a tile's relative scores → [B, 2B] gradients of its window scores, opposite order.

  `_skew` transposed would roll rows by -a, which Mosaic cannot (nor reverse an axis): reversing the
  columns by a matmul turns the diagonals i - j into anti-diagonals, which a roll by +a lines up.
  """
  block = ds.shape[0]
  flip = (
    jax.lax.broadcasted_iota(jnp.int32, (block, block), 0) + jax.lax.broadcasted_iota(jnp.int32, (block, block), 1)
    == block - 1
  ).astype(ds.dtype)
  precision = jax.lax.Precision.HIGHEST if ds.dtype == jnp.float32 else None  # a permutation: exact
  flipped = jax.lax.dot_general(
    ds, flip, (((1,), (0,)), ((), ())), precision=precision, preferred_element_type=jnp.float32
  )
  spread = pltpu.roll(jnp.concatenate([flipped, jnp.zeros_like(flipped)], axis=1), 0, 1, stride=1, stride_axis=0)
  return spread.astype(ds.dtype)


def _to_column(row):
  """[1, B] → [B, 1] (through a lane-wide transpose, which Mosaic lowers)."""
  return jnp.transpose(jnp.broadcast_to(row, (LANES, row.shape[1])))[:, :1]


def _to_row(column):
  return jnp.transpose(jnp.broadcast_to(column, (column.shape[0], LANES)))[:1, :]


def _batch_head():
  """The dropout stream of this grid step's (batch row, head): batch · heads + head."""
  return pl.program_id(1) * pl.num_programs(0) + pl.program_id(0)


def _positions(spec: Spec, query_tile, key_tile):
  rows = query_tile * spec.block + jax.lax.broadcasted_iota(jnp.int32, (spec.block, 1), 0)
  cols = key_tile * spec.block + jax.lax.broadcasted_iota(jnp.int32, (1, spec.block), 1)
  return rows, cols


def _scores(spec: Spec, r, query_tile, key_tile, tiles: int, cols):
  """Masked scores of one tile, float32 [B, B]."""
  q, k, block = r.q[...], r.k[...], spec.block
  descending, ascending = _window_starts(query_tile, key_tile, tiles, block)
  s = common.dot_nt(q, k)
  if spec.c2p:
    s += _skew(common.dot_nt(q, _window(r.c2p, descending, block)), block)[:, :block]
  if spec.p2c:
    s += jnp.transpose(_skew(common.dot_nt(k, _window(r.p2c, ascending, block)), block)[:, :block])
  return common.mask_scores(spec, s, r.mask[...], cols)


def _dropout(spec: Spec, seed, rows, cols, tiles: int):
  return common.dropout(spec, seed, _batch_head(), rows, cols, tiles * spec.block)


def _table_names(spec: Spec, backward: bool):
  return (
    ("c2p",) * spec.c2p
    + ("p2c",) * spec.p2c
    + (("c2p_grad",) * spec.c2p + ("p2c_grad",) * spec.p2c if backward else ())
  )


def _input_names(spec: Spec, backward: bool):
  return ("seed", "q", "k", "v", "mask") + _table_names(spec, backward) + (("do", "lse", "delta") if backward else ())


def _window(table_ref, start, block: int):
  return table_ref[pl.ds(start, 2 * block), :]


def _forward_kernel(spec: Spec, tiles: int, *refs):
  r = common.Refs(_input_names(spec, backward=False) + ("o", "lse", "m", "l", "acc"), refs)
  query_tile, key_tile = pl.program_id(2), pl.program_id(3)

  @pl.when(key_tile == 0)
  def _():
    r.m[...] = jnp.full(r.m.shape, MASKED, jnp.float32)
    r.l[...] = jnp.zeros(r.l.shape, jnp.float32)
    r.acc[...] = jnp.zeros(r.acc.shape, jnp.float32)

  rows, cols = _positions(spec, query_tile, key_tile)
  s = _scores(spec, r, query_tile, key_tile, tiles, cols)
  m, r.l[...], p, correction = common.softmax_step(s, r.m[...], r.l[...])
  p = _dropout(spec, r.seed[0], rows, cols, tiles)(p)
  r.acc[...] = correction * r.acc[...] + common.dot(p.astype(r.v.dtype), r.v[...])
  r.m[...] = m

  @pl.when(key_tile == tiles - 1)
  def _():
    r.o[...] = (r.acc[...] / r.l[...]).astype(r.o.dtype)
    r.lse[...] = _to_row(r.m[...] + jnp.log(r.l[...]))


def _score_gradient(spec: Spec, r: common.Refs, query_tile, key_tile, tiles: int):
  """A tile's (dropped probabilities, d loss / d unscaled score terms in the compute dtype), recomputed."""
  rows, cols = _positions(spec, query_tile, key_tile)
  s = _scores(spec, r, query_tile, key_tile, tiles, cols)
  p = jnp.exp(s - _to_column(r.lse[...]))
  dropout = _dropout(spec, r.seed[0], rows, cols, tiles)
  dp = dropout(common.dot_nt(r.do[...], r.v[...]))
  ds = common.score_gradient(spec, p, dp, _to_column(r.delta[...]), r.mask[...])
  return dropout(p), ds.astype(r.q.dtype)


def _dq_kernel(spec: Spec, tiles: int, *refs):
  """Grid (head, batch, query tile, key tile): dq, and this head's tables' gradients.

  The tables' gradients accumulate over all batch rows and tiles.
  """
  grads = ("dc2p",) * spec.c2p + ("dp2c",) * spec.p2c  # [2Lp, d] float32 blocks, resident over a head
  r = common.Refs(_input_names(spec, backward=True) + ("dq",) + grads + ("dq_acc",), refs)
  query_tile, key_tile = pl.program_id(2), pl.program_id(3)
  first, last = key_tile == 0, key_tile == tiles - 1

  @pl.when(first & (query_tile == 0) & (pl.program_id(1) == 0))
  def _():
    for name in grads:
      getattr(r, name)[...] = jnp.zeros(getattr(r, name).shape, jnp.float32)

  @pl.when(first)
  def _():
    r.dq_acc[...] = jnp.zeros(r.dq_acc.shape, jnp.float32)

  _, ds = _score_gradient(spec, r, query_tile, key_tile, tiles)
  q, k, block = r.q[...], r.k[...], spec.block
  descending, ascending = _window_starts(query_tile, key_tile, tiles, block)
  dq = common.dot(ds, k)
  if spec.c2p:  # c2p's window gradient comes out ascending
    dwindow = _spread(ds)
    dq += common.dot(dwindow, _window(r.c2p_grad, ascending, block))
    r.dc2p[pl.ds(ascending, 2 * block), :] += common.dot_tn(dwindow, q)
  if spec.p2c:  # p2c's descending
    r.dp2c[pl.ds(descending, 2 * block), :] += common.dot_tn(_spread(jnp.transpose(ds)), k)
  r.dq_acc[...] += dq

  @pl.when(last)
  def _():
    r.dq[...] = r.dq_acc[...].astype(r.dq.dtype)


def _dkv_kernel(spec: Spec, tiles: int, *refs):
  """Grid (head, batch, key tile, query tile): dk and dv."""
  r = common.Refs(_input_names(spec, backward=True) + ("dk", "dv", "dk_acc", "dv_acc"), refs)
  key_tile, query_tile = pl.program_id(2), pl.program_id(3)

  @pl.when(query_tile == 0)
  def _():
    r.dk_acc[...] = jnp.zeros(r.dk_acc.shape, jnp.float32)
    r.dv_acc[...] = jnp.zeros(r.dv_acc.shape, jnp.float32)

  p, ds = _score_gradient(spec, r, query_tile, key_tile, tiles)
  q, do = r.q[...], r.do[...]
  r.dv_acc[...] += common.dot_tn(p.astype(do.dtype), do)
  dk = common.dot_tn(ds, q)
  if spec.p2c:
    descending, _ = _window_starts(query_tile, key_tile, tiles, spec.block)
    dk += common.dot(_spread(jnp.transpose(ds)), _window(r.p2c_grad, descending, spec.block))
  r.dk_acc[...] += dk

  @pl.when(query_tile == tiles - 1)
  def _():
    r.dk[...] = r.dk_acc[...].astype(r.dk.dtype)
    r.dv[...] = r.dv_acc[...].astype(r.dv.dtype)


# Block specs. Grids run (head, batch, tile, tile): a head's tables stay in VMEM over the batch.
# Index maps get the grid indices and the scalar-prefetched seed; `swapped` grids (the dk/dv
# kernel) run the key tile before the query tile.
def _tile_spec(block, d, tile_of):
  return pl.BlockSpec((None, None, block, d), lambda h, b, i, j, seed: (b, h, tile_of(i, j), 0))


def _row_spec(block, tile_of):  # lse, delta: [batch, heads, 1, Lp]
  return pl.BlockSpec((None, None, 1, block), lambda h, b, i, j, seed: (b, h, 0, tile_of(i, j)))


def _in_specs(spec: Spec, mask_rows: int, d: int, tiles: int, swapped: bool, backward: bool):
  query = (lambda i, j: j) if swapped else (lambda i, j: i)
  key = (lambda i, j: i) if swapped else (lambda i, j: j)
  block = spec.block
  if mask_rows == 1:
    mask = pl.BlockSpec((None, 1, block), lambda h, b, i, j, seed: (b, 0, key(i, j)))
  else:
    mask = pl.BlockSpec((None, block, block), lambda h, b, i, j, seed: (b, query(i, j), key(i, j)))
  table = pl.BlockSpec(
    (None, 2 * tiles * block, d), lambda h, b, i, j, seed: (h, 0, 0), pipeline_mode=pl.Buffered(1)
  )  # changes once per head: one buffer
  specs = [_tile_spec(block, d, query), _tile_spec(block, d, key), _tile_spec(block, d, key), mask]
  specs += [table] * len(_table_names(spec, backward))
  if backward:
    specs += [_tile_spec(block, d, query), _row_spec(block, query), _row_spec(block, query)]
  return specs


def cost_estimates(spec: Spec, batch: int, heads: int, d: int, itemsize: int, mask_rows: int) -> dict:
  """FLOPs, exps and HBM bytes of the three kernels, counted as Pallas moves blocks.

  A block is fetched again whenever its index changes between grid steps: the tiles indexed by the inner
  grid axis are read at every step, the others once per outer tile, a table once per head.
  """
  lp = spec.padded_length
  pairs = batch * heads * (lp // spec.block) ** 2  # grid steps
  mm = 2 * spec.block**2 * d  # one [B, d] x [d, B] matmul
  flip = 2 * spec.block**3  # `_spread`'s column reversal
  terms = spec.c2p + spec.p2c
  scores = mm * (1 + 2 * terms)  # q.k, and per term a [B, d] x [d, 2B] window matmul
  once = batch * heads * lp * d * itemsize  # a [Lp, d] operand, read or written once
  every_step = pairs * spec.block * d * itemsize  # a [B, d] tile read at every grid step
  mask = pairs * spec.block * (1 if mask_rows == 1 else spec.block) * 4
  table = heads * 2 * lp * d * itemsize  # a table, read once per head
  stats = batch * heads * lp * 4  # lse or delta, once
  exps = pairs * spec.block**2
  forward = pl.CostEstimate(  # reads q, k, v, tables; writes o, lse
    flops=pairs * (scores + mm),
    transcendentals=exps + batch * heads * lp,
    bytes_accessed=2 * once + 2 * every_step + mask + terms * table + stats,
  )
  dq = pl.CostEstimate(  # + dP, dS.K; per term a flip and the window gradient, and c2p's window.dq
    flops=pairs * (scores + 2 * mm + (flip + 2 * mm) * terms + 2 * mm * spec.c2p),
    transcendentals=exps,
    bytes_accessed=(3 * once + 2 * every_step + mask + 2 * terms * table + 2 * stats + terms * table // itemsize * 4),
  )  # the tables' gradients, float32
  dkv = pl.CostEstimate(  # + dV, dP, dS^T.Q, and p2c's flip and window.dk
    flops=pairs * (scores + 3 * mm + (flip + 2 * mm) * spec.p2c),
    transcendentals=exps,
    bytes_accessed=4 * once + 2 * every_step + mask + 2 * terms * table + 2 * pairs * spec.block * 4,
  )
  return {"forward": forward, "dq": dq, "dkv": dkv}


def _table_vmem_bytes(tables: int, lp: int, d: int, itemsize: int) -> int:
  """VMEM of `tables` whole [2Lp, d] tables (one buffer each), the lanes padded to 128."""
  return tables * 2 * lp * max(d, LANES) * itemsize


def _call(kernel, spec: Spec, grid, in_specs, out_shape, out_specs, scratch, semantics, cost, vmem_bytes: int):
  """pallas_call, the scoped VMEM limit raised to vmem_bytes (the resident tables) plus 16 MiB for tiles.

  The tables grow with L (at 8192 the dq kernel's take 48 MiB of v5p's 64): beyond what a chip's VMEM
  holds the compiler refuses with a VMEM out-of-memory error.
  """
  params = None
  if not spec.interpret:
    params = pltpu.CompilerParams(
      dimension_semantics=semantics, vmem_limit_bytes=vmem_bytes + 16 * 2**20 if vmem_bytes > 4 * 2**20 else None
    )
  return pl.pallas_call(
    kernel,
    out_shape=out_shape,
    grid_spec=pltpu.PrefetchScalarGridSpec(
      num_scalar_prefetch=1, grid=grid, in_specs=in_specs, out_specs=out_specs, scratch_shapes=scratch
    ),
    compiler_params=params,
    cost_estimate=cost,
    interpret=spec.interpret,
  )


def _forward(spec: Spec, q, k, v, mask, tables: Tables, seed):
  batch, heads, lp, d = q.shape
  tiles = lp // spec.block
  cost = cost_estimates(spec, batch, heads, d, q.dtype.itemsize, mask.shape[1])["forward"]
  o, lse = _call(
    functools.partial(_forward_kernel, spec, tiles),
    spec,
    (heads, batch, tiles, tiles),
    _in_specs(spec, mask.shape[1], d, tiles, swapped=False, backward=False),
    [jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((batch, heads, 1, lp), jnp.float32)],
    [_tile_spec(spec.block, d, lambda i, j: i), _row_spec(spec.block, lambda i, j: i)],
    [
      pltpu.VMEM((spec.block, 1), jnp.float32),
      pltpu.VMEM((spec.block, 1), jnp.float32),
      pltpu.VMEM((spec.block, d), jnp.float32),
    ],
    ("parallel", "parallel", "parallel", "arbitrary"),
    cost,
    _table_vmem_bytes(spec.c2p + spec.p2c, lp, d, q.dtype.itemsize),
  )(seed.reshape(1), q, k, v, mask, *(getattr(tables, name) for name in _table_names(spec, backward=False)))
  return o, lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fused_attention(spec: Spec, q, k, v, mask, tables: Tables, seed):
  """softmax(disentangled scores, masked) · v, dropout on the probabilities.

  Args:
    spec: what the kernels are compiled for.
    q, k, v: [batch, heads, Lp, d], Lp a multiple of spec.block (keys from spec.length on are never attended).
    mask: int32 [batch, 1 or Lp, Lp], nonzero where a query may attend a key.
    tables: `distance_tables` (c2p, p2c entries as spec says).
    seed: int32 scalar of the dropout hash.

  Returns:
    [batch, heads, Lp, d].
  """
  return _forward(spec, q, k, v, mask, tables, seed)[0]


def _fused_attention_fwd(spec, q, k, v, mask, tables, seed):
  o, lse = _forward(spec, q, k, v, mask, tables, seed)
  return o, (q, k, v, mask, tables, seed, o, lse)


def _fused_attention_bwd(spec, residuals, do):
  q, k, v, mask, tables, seed, o, lse = residuals
  batch, heads, lp, d = q.shape
  tiles = lp // spec.block
  costs = cost_estimates(spec, batch, heads, d, q.dtype.itemsize, mask.shape[1])
  delta = jnp.sum(do.astype(jnp.float32) * o.astype(jnp.float32), axis=-1)[:, :, None, :]
  args = (
    seed.reshape(1),
    q,
    k,
    v,
    mask,
    *(getattr(tables, n) for n in _table_names(spec, backward=True)),
    do,
    lse,
    delta,
  )
  grid = (heads, batch, tiles, tiles)
  terms = spec.c2p + spec.p2c
  table_shape = jax.ShapeDtypeStruct((heads, 2 * lp, d), jnp.float32)
  table_spec = pl.BlockSpec((None, 2 * lp, d), lambda h, b, i, j, seed: (h, 0, 0), pipeline_mode=pl.Buffered(1))
  dq, *dtables = _call(
    functools.partial(_dq_kernel, spec, tiles),
    spec,
    grid,
    _in_specs(spec, mask.shape[1], d, tiles, swapped=False, backward=True),
    [jax.ShapeDtypeStruct(q.shape, q.dtype)] + [table_shape] * terms,
    [_tile_spec(spec.block, d, lambda i, j: i)] + [table_spec] * terms,
    [pltpu.VMEM((spec.block, d), jnp.float32)],
    ("parallel", "arbitrary", "arbitrary", "arbitrary"),
    costs["dq"],
    _table_vmem_bytes(2 * terms, lp, d, q.dtype.itemsize) + _table_vmem_bytes(terms, lp, d, 4),
  )(*args)
  dk, dv = _call(
    functools.partial(_dkv_kernel, spec, tiles),
    spec,
    grid,
    _in_specs(spec, mask.shape[1], d, tiles, swapped=True, backward=True),
    [jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
    [_tile_spec(spec.block, d, lambda i, j: i)] * 2,
    [pltpu.VMEM((spec.block, d), jnp.float32)] * 2,
    ("parallel", "parallel", "parallel", "arbitrary"),
    costs["dkv"],
    _table_vmem_bytes(2 * terms, lp, d, q.dtype.itemsize),
  )(*args)
  dtables = iter(dtables)  # the gradients of the tables the scores read are in the opposite
  grads = Tables(  # orders (`_spread`), which are gathered from the same projections
    c2p_grad=next(dtables).astype(tables.c2p.dtype) if spec.c2p else None,
    p2c_grad=next(dtables).astype(tables.p2c.dtype) if spec.p2c else None,
  )
  return dq, dk, dv, None, grads, None


fused_attention.defvjp(_fused_attention_fwd, _fused_attention_bwd)

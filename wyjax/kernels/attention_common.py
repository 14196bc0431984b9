"""What the TPU and GPU attention kernels share: the spec, a flash attention's tile math, the dropout hash.

Everything here is plain jnp on arrays, so it traces inside a Mosaic (TPU) or Triton (GPU) kernel body
alike; the kernels differ in how they tile, move blocks and add the relative terms.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

MASKED = float(np.finfo(np.float32).min)  # a key the mask hides: as the XLA path, so a fully masked row is uniform


@dataclasses.dataclass(frozen=True)
class Spec:
  """What the kernels are compiled for (static)."""

  length: int  # true sequence length; the arrays are padded to a multiple of `block`
  block: int
  scale: float
  c2p: bool
  p2c: bool
  dropout_rate: float
  interpret: bool

  @property
  def padded_length(self) -> int:
    """Lp: the length padded to whole tiles."""
    return -(-self.length // self.block) * self.block


class Refs:
  """A kernel's refs by name, in pallas_call's order (inputs, outputs, scratch)."""

  def __init__(self, names, refs):
    assert len(names) == len(refs), (names, len(refs))
    self.__dict__.update(zip(names, refs))


def dot(a, b):
  return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def dot_nt(a, b):  # a @ b.T
  return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def dot_tn(a, b):  # a.T @ b
  return jax.lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def mask_scores(spec: Spec, s, mask, cols):
  """A tile's float32 scores, scaled where `mask` (nonzero: visible) lets the query see the key.

  MASKED where the mask hides the key, and -inf at the padding keys (cols ≥ spec.length), which no query
  attends.
  """
  s = jnp.where(mask != 0, s * (1.0 / spec.scale), MASKED)
  return jnp.where(cols < spec.length, s, -jnp.inf)


def softmax_step(s, m_prev, l_prev):
  """One more tile of keys in the online softmax, from the running row maximum and sum ([B, 1]).

  Returns:
    (m, l, p = exp(s - m), the correction of the earlier tiles' terms).
  """
  m = jnp.maximum(m_prev, s.max(axis=1, keepdims=True))
  p = jnp.exp(s - m)
  correction = jnp.exp(m_prev - m)
  return m, correction * l_prev + p.sum(axis=1, keepdims=True), p, correction


def score_gradient(spec: Spec, p, dp, delta, mask):
  """d loss / d unscaled score terms of a tile.

  p: the probabilities recomputed from the log-sum-exp; dp: d loss / d (dropped) probabilities;
  delta: rowsum(dO · O) ([B, 1]).
  """
  return jnp.where(mask != 0, p * (dp - delta) * (1.0 / spec.scale), 0.0)


def mix(x):
  """murmur3's 32-bit finaliser on int32: the dropout hash of the kernels here and of layers.keep_mask.

  Wrapping products have uint32's bits; shifts are logical.
  """
  srl = jax.lax.shift_right_logical
  x = x ^ srl(x, 16)
  x = x * jnp.int32(-2048144789)  # 0x85ebca6b
  x = x ^ srl(x, 13)
  x = x * jnp.int32(-1028477387)  # 0xc2b2ae35
  return x ^ srl(x, 16)


def fold_in(seed, value):
  """The int32 seed of stream `value` of `seed` (a batch row and head, a shard)."""
  return mix(seed ^ mix(value * jnp.int32(-1640531527) + 1))  # 0x9e3779b9


def dropout_keep(seed, batch_head, rows, cols, padded_length: int, rate: float):
  """Keep mask of attention-probability dropout for query rows × key cols of one batch row and head.

  rows, cols: int32, broadcastable. P(keep) = 1 - rate, to 2⁻²⁴. The kernels and tests share it.
  """
  bits = mix((rows * padded_length + cols) ^ fold_in(seed, batch_head))
  return jax.lax.shift_right_logical(bits, 8) >= jnp.int32(round(rate * (1 << 24)))


def dropout(spec: Spec, seed, batch_head, rows, cols, padded_length: int):
  """A tile's dropout, its keep mask hashed once: x ↦ x with the dropped entries 0, the kept ones rescaled.

  Without dropout, the identity. batch_head = batch row · heads + head.
  """
  if not spec.dropout_rate:
    return lambda x: x
  keep = dropout_keep(seed, batch_head, rows, cols, padded_length, spec.dropout_rate)
  return lambda x: jnp.where(keep, x * (1.0 / (1.0 - spec.dropout_rate)), 0.0)

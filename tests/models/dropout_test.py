"""layers.Dropout: two 16-bit draws per hashed word, at the configured rate, unbiased."""

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import layers

KEEP_90 = 58982  # round(0.9 * 2^16)


def test_keep_mask_rate_and_independence():
  """P(keep) = 58982 / 2^16 over 67,072 draws per mask (last axis 131, odd); the two halves of a
  word (columns j and j + 66), neighbouring columns and rows, and the masks of two keys, and of
  two keys that differ in one of their words only, overlap as independent masks do
  (0.9² = 0.81); a key gives one mask."""
  shape = (2, 2, 128, 131)
  key = jax.random.key(3)
  words = jax.random.key_data(key)
  masks = [
    np.asarray(layers.keep_mask(k, shape, KEEP_90))
    for k in (
      key,
      jax.random.key(4),
      jax.random.wrap_key_data(words ^ np.array([1, 0], np.uint32)),
      jax.random.wrap_key_data(words ^ np.array([0, 1], np.uint32)),
    )
  ]
  a = masks[0]
  assert a.shape == shape and a.dtype == bool
  for m in masks:
    assert abs(m.mean() - KEEP_90 / 65536) < 0.006, m.mean()  # 5 sigma: 0.0058
  half = 131 // 2 + 1
  for x, y in (
    (a[..., : half - 1], a[..., half:]),
    (a[..., :-1], a[..., 1:]),
    (a[..., :-1, :], a[..., 1:, :]),
    *((a, m) for m in masks[1:]),
  ):
    assert abs((x & y).mean() - 0.81) < 0.008, (x & y).mean()
  np.testing.assert_array_equal(a, layers.keep_mask(jax.random.key(3), shape, KEEP_90))


def test_dropout_keeps_the_expectation_and_is_off_when_deterministic():
  x = jnp.ones((64, 1024))
  dropout = layers.Dropout(0.1)
  y = np.asarray(dropout.apply({}, x, deterministic=False, rngs={"dropout": jax.random.key(0)}))
  np.testing.assert_allclose(np.unique(y), [0.0, 65536 / KEEP_90], rtol=1e-6)
  assert abs(y.mean() - 1.0) < 0.006, y.mean()  # 65,536 draws: 5 sigma 0.0065
  np.testing.assert_array_equal(dropout.apply({}, x, deterministic=True), x)
  np.testing.assert_array_equal(layers.Dropout(0.0).apply({}, x, deterministic=False), x)

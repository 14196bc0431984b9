"""layers.Dropout: four 16-bit draws per threefry block, at the configured rate, unbiased."""
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import layers

KEEP_90 = 58982  # round(0.9 * 2^16)


def test_keep_mask_rate_and_independence():
  """P(keep) = 58982 / 2^16 over 67,080 draws per mask (last axis 130, not a multiple of 4); the
  two halves of a word (columns j and j + 33), neighbouring columns and two keys' masks overlap
  as independent masks do (0.9² = 0.81), and a key gives one mask."""
  shape = (2, 2, 129, 130)
  a = np.asarray(layers.keep_mask(jax.random.key(3), shape, KEEP_90))
  b = np.asarray(layers.keep_mask(jax.random.key(4), shape, KEEP_90))
  assert a.shape == shape and a.dtype == bool
  for m in (a, b):
    assert abs(m.mean() - KEEP_90 / 65536) < 0.006, m.mean()  # 5 sigma: 0.0058
  quarter = 130 // 4 + 1
  for x, y in ((a[..., :quarter], a[..., quarter:2 * quarter]), (a[..., :-1], a[..., 1:]), (a, b)):
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

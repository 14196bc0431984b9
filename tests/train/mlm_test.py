import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wyjax.train import mlm

PAD, CLS, SEP, MASK, UNK = 0, 2, 3, 4, 1
SPECIAL = (PAD, CLS, SEP, MASK, UNK)


def _batch(rows=64, length=256, seed=0):
  ids = np.random.default_rng(seed).integers(5, 1000, (rows, length))
  ids[:, 0] = CLS
  ids[:, 100] = SEP
  ids[:, -20:] = PAD
  return jnp.asarray(ids)


def _mask(ids, rng=0, **kw):
  return mlm.mask_tokens(jax.random.key(rng), ids, mask_id=MASK, vocab_size=1000, special_ids=SPECIAL, **kw)


@pytest.mark.parametrize(
  "max_ngram,distribution", [(1, "harmonic"), (3, "harmonic"), (5, "geometric:0.2"), (4, "uniform")]
)
def test_fifteen_percent_selected_with_80_10_10(max_ngram, distribution):
  ids = _batch()
  inputs, targets, weights = _mask(ids, max_ngram=max_ngram, ngram_distribution=distribution)
  maskable = ~np.isin(np.asarray(ids), SPECIAL)
  selected = np.asarray(weights) > 0
  assert not (selected & ~maskable).any(), "special tokens are never selected"
  assert abs(selected.sum() / maskable.sum() - 0.15) < 0.01
  inputs, ids = np.asarray(inputs), np.asarray(ids)
  as_mask = (inputs == MASK)[selected].mean()
  changed = ((inputs != ids) & (inputs != MASK))[selected].mean()
  assert abs(as_mask - 0.8) < 0.02 and 0.08 < changed < 0.11  # a random token may equal the original
  assert (inputs[~selected] == ids[~selected]).all()
  np.testing.assert_array_equal(targets, ids)


def _run_lengths(selected: np.ndarray) -> np.ndarray:
  """Lengths of the runs of consecutive selected positions, over all rows."""
  edges = np.diff(np.pad(selected.astype(np.int8), ((0, 0), (1, 1))), axis=1)
  return np.flatnonzero(edges.ravel() == -1) - np.flatnonzero(edges.ravel() == 1)


@pytest.mark.parametrize(
  "max_ngram,distribution,expected", [(3, "uniform", [1 / 3, 1 / 3, 1 / 3]), (3, "harmonic", [6 / 11, 3 / 11, 2 / 11])]
)
def test_span_lengths_follow_the_distribution_up_to_max_ngram(max_ngram, distribution, expected):
  """At a 1% rate spans rarely touch, so each run of masked tokens is one span: its length
  follows the n-gram distribution and exceeds max_ngram only where two spans happen to meet."""
  ids = jnp.full((256, 1024), 7)
  _, _, weights = _mask(ids, rate=0.01, max_ngram=max_ngram, ngram_distribution=distribution)
  runs = _run_lengths(np.asarray(weights) > 0)
  assert len(runs) > 1000
  assert np.mean(runs > max_ngram) < 0.02
  frequencies = np.bincount(runs[runs <= max_ngram], minlength=max_ngram + 1)[1:] / len(runs)
  np.testing.assert_allclose(frequencies, expected, atol=0.05)
  # max_ngram 1: single characters; a longer run is only two neighbours chosen by chance.
  _, _, single = _mask(ids, rate=0.01, max_ngram=1)
  assert np.mean(_run_lengths(np.asarray(single) > 0) > 1) < 0.02


def test_deterministic_in_seed_and_step():
  ids = _batch()
  a, b = _mask(ids, rng=5), _mask(ids, rng=5)
  c = _mask(ids, rng=6)
  np.testing.assert_array_equal(a[0], b[0])
  assert (np.asarray(a[0]) != np.asarray(c[0])).any()


def test_prediction_positions_keep_selected_tokens_first():
  weights = jnp.asarray([[0, 1, 0, 1, 1, 0], [0, 0, 0, 0, 0, 1]], jnp.float32)
  positions, w = mlm.prediction_positions(weights, 3)
  np.testing.assert_array_equal(positions[0], [1, 3, 4])
  np.testing.assert_array_equal(w[1], [1, 0, 0])
  assert positions[1, 0] == 5


def test_loss_sums_match_a_direct_computation():
  logits = jax.random.normal(jax.random.key(0), (2, 5, 7))
  targets = jnp.asarray([[1, 2, 3, 4, 5], [0, 1, 2, 3, 6]])
  weights = jnp.asarray([[1, 0, 1, 0, 0], [0, 0, 0, 1, 1]], jnp.float32)
  sums = mlm.loss_sums(logits, targets, weights)
  log_probs = np.asarray(jax.nn.log_softmax(logits))
  expected = -sum(log_probs[b, t, targets[b, t]] for b, t in [(0, 0), (0, 2), (1, 3), (1, 4)])
  np.testing.assert_allclose(sums["loss_sum"], expected, rtol=1e-6)
  assert sums["weight"] == 4

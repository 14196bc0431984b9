"""Masked-language-model objective: n-gram span masking with 80/10/10 replacement, and loss.

Masking runs inside the jitted step on the global batch, from fold_in(seed, step): it is
deterministic in (seed, step) and independent of how the batch is sharded or loaded.
"""

import jax
import jax.numpy as jnp
import numpy as np


def ngram_probabilities(max_ngram: int, distribution: str) -> np.ndarray:
  """P(span length = n) for n = 1..max_ngram.

  'harmonic' ∝ 1/n (DeBERTa's n-gram masking), 'uniform', or 'geometric:p' ∝ p(1-p)^(n-1)
  truncated (SpanBERT). max_ngram=1 is plain per-character masking.
  """
  n = np.arange(1, max_ngram + 1, dtype=np.float64)
  if distribution == "harmonic":
    weights = 1 / n
  elif distribution == "uniform":
    weights = np.ones_like(n)
  elif distribution.startswith("geometric:"):
    p = float(distribution.split(":", 1)[1])
    weights = p * (1 - p) ** (n - 1)
  else:
    raise ValueError(f"unknown n-gram distribution {distribution!r}: harmonic, uniform or geometric:p")
  return weights / weights.sum()


def span_start_probability(rate: float, probs: np.ndarray) -> float:
  """q such that a position is covered by some span with probability `rate`.

  A position is missed by every span iff no span starting k before it is longer than k:
  1 - rate = Π_k (1 - q · P(length > k)). Solved by bisection.
  """
  survival = np.cumsum(probs[::-1])[::-1]  # P(length >= k + 1)
  lo, hi = 0.0, 1.0
  for _ in range(60):
    q = (lo + hi) / 2
    covered = 1 - np.prod(1 - q * survival)
    lo, hi = (q, hi) if covered < rate else (lo, q)
  return (lo + hi) / 2


def mask_tokens(
  rng,
  ids,
  *,
  mask_id: int,
  vocab_size: int,
  special_ids,
  rate: float = 0.15,
  max_ngram: int = 1,
  ngram_distribution: str = "harmonic",
  mask_prob: float = 0.8,
  random_prob: float = 0.1,
):
  """Returns (inputs, targets, weights) for a [batch, length] int array.

  Spans of 1..max_ngram tokens are selected until ~`rate` of the maskable tokens (all but
  the special tokens) are covered; each selected token becomes [MASK] (mask_prob), a random
  non-special token (random_prob) or stays. weights is 1 on selected tokens.
  """
  probs = ngram_probabilities(max_ngram, ngram_distribution)
  start_prob = span_start_probability(rate, probs)
  k_start, k_length, k_action, k_random = jax.random.split(rng, 4)
  shape = ids.shape
  maskable = ~jnp.isin(ids, jnp.asarray(special_ids))
  starts = (jax.random.uniform(k_start, shape) < start_prob) & maskable
  lengths = jax.random.choice(k_length, max_ngram, shape, p=jnp.asarray(probs, jnp.float32)) + 1
  positions = jnp.arange(shape[-1])
  span_ends = jnp.where(starts, positions + lengths, 0)
  covered = jax.lax.cummax(span_ends, axis=span_ends.ndim - 1) > positions
  selected = covered & maskable
  action = jax.random.uniform(k_action, shape)
  num_special = int(max(special_ids)) + 1
  random_tokens = jax.random.randint(k_random, shape, num_special, vocab_size)
  inputs = jnp.where(selected & (action < mask_prob), mask_id, ids)
  inputs = jnp.where(selected & (action >= mask_prob) & (action < mask_prob + random_prob), random_tokens, inputs)
  return inputs, ids, selected.astype(jnp.float32)


def max_predictions(length: int, rate: float) -> int:
  """Scored positions per sequence: 1.5× the expected masked count (BERT's max_predictions_per_seq).

  Masked tokens beyond it stay masked but are not scored.
  """
  return min(length, int(np.ceil(1.5 * rate * length)))


def prediction_positions(weights, k: int):
  """The first k selected positions of each row and their weights (0 where fewer exist)."""
  order = jnp.argsort(weights <= 0, axis=-1, stable=True)[..., :k]
  return order, jnp.take_along_axis(weights, order, axis=-1)


def loss_sums(logits, targets, weights) -> dict:
  """Summed (not averaged) cross-entropy and correct predictions over weighted positions.

  Micro-batches and devices sum them before dividing.
  """
  logits = logits.astype(jnp.float32)
  # The target's logit picked by comparing with the vocabulary's iota: its gradient is a one-hot
  # fused with the softmax's, where take_along_axis's is a scatter-add into a [batch, k, vocab]
  # array of zeros.
  is_target = jnp.arange(logits.shape[-1]) == targets[..., None]
  nll = jax.nn.logsumexp(logits, axis=-1) - jnp.sum(jnp.where(is_target, logits, 0.0), axis=-1)
  correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
  return {"loss_sum": jnp.sum(nll * weights), "correct": jnp.sum(correct * weights), "weight": jnp.sum(weights)}


def unigram_entropy(batches, tokenizer) -> float:
  """Entropy (nats) of the evaluation batches' own token distribution: the floor a useful MLM must beat.

  It is the loss of the best predictor that ignores context.
  """
  ids = np.concatenate([b.ravel() for b in batches])
  ids = ids[~np.isin(ids, [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id])]
  p = np.bincount(ids) / len(ids)
  p = p[p > 0]
  return float(-(p * np.log(p)).sum())

"""Heads on top of the encoder: XuCi's span pair ([u; v; |u − v|] · W over mean span vectors)
and CCPM's Match (cosine of mean-pooled vectors)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import CosineMatch, EncoderConfig, SpanPairClassifier, encoder_class

CONFIG = EncoderConfig(
  vocab_size=50,
  hidden_size=16,
  num_hidden_layers=1,
  num_attention_heads=2,
  intermediate_size=32,
  relative_attention=True,
  position_buckets=8,
  pos_att_type="p2c|c2p",
  position_biased_input=False,
)


def test_span_pair_logits_from_mean_span_vectors():
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 50, size=(3, 2, 10)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, 1, 7:] = 0  # the second sentence is padded
  span = np.zeros((3, 2, 10), np.float32)
  span[:, 0, 2] = 1  # a one-character word
  span[:, 1, 3:5] = 1  # a two-character word (所以)
  head = SpanPairClassifier(CONFIG)
  params = nn.unbox(head.init(jax.random.key(0), ids, mask, span_mask=span)["params"])
  logits = head.apply({"params": params}, ids, mask, span_mask=span)

  hidden = encoder_class(CONFIG)(CONFIG).apply({"params": params["encoder"]}, ids.reshape(6, 10), mask.reshape(6, 10))
  hidden = np.asarray(hidden).reshape(3, 2, 10, 16)
  u, v = hidden[:, 0, 2], hidden[:, 1, 3:5].mean(axis=1)
  kernel = np.asarray(params["classifier"]["kernel"])
  assert "bias" not in params["classifier"]
  np.testing.assert_allclose(logits, np.concatenate([u, v, np.abs(u - v)], -1) @ kernel, atol=1e-5)
  assert logits.shape == (3, 2) and jnp.isfinite(logits).all()


def test_cosine_match_scores_mean_pooled_cosines_and_ignores_padding():
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 50, size=(2, 5, 12)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, 2, 6:] = 0  # a short candidate, padded
  head = CosineMatch(CONFIG)
  params = nn.unbox(head.init(jax.random.key(0), ids, mask)["params"])
  scores = np.asarray(head.apply({"params": params}, ids, mask))

  hidden = np.asarray(
    encoder_class(CONFIG)(CONFIG).apply({"params": params["encoder"]}, ids.reshape(10, 12), mask.reshape(10, 12))
  ).reshape(2, 5, 12, 16)
  pooled = (hidden * mask[..., None]).sum(2) / mask.sum(-1, keepdims=True)
  unit = pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)
  np.testing.assert_allclose(scores, 20.0 * np.einsum("bd,bkd->bk", unit[:, 0], unit[:, 1:]), atol=1e-4)
  # More padding after a row changes nothing.
  wider_ids, wider_mask = np.pad(ids, ((0, 0), (0, 0), (0, 4))), np.pad(mask, ((0, 0), (0, 0), (0, 4)))
  np.testing.assert_allclose(head.apply({"params": params}, wider_ids, wider_mask), scores, atol=1e-4)

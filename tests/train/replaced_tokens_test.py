"""Replaced-token detection's building blocks on tiny models: the pair's params, labels, sums, metrics, configs."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wyjax.core import guards
from wyjax.models import EncoderConfig, ReplacedTokenDetector, rtd_pair
from wyjax.train import config_values, continuing, mlm, pretraining_config
from wyjax.train import replaced_tokens as rt

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
VOCAB, LENGTH, RATE = 40, 12, 0.3
K = mlm.max_predictions(LENGTH, RATE)
BERT = EncoderConfig(
  vocab_size=VOCAB,
  model_type="bert",
  hidden_size=16,
  num_hidden_layers=2,
  num_attention_heads=2,
  intermediate_size=32,
  max_position_embeddings=LENGTH,
  attention="xla",
)
DEBERTA = BERT.replace(
  model_type="deberta-v2",
  relative_attention=True,
  position_buckets=4,
  pos_att_type="p2c|c2p",
  share_att_key=True,
  position_biased_input=False,
)


def _rtd(**changes):
  config = rt.defaults()
  config.update(changes)
  return config


def _batch(rows=4, seed=0):
  """(inputs, targets, weights, attention_mask): masked rows, two of them ending in padding."""
  ids = np.random.default_rng(seed).integers(5, VOCAB, (rows, LENGTH))
  ids[:, 0], ids[:, -1] = CLS, SEP
  ids[: rows // 2, -4:] = PAD
  ids = jnp.asarray(ids)
  inputs, targets, weights = mlm.mask_tokens(
    jax.random.key(seed), ids, mask_id=MASK, vocab_size=VOCAB, special_ids=(PAD, UNK, CLS, SEP, MASK), rate=RATE
  )
  return inputs, targets, weights, (ids != PAD).astype(jnp.int32)


def _pair(sharing="gdes", config=BERT, **changes):
  rtd_config = _rtd(embedding_sharing=sharing, **changes)
  params = nn.unbox(rt.init_params(jax.random.key(1), config, rtd_config))
  return (*rt.models(config, rtd_config), params)


def _sums(generator, discriminator, params, batch, sharing="gdes"):
  return rt.loss_sums(generator, discriminator, params, *batch, jax.random.key(2), k=K, sharing=sharing)


class _Always:
  """A stand-in generator: all mass on the original token (shift 0) or on another non-special one."""

  def __init__(self, targets, shift):
    self.targets, self.shift = targets, shift

  def apply(self, variables, inputs, attention_mask, *, predict_positions, **kwargs):
    originals = jnp.take_along_axis(self.targets, predict_positions, axis=-1)
    choice = jnp.where(self.shift == 0, originals, 5 + (originals - 5 + self.shift) % (VOCAB - 5))
    return 1e4 * jax.nn.one_hot(choice, VOCAB)


class _Recorder:
  """A stand-in discriminator that keeps the ids it is given and answers 0 (not sure) everywhere."""

  def apply(self, variables, input_ids, attention_mask, **kwargs):
    self.input_ids = input_ids
    return jnp.zeros(input_ids.shape, jnp.float32)


def _nonzero(tree):
  return any(bool(jnp.any(x != 0)) for x in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("sharing", rtd_pair.SHARINGS)
def test_the_discriminators_gradient_reaches_the_tables_its_sharing_says(sharing):
  generator, discriminator, params = _pair(sharing)
  batch = _batch()
  grads = jax.grad(lambda p: _sums(generator, discriminator, p, batch, sharing)["discriminator_loss_sum"])(params)
  table_grad = rtd_pair.get(grads["generator"], rtd_pair.TABLE)
  others = rtd_pair.with_leaf(grads["generator"], rtd_pair.TABLE, None)
  assert not _nonzero(others), "no gradient through the sampling"
  if sharing == "shared":
    assert _nonzero(table_grad)
  else:
    np.testing.assert_array_equal(table_grad, 0.0)
  if sharing == "gdes":
    assert set(params) == {"generator", "discriminator", "embedding_delta"}
    np.testing.assert_array_equal(params["embedding_delta"], 0.0)
    assert _nonzero(grads["embedding_delta"])
  if sharing == "separate":
    assert _nonzero(rtd_pair.get(grads["discriminator"], rtd_pair.TABLE))
  else:
    with pytest.raises(KeyError):  # no duplicate of the generator's table
      rtd_pair.get(params["discriminator"], rtd_pair.TABLE)


@pytest.mark.parametrize("shift", [0, 3])
def test_a_sample_equal_to_the_original_is_original(shift):
  _, _, params = _pair()
  inputs, targets, weights, attention_mask = batch = _batch()
  recorder = _Recorder()
  sums = _sums(_Always(targets, shift), recorder, params, batch)
  assert sums["generator_weight"] > 0
  if shift == 0:
    np.testing.assert_array_equal(recorder.input_ids, targets)
    assert sums["replaced"] == 0
  else:  # the same masked positions, sampled to another token: every one replaced
    assert sums["replaced"] == sums["generator_weight"]
    positions, scored = mlm.prediction_positions(weights, K)
    replaced = jnp.zeros_like(targets).at[jnp.arange(4)[:, None], positions].set(scored.astype(targets.dtype))
    np.testing.assert_array_equal(recorder.input_ids != targets, replaced > 0)
  np.testing.assert_allclose(sums["discriminator_loss_sum"], np.log(2) * attention_mask.sum(), rtol=1e-6)
  assert sums["tokens"] == attention_mask.sum()


def test_the_discriminators_sums_are_binary_cross_entropy_over_tokens():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 7)).astype(np.float32) * 3
  labels = rng.integers(0, 2, (3, 7))
  mask = np.ones((3, 7))
  mask[1, 4:] = 0
  sums = rt.detection_sums(jnp.asarray(logits), jnp.asarray(labels), jnp.asarray(mask))
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))
  bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
  np.testing.assert_allclose(sums["discriminator_loss_sum"], (bce * mask).sum(), rtol=1e-5)
  np.testing.assert_allclose(sums["discriminator_correct"], (((logits > 0) == labels) * mask).sum())
  assert sums["tokens"] == mask.sum()
  padded = logits.copy()
  padded[1, 4:] = -50.0 * (2 * labels[1, 4:] - 1)  # confidently wrong, but padding
  padded_sums = rt.detection_sums(jnp.asarray(padded), jnp.asarray(labels), jnp.asarray(mask))
  for name, value in sums.items():
    np.testing.assert_allclose(padded_sums[name], value, rtol=1e-6, err_msg=name)


def test_metrics_on_a_hand_made_case():
  logits = jnp.asarray([[2.0, -1.0, 3.0, 2.0, 1.0, 9.0]])
  labels = jnp.asarray([[1, 1, 0, 0, 1, 1]])
  mask = jnp.asarray([[1, 1, 1, 1, 1, 0]])  # the last is padding
  sums = rt.detection_sums(logits, labels, mask)
  sums.update(generator_loss_sum=6.0, generator_correct=3.0, generator_weight=4.0)
  m = rt.metrics(sums)
  expected = dict(
    generator_loss=1.5,
    generator_accuracy=0.75,
    discriminator_accuracy=2 / 5,  # right on 0 and 4
    discriminator_precision=2 / 4,  # 0 and 4 of the four predicted (0, 2, 3, 4)
    discriminator_recall=2 / 3,  # 0 and 4 of the three replaced (0, 1, 4)
    replaced_fraction=3 / 4,
  )
  for name, value in expected.items():
    np.testing.assert_allclose(m[name], value, rtol=1e-6, err_msg=name)
  np.testing.assert_allclose(m["discriminator_loss"], sums["discriminator_loss_sum"] / 5, rtol=1e-6)
  np.testing.assert_allclose(rt.total_loss(sums, 50.0), 1.5 + 50.0 * m["discriminator_loss"], rtol=1e-6)


def test_the_merged_discriminator_is_the_view():
  _, _, params = _pair("gdes")
  params["embedding_delta"] = 0.1 * jax.random.normal(jax.random.key(3), params["embedding_delta"].shape)
  merged = rtd_pair.merged_discriminator(params, "gdes")
  view = rtd_pair.discriminator_view(params, "gdes")
  table = rtd_pair.get(params["generator"], rtd_pair.TABLE) + params["embedding_delta"]
  np.testing.assert_array_equal(rtd_pair.get(merged, rtd_pair.TABLE), table)
  np.testing.assert_array_equal(rtd_pair.get(view, rtd_pair.TABLE), table)
  inputs, _, _, attention_mask = _batch()
  model = ReplacedTokenDetector(BERT)
  np.testing.assert_array_equal(
    model.apply({"params": merged}, inputs, attention_mask), model.apply({"params": view}, inputs, attention_mask)
  )
  host = jax.tree_util.tree_map(np.asarray, params)  # a checkpoint read on the host merges the same
  np.testing.assert_allclose(rtd_pair.get(rtd_pair.merged_discriminator(host, "gdes"), rtd_pair.TABLE), table)


def test_generator_config():
  base = EncoderConfig(vocab_size=100, model_type="bert")
  same = rtd_pair.generator_config(base, rt.defaults())
  assert same == base.replace(num_hidden_layers=6)
  narrow = rtd_pair.generator_config(base, _rtd(generator_layers=3, generator_hidden_size=256))
  assert (narrow.num_hidden_layers, narrow.hidden_size, narrow.num_attention_heads) == (3, 256, 4)
  assert (narrow.intermediate_size, narrow.embed_dim, narrow.vocab_size) == (1024, 768, 100)
  assert (
    rtd_pair.generator_config(base, _rtd(generator_hidden_size=200)).num_attention_heads == 2
  )  # 3 does not divide 200
  electra = base.replace(model_type="electra", embedding_size=128, hidden_size=256, num_attention_heads=4)
  assert rtd_pair.generator_config(electra, _rtd(generator_hidden_size=128)).embedding_size is None


def test_the_config_is_checked_and_the_frozen_stage_trains_each_models_embeddings_and_heads():
  config = pretraining_config.base_config()
  config.rtd.embedding_sharing = "tied"
  with pytest.raises(ValueError, match="rtd.embedding_sharing"):
    config_values.check(config, config_values.PRETRAINING)
  trained = [
    ("generator", "encoder", "embeddings", "word_embeddings", "embedding"),
    ("generator", "mlm_head", "bias"),
    ("discriminator", "encoder", "embeddings", "norm", "scale"),
    ("discriminator", "rtd_head", "dense", "kernel"),
    ("embedding_delta",),
  ]
  frozen = [("generator", "encoder", "layer_0", "attention"), ("discriminator", "encoder", "layers", "mlp")]
  assert [continuing.trains_first(path) for path in trained + frozen] == [True] * 5 + [False] * 2


def test_sums_add_across_micro_batches():
  # A DeBERTa discriminator with a narrower generator (through its embedding projection), whose bias puts
  # all mass on one token: sampling is then the same however the batch is split.
  generator, discriminator, params = _pair("gdes", DEBERTA, generator_hidden_size=8)
  assert generator.config.embedding_size == 16
  params["generator"]["mlm_head"]["bias"] = params["generator"]["mlm_head"]["bias"].at[7].set(50.0)
  batch = _batch(rows=6)
  sums = jax.jit(lambda params, batch: _sums(generator, discriminator, params, batch))
  whole = sums(params, batch)
  halves = [sums(params, [x[i : i + 3] for x in batch]) for i in (0, 3)]
  assert whole["replaced"] > 0
  assert set(whole) == set(rt.SUMS)
  for name in rt.SUMS:
    np.testing.assert_allclose(halves[0][name] + halves[1][name], whole[name], rtol=1e-5, err_msg=name)
  denominators = rt.denominators(batch[2], batch[3], K)
  parts = sum(rt.total_loss(h, 50.0, denominators) for h in halves)
  np.testing.assert_allclose(parts, rt.total_loss(whole, 50.0), rtol=1e-5)


@pytest.mark.parametrize("scan_layers", [False, True])
def test_from_checkpoint_round_trips_through_the_merge(scan_layers):
  config = BERT.replace(scan_layers=scan_layers)
  rtd_config = _rtd(generator_layers=1)
  fresh = nn.unbox(rt.init_params(jax.random.key(4), config, rtd_config))
  checkpoint = nn.unbox(ReplacedTokenDetector(config).init(jax.random.key(5), jnp.zeros((1, 4), jnp.int32))["params"])
  pair = rt.from_checkpoint(checkpoint, fresh, config, rtd_config)
  shapes = lambda tree: jax.tree_util.tree_map(jnp.shape, tree)
  assert shapes(pair) == shapes(fresh)
  merged = rtd_pair.merged_discriminator(pair, "gdes")
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), merged, checkpoint))
  encoder, source = pair["generator"]["encoder"], checkpoint["encoder"]
  first = (lambda x: x[0]) if scan_layers else (lambda x: x)
  layer = (lambda e: e["layers"]) if scan_layers else (lambda e: e["layer_0"])
  np.testing.assert_array_equal(
    first(jax.tree_util.tree_leaves(layer(encoder))[0]), first(jax.tree_util.tree_leaves(layer(source))[0])
  )
  assert rtd_pair.generator_of(pair, config) == (rtd_pair.generator_config(config, rtd_config), pair["generator"])
  head = jax.tree_util.tree_map(lambda x: x + 1.0, fresh["generator"]["mlm_head"])  # an MLM checkpoint's head
  assert (
    rt.from_checkpoint({**checkpoint, "mlm_head": head}, fresh, config, rtd_config)["generator"]["mlm_head"] is head
  )
  with pytest.raises(guards.RunError, match="config.rtd.generator_hidden_size"):
    rt.from_checkpoint(checkpoint, fresh, config, _rtd(generator_hidden_size=8))
  with pytest.raises(guards.RunError, match="config.rtd.generator_layers"):
    rt.from_checkpoint(checkpoint, fresh, config, _rtd(generator_layers=3))


def test_samples_follow_the_generators_distribution():
  probabilities = np.array([0.0, 0.2, 0.5, 0.3, 0.0])
  logits = jnp.log(jnp.asarray(probabilities) + 1e-30)
  samples = rt.sample(jax.random.key(0), jnp.broadcast_to(logits, (20_000, 5)))
  frequencies = np.bincount(np.asarray(samples), minlength=5) / 20_000
  np.testing.assert_allclose(frequencies, probabilities, atol=0.015)  # ~4.5 standard errors of the largest

"""The prefix LM's cached decoding against the full forward pass on the training layout."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.hf.tiny_models import DEBERTA_LAYOUTS, TINY
from wyjax.data.tokenizer import SPECIAL_TOKENS, Tokenizer
from wyjax.hf import init_params
from wyjax.hf.configs import from_hf
from wyjax.models import MaskedLM, prefix_lm

VOCAB = list(SPECIAL_TOKENS) + [chr(0x4E00 + i) for i in range(TINY["vocab_size"] - len(SPECIAL_TOKENS))]
TOKENIZER = Tokenizer(VOCAB)
# Larger weights than the default init: peaked logits, so argmax ties cannot blur a comparison.
LAYOUTS = {name: dict(model_type="deberta-v2", **layout) for name, layout in DEBERTA_LAYOUTS.items()}
LAYOUTS["bert"] = dict(model_type="bert", type_vocab_size=2)
LAYOUTS["roberta"] = dict(
  model_type="roberta", type_vocab_size=1, pad_token_id=TOKENIZER.pad_id, max_position_embeddings=66
)


def _model(layout: str, attention: str = "auto"):
  hf = {**TINY, **LAYOUTS[layout], "initializer_range": 0.3, "pad_token_id": TOKENIZER.pad_id}
  config = from_hf(hf)
  return MaskedLM(config.replace(attention=attention)), init_params(config, jax.random.key(0))


def _training_logits(model, params, source, target):
  """Full-forward logits over [CLS] source [SEP] target, as fine-tuning lays it out."""
  ids = np.concatenate([[TOKENIZER.cls_id], source, [TOKENIZER.sep_id], target]).astype(np.int32)
  types = np.concatenate([np.zeros(len(source) + 2, np.int32), np.ones(len(target), np.int32)])
  ids, types = jnp.asarray(ids[None]), jnp.asarray(types[None])
  return model.apply({"params": params}, ids, prefix_lm.attention_mask(types, ids != TOKENIZER.pad_id), types)[0]


def _prefix(sources, length):
  block = np.full((len(sources), length), TOKENIZER.pad_id, np.int32)
  for row, source in enumerate(sources):
    block[row, length - len(source) - 2 :] = [TOKENIZER.cls_id, *source, TOKENIZER.sep_id]
  return jnp.asarray(block)


def test_attention_mask_is_the_unilm_mask():
  types = jnp.array([[0, 0, 0, 1, 1, 1, 0]])
  padding = jnp.array([[1, 1, 1, 1, 1, 1, 0]])
  mask = np.asarray(prefix_lm.attention_mask(types, padding)[0])
  for i, j in itertools.product(range(6), range(7)):
    expected = j < 6 and (j < 3 or (i >= 3 and j <= i))
    assert mask[i, j] == expected, (i, j)


@pytest.mark.parametrize("layout,attention", [(layout, "auto") for layout in sorted(LAYOUTS)] + [("bozhou", "pallas")])
def test_each_cached_step_equals_the_full_forward_pass(layout, attention):
  """Sources of different lengths share one left-padded block; every step's logits equal the
  training layout's full forward pass at that position within 1e-5. With attention="pallas" the
  full pass runs the fused kernel on the UniLM mask, the cached steps the XLA path."""
  model, params = _model(layout, attention)
  rng = np.random.default_rng(0)
  sources = [rng.integers(5, len(VOCAB), n) for n in (3, 9, 14)]
  targets = rng.integers(5, len(VOCAB), (3, 8)).astype(np.int32)
  # One pass per row: under the prefix mask a position's logits do not depend on later targets.
  expected = [_training_logits(model, params, s, t)[len(s) + 1 :] for s, t in zip(sources, targets)]
  logits, state = prefix_lm.encode_prefix(model, params, _prefix(sources, 20), 8)
  step = jax.jit(lambda state, token, slot: prefix_lm.decode_step(model, params, state, token, slot, 20))
  for t in range(targets.shape[1] + 1):
    for row in range(len(sources)):
      np.testing.assert_allclose(
        logits[row], expected[row][t], atol=1e-5, rtol=0, err_msg=f"{layout} step {t} row {row}"
      )
    if t < targets.shape[1]:
      logits, state = step(state, jnp.asarray(targets[:, t]), 20 + t)


@pytest.mark.parametrize(
  "layout,beam_size", [("bozhou", 1), ("bozhou", 3), ("separate_keys", 1), ("c2p_only", 3), ("bert", 3), ("roberta", 1)]
)
def test_cached_decoding_yields_the_tokens_of_uncached_decoding(layout, beam_size):
  model, params = _model(layout)
  rng = np.random.default_rng(1)
  prefix = _prefix([rng.integers(5, len(VOCAB), n) for n in (2, 7, 11, 16)], 18)
  limits = jnp.array([5, 12, 20, 3], jnp.int32)
  kwargs = dict(max_new=20, sep_id=TOKENIZER.sep_id, banned_ids=(0, 1, 2, 4), beam_size=beam_size)
  cached = np.asarray(prefix_lm.generate(model, params, prefix, limits, **kwargs))
  uncached = np.asarray(prefix_lm.generate(model, params, prefix, limits, use_cache=False, **kwargs))
  np.testing.assert_array_equal(cached, uncached)
  for row, limit in enumerate(np.asarray(limits)):
    sep = np.flatnonzero(cached[row] == TOKENIZER.sep_id)
    assert len(sep) and 0 < sep[0] < limit, (row, cached[row])  # not empty, ended within its limit
    assert (cached[row, sep[0] + 1 :] == TOKENIZER.pad_id).all()
    assert not np.isin(cached[row, : sep[0]], (0, 1, 2, 4)).any()


def test_beam_search_finds_the_best_hypothesis_by_exhaustive_search():
  """With a 6-token vocabulary (5 characters and [SEP]) and at most 3 tokens, a beam as wide as
  every live hypothesis is exact: it returns the argmax of log p / ((5 + n) / 6) ** alpha over
  all 30 possible outputs (1 or 2 characters, then [SEP]), scored by full forward passes."""
  vocab = list(SPECIAL_TOKENS) + list("之乎者也矣")
  # Small weights: flat distributions, where the length penalty decides between lengths.
  hf = {**TINY, **LAYOUTS["bozhou"], "vocab_size": len(vocab), "initializer_range": 0.08}
  model = MaskedLM(from_hf(hf))
  params = init_params(model.config, jax.random.key(3))
  banned = tuple(i for i in range(len(SPECIAL_TOKENS)) if i != TOKENIZER.sep_id)
  content = [i for i in range(len(vocab)) if i >= len(SPECIAL_TOKENS)]
  outputs = [list(body) + [TOKENIZER.sep_id] for n in (1, 2) for body in itertools.product(content, repeat=n)]
  for source in ([5, 6], [9, 8, 7, 5]):
    # Each output's tokens scored in one batched pass: bodies padded to two tokens, which later
    # positions cannot influence under the prefix mask.
    ids = np.array([[TOKENIZER.cls_id, *source, TOKENIZER.sep_id, *(o[:-1] + [5, 5])[:2]] for o in outputs])
    types = (np.arange(ids.shape[1]) >= len(source) + 2).astype(np.int32)[None].repeat(len(ids), 0)
    logits = model.apply({"params": params}, ids, prefix_lm.attention_mask(types, ids != TOKENIZER.pad_id), types)
    logits = logits.at[..., jnp.asarray(banned)].set(-jnp.inf)[:, len(source) + 1 :]
    logits = logits.at[:, 0, TOKENIZER.sep_id].set(-jnp.inf)  # never an empty translation
    log_probs = jax.nn.log_softmax(logits)
    # The third token is forced to be [SEP] (the limit): probability 1.
    totals = [sum(float(log_probs[k, i, token]) for i, token in enumerate(o) if i < 2) for k, o in enumerate(outputs)]
    bests = set()
    for alpha in (0.0, 1.0, -3.0, -8.0):
      scores = [total / ((5 + len(o)) / 6) ** alpha for total, o in zip(totals, outputs)]
      best = outputs[int(np.argmax(scores))]
      found = np.asarray(
        prefix_lm.generate(
          model,
          params,
          _prefix([source], 6),
          jnp.array([3]),
          max_new=3,
          sep_id=TOKENIZER.sep_id,
          banned_ids=banned,
          beam_size=25,
          length_penalty=alpha,
        )
      )[0]
      assert list(found[: len(best)]) == best, (alpha, source, found, best)
      bests.add(tuple(best))
    assert len(bests) > 1  # the penalty changed the winner


def test_translate_is_independent_of_batching_and_respects_limits():
  model, params = _model("bozhou")
  rng = np.random.default_rng(2)
  sources = [rng.integers(5, len(VOCAB), n).astype(np.int32) for n in (4, 30, 1, 12, 7)]
  together = prefix_lm.translate(model, params, TOKENIZER, sources, max_length=64, batch_size=4, beam_size=2)
  alone = [
    prefix_lm.translate(model, params, TOKENIZER, [s], max_length=64, batch_size=1, beam_size=2)[0] for s in sources
  ]
  for a, b in zip(together, alone):
    np.testing.assert_array_equal(a, b)
  short = prefix_lm.translate(model, params, TOKENIZER, sources, max_length=64, max_ratio=0.5, max_extra=1)
  for source, target in zip(sources, short):
    assert len(target) < int(np.ceil(0.5 * len(source))) + 1
  capped = prefix_lm.translate(model, params, TOKENIZER, sources, max_length=40, max_ratio=4, max_extra=0)
  assert all(len(s) + len(t) + 3 <= 40 for s, t in zip(sources, capped))
  with pytest.raises(ValueError, match=r"sources \[1\] leave no room"):
    prefix_lm.translate(model, params, TOKENIZER, sources, max_length=32)

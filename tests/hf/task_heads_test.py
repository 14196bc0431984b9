"""Task heads against transformers' *ForSequenceClassification / ForTokenClassification /
ForMultipleChoice, weights converted from the PyTorch model."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from tests.hf import tiny_models
from wyjax.hf import configs, weights
from wyjax.models import MultipleChoice, SequenceClassifier, TokenClassifier


def _hf(family: str, head: str, num_labels: int):
  torch.manual_seed(0)
  if family == "deberta":
    config = transformers.DebertaV2Config(
      **tiny_models.TINY, **tiny_models.DEBERTA_LAYOUTS["bozhou"], num_labels=num_labels
    )
  else:
    config = transformers.BertConfig(**tiny_models.TINY, type_vocab_size=2, num_labels=num_labels)
  model = getattr(transformers, f"AutoModelFor{head}").from_config(config)
  return tiny_models._randomize(model.eval(), 0)


def _convert(hf_model, module, dummy):
  config = configs.from_hf(hf_model.config.to_dict())
  shapes = jax.tree_util.tree_map(
    lambda s: s.shape, nn.unbox(jax.eval_shape(module(config).init, jax.random.key(0), dummy)["params"])
  )
  state_dict = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  params, unused = weights.from_hf(state_dict, config, shapes)
  return config, params, unused


@pytest.mark.parametrize("family", ["deberta", "bert"])
def test_sequence_classification(family):
  hf_model = _hf(family, "SequenceClassification", 3)
  ids, mask = tiny_models.padded_batch(97)
  config, params, unused = _convert(hf_model, lambda c: SequenceClassifier(c, 3), jnp.zeros((1, 8), jnp.int32))
  assert unused == []
  ours = SequenceClassifier(config, 3).apply({"params": params}, ids, mask)
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
  np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("family", ["deberta", "bert"])
def test_token_classification(family):
  hf_model = _hf(family, "TokenClassification", 5)
  ids, mask = tiny_models.padded_batch(97)
  config, params, unused = _convert(hf_model, lambda c: TokenClassifier(c, 5), jnp.zeros((1, 8), jnp.int32))
  assert unused == []
  ours = np.asarray(TokenClassifier(config, 5).apply({"params": params}, ids, mask))
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
  real = mask.astype(bool)
  np.testing.assert_allclose(ours[real], theirs[real], atol=1e-5)


@pytest.mark.parametrize("family", ["deberta", "bert"])
def test_multiple_choice(family):
  hf_model = _hf(family, "MultipleChoice", 2)
  ids, mask = tiny_models.padded_batch(97, lengths=(23, 40, 9, 31))
  ids, mask = ids.reshape(2, 2, -1), mask.reshape(2, 2, -1)
  config = configs.from_hf(hf_model.config.to_dict())
  scorer_shapes = jax.tree_util.tree_map(
    lambda s: s.shape,
    nn.unbox(
      jax.eval_shape(SequenceClassifier(config, 1).init, jax.random.key(0), jnp.zeros((1, 8), jnp.int32))["params"]
    ),
  )
  state_dict = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  params, unused = weights.from_hf(state_dict, config, scorer_shapes)
  assert unused == []
  ours = MultipleChoice(config).apply({"params": {"scorer": params}}, ids, mask)
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
  np.testing.assert_allclose(ours, theirs, atol=1e-5)

"""ELECTRA discriminators: transformers folder → wyjax (logits and hidden states) → ElectraForPreTraining folder."""

import flax.linen as nn
import jax
import numpy as np
import pytest
import torch
import transformers

import wyjax.hf
from tests.hf import tiny_models
from wyjax.data.tokenizer import SPECIAL_TOKENS, Tokenizer
from wyjax.hf import configs, export_folder, loading, weights
from wyjax.models import EncoderConfig, ReplacedTokenDetector, SequenceClassifier, TokenClassifier

REL_TOL = 1e-4  # issue 83's parity target


def _inputs(vocab_size):
  ids, mask = tiny_models.padded_batch(vocab_size)
  types = np.broadcast_to((np.arange(ids.shape[1]) >= 12).astype(np.int64), ids.shape) * mask
  return ids, mask, types


def _assert_close(theirs, ours, mask, what):
  """Relative error (max |diff| over the largest |value|) on non-pad positions."""
  real = mask.astype(bool)
  error = np.abs(theirs[real] - ours[real]).max() / np.abs(theirs[real]).max()
  assert error <= REL_TOL, f"{what}: relative error {error:.2e} on non-pad positions"


def _torch(model, ids, mask, types):
  with torch.no_grad():
    return model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), token_type_ids=torch.tensor(types))


def _with_tokenizer(model: loading.Model) -> loading.Model:
  """The model with a tokenizer of its vocabulary's size, which an export ships."""
  vocab = list(SPECIAL_TOKENS) + [chr(0x4E00 + i) for i in range(model.config.vocab_size - len(SPECIAL_TOKENS))]
  return loading.Model(model.config, model.params, Tokenizer(vocab))


@pytest.mark.parametrize("embedding_size", [24, 32])  # projected to hidden_size 32, or not
def test_discriminator_folder_matches_transformers(embedding_size, tmp_path):
  discriminator = tiny_models.electra_discriminator(embedding_size)
  discriminator.save_pretrained(tmp_path)
  model = wyjax.hf.load(tmp_path)
  assert model.config.model_type == "electra" and model.has_rtd and not model.has_mlm
  assert model.config.embed_dim == embedding_size
  assert ("embeddings_project" in model.params["encoder"]) == (embedding_size != 32)
  ids, mask, types = _inputs(model.config.vocab_size)
  _assert_close(
    _torch(discriminator, ids, mask, types).logits.numpy(), model.rtd_logits(ids, mask, types), mask, "logits"
  )
  base = transformers.ElectraModel.from_pretrained(tmp_path).eval()
  hidden = _torch(base, ids, mask, types).last_hidden_state.numpy()
  _assert_close(hidden, model.encode(ids, mask, types), mask, "last hidden state")


def test_electra_model_folder_without_head_loads(tmp_path):
  base = tiny_models.electra_discriminator().electra
  base.save_pretrained(tmp_path)
  model = wyjax.hf.load(tmp_path)
  assert not model.has_rtd and sorted(model.params) == ["encoder"]
  ids, mask, types = _inputs(model.config.vocab_size)
  _assert_close(
    _torch(base, ids, mask, types).last_hidden_state.numpy(), model.encode(ids, mask, types), mask, "hidden"
  )


@pytest.mark.parametrize("embedding_size", [24, 32])
def test_export_round_trip_loads_as_electra_for_pretraining(embedding_size, tmp_path):
  discriminator = tiny_models.electra_discriminator(embedding_size, seed=2)
  discriminator.save_pretrained(tmp_path / "original")
  out = export_folder.export(_with_tokenizer(wyjax.hf.load(tmp_path / "original")), tmp_path / "exported")
  reloaded, info = transformers.ElectraForPreTraining.from_pretrained(out, output_loading_info=True)
  assert not any(info[k] for k in info), info  # no missing, unexpected or mismatched keys
  card = (out / "README.md").read_text()
  assert "ElectraForPreTraining.from_pretrained" in card and "model.rtd_logits" in card and "fill-mask" not in card
  ids, mask, types = _inputs(discriminator.config.vocab_size)
  theirs = _torch(discriminator, ids, mask, types).logits.numpy()
  _assert_close(theirs, _torch(reloaded.eval(), ids, mask, types).logits.numpy(), mask, "logits after export")


def test_bert_discriminator_exports_as_electra(tmp_path):
  """A BERT-type encoder with a discriminator head (an RTD run's) is written as ElectraForPreTraining."""
  config = EncoderConfig(**tiny_models.TINY, model_type="bert", type_vocab_size=2, layer_norm_eps=1e-12)
  params = loading.init_params(config, jax.random.key(0), mlm=False, rtd=True)
  model = _with_tokenizer(loading.Model(config, params))
  reloaded, info = transformers.ElectraForPreTraining.from_pretrained(
    export_folder.export(model, tmp_path / "hf"), output_loading_info=True
  )
  assert not any(info[k] for k in info), info
  ids, mask, types = _inputs(config.vocab_size)
  _assert_close(_torch(reloaded.eval(), ids, mask, types).logits.numpy(), model.rtd_logits(ids, mask, types), mask, "")


@pytest.mark.parametrize("head", ["SequenceClassification", "TokenClassification"])
def test_task_models_match_transformers_both_ways(head):
  """ElectraFor<head>'s weights load (its classification head: dense → gelu → out_proj) and are written back."""
  torch.manual_seed(0)
  hf_config = transformers.ElectraConfig(**tiny_models.TINY, embedding_size=24, type_vocab_size=2, num_labels=3)
  hf_model = tiny_models._randomize(getattr(transformers, f"ElectraFor{head}")(hf_config).eval(), 0)
  config = configs.from_hf(hf_config.to_dict())
  module = (SequenceClassifier if head == "SequenceClassification" else TokenClassifier)(config, 3)
  ids, mask, types = _inputs(config.vocab_size)
  shapes = jax.tree_util.tree_map(lambda s: s.shape, nn.unbox(jax.eval_shape(module.init, jax.random.key(0), ids)))
  state_dict = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  params, unused = weights.from_hf(state_dict, config, shapes["params"])
  assert unused == [] and sorted(weights.to_hf(params, config)) == sorted(state_dict)
  ours = np.asarray(module.apply({"params": params}, ids, mask, types))
  theirs = _torch(hf_model, ids, mask, types).logits.numpy()
  _assert_close(theirs, ours, mask if ours.ndim == 3 else np.ones(len(ids)), head)


def test_every_discriminator_param_is_logically_partitioned():
  """The projection and the discriminator head carry logical axis names, as the mesh rules need."""
  config = EncoderConfig(**tiny_models.TINY, model_type="electra", type_vocab_size=2, embedding_size=24)
  boxed = jax.eval_shape(ReplacedTokenDetector(config).init, jax.random.key(0), np.zeros((1, 4), np.int32))["params"]
  assert set(boxed) == {"encoder", "rtd_head"} and set(boxed["rtd_head"]) == {"dense", "dense_prediction"}
  assert boxed["encoder"]["embeddings_project"]["kernel"].value.shape == (24, 32)
  leaves = jax.tree_util.tree_leaves(boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert all(isinstance(leaf, nn.LogicallyPartitioned) and len(leaf.names) == leaf.value.ndim for leaf in leaves)

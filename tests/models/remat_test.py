"""Rematerialisation changes what the backward pass keeps, never the numbers or the params."""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wyjax.models import EncoderConfig, MaskedLM

DEBERTA = EncoderConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32, relative_attention=True,
                        position_buckets=8, max_relative_positions=16, pos_att_type="p2c|c2p")
BERT = EncoderConfig(vocab_size=50, model_type="bert", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, type_vocab_size=2)


@functools.cache
def _loss_and_grads(config: EncoderConfig):
  ids = jnp.asarray(np.random.RandomState(0).randint(5, 50, (2, 16)))
  model = MaskedLM(config)
  params = model.init(jax.random.key(0), ids)["params"]

  def loss(p):  # dropout on: the same masks must be drawn in every mode
    logits = model.apply({"params": p}, ids, deterministic=False, rngs={"dropout": jax.random.key(1)})
    return jnp.sum(jax.nn.log_softmax(logits.astype(jnp.float32))[..., 7])

  return params, jax.jit(jax.value_and_grad(loss))(params)


@pytest.mark.parametrize("base,remat", [(DEBERTA, "full"), (DEBERTA, "dots"), (BERT, "full")],
                         ids=["deberta-full", "deberta-dots", "bert-full"])
def test_remat_gives_the_same_loss_gradients_and_params(base, remat):
  params, (loss, grads) = _loss_and_grads(base)
  remat_params, (remat_loss, remat_grads) = _loss_and_grads(dataclasses.replace(base, remat=remat))
  assert jax.tree_util.tree_structure(remat_params) == jax.tree_util.tree_structure(params)
  np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), remat_grads, grads)


def test_unknown_remat_mode_is_refused():
  with pytest.raises(ValueError, match="remat 'some'"):
    dataclasses.replace(DEBERTA, remat="some")

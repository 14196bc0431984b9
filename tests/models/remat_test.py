"""Rematerialisation and scanned layers change what the backward pass keeps and how the
params are laid out, never the numbers."""

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wyjax.models import EncoderConfig, MaskedLM, stack_layers, unstack_layers

DEBERTA = EncoderConfig(
  vocab_size=50,
  hidden_size=32,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=64,
  max_position_embeddings=32,
  relative_attention=True,
  position_buckets=8,
  max_relative_positions=16,
  pos_att_type="p2c|c2p",
)
BERT = EncoderConfig(
  vocab_size=50,
  model_type="bert",
  hidden_size=32,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=64,
  max_position_embeddings=32,
  type_vocab_size=2,
)


IDS = jnp.asarray(np.random.RandomState(0).randint(5, 50, (2, 16)))


def _value_and_grad(config: EncoderConfig, params, deterministic: bool):
  model = MaskedLM(config)

  def loss(p):
    logits = model.apply({"params": p}, IDS, deterministic=deterministic, rngs={"dropout": jax.random.key(1)})
    return jnp.sum(jax.nn.log_softmax(logits.astype(jnp.float32))[..., 7])

  return jax.jit(jax.value_and_grad(loss))(params)


@functools.cache
def _loss_and_grads(config: EncoderConfig, deterministic: bool = False):
  """Dropout on by default: remat must draw the same masks in every mode."""
  params = nn.unbox(MaskedLM(config).init(jax.random.key(0), IDS)["params"])
  return params, _value_and_grad(config, params, deterministic)


@pytest.mark.parametrize(
  "base,remat",
  [(DEBERTA, "full"), (DEBERTA, "dots"), (BERT, "full")],
  ids=["deberta-full", "deberta-dots", "bert-full"],
)
def test_remat_gives_the_same_loss_gradients_and_params(base, remat):
  params, (loss, grads) = _loss_and_grads(base)
  remat_params, (remat_loss, remat_grads) = _loss_and_grads(dataclasses.replace(base, remat=remat))
  assert jax.tree_util.tree_structure(remat_params) == jax.tree_util.tree_structure(params)
  np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), remat_grads, grads)


def test_unknown_remat_mode_is_refused():
  with pytest.raises(ValueError, match="remat is 'some'; allowed: one of 'none', 'full', 'dots'"):
    dataclasses.replace(DEBERTA, remat="some")


@pytest.mark.parametrize(
  "base,remat,unroll",
  [(DEBERTA, "dots", 1), (BERT, "none", 1), (DEBERTA, "dots", 2)],
  ids=["deberta-dots", "bert", "deberta-dots-unrolled"],
)
def test_scanned_layers_give_the_same_loss_and_gradients(base, remat, unroll):
  """The per-layer params, stacked, in a scanned model, in a loop or unrolled (scan_unroll ≥ the
  layers: no loop at all). Dropout off: a scan splits one rng over the layers where per-layer
  modules fold in their names."""
  params, (loss, grads) = _loss_and_grads(base, deterministic=True)
  config = dataclasses.replace(base, scan_layers=True, remat=remat, scan_unroll=unroll)
  stacked = {**params, "encoder": stack_layers(params["encoder"])}
  scanned_init = jax.eval_shape(MaskedLM(config).init, jax.random.key(0), IDS)["params"]
  assert jax.tree_util.tree_map(np.shape, nn.unbox(scanned_init)) == jax.tree_util.tree_map(np.shape, stacked)
  assert scanned_init["encoder"]["layers"]["mlp"]["wi"]["kernel"].names == ("layers", "embed", "mlp")
  scanned_loss, scanned_grads = _value_and_grad(config, stacked, deterministic=True)
  hlo = jax.jit(MaskedLM(config).apply).lower({"params": stacked}, IDS).as_text()
  assert ("stablehlo.while" in hlo) == (unroll < base.num_hidden_layers)
  np.testing.assert_allclose(scanned_loss, loss, rtol=1e-6)
  scanned_grads = {**scanned_grads, "encoder": unstack_layers(scanned_grads["encoder"])}
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), scanned_grads, grads)

"""The embedding lookup (layers.take): nn.Embed's rows everywhere; on a GPU its gradient sums each
id's rows in float32 with the ids sorted, elsewhere it is autodiff's (the CPU program unchanged)."""
import functools
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from wyjax.core import aot
from wyjax.models import EncoderConfig, bert, layers

VOCAB, WIDTH = 50, 8
MASK = 3  # an id half the tokens share, as [MASK] is many tokens' in a pretraining batch


def _batch():
  rng = np.random.default_rng(0)
  table = jnp.asarray(rng.normal(size=(VOCAB, WIDTH)), jnp.float32)
  ids = rng.integers(0, VOCAB, (8, 256))
  ids[:, ::2] = MASK  # 1,024 of 2,048 tokens
  return table, jnp.asarray(ids, jnp.int32), jnp.asarray(rng.normal(size=(8, 256, WIDTH)), jnp.bfloat16)


def _gradient(lookup, table, ids, grad):
  return np.asarray(jax.grad(lambda t: (lookup(t, ids) * grad).astype(jnp.float32).sum())(table))


def test_the_rows_are_nn_embeds_and_the_gpu_gradient_the_exact_sum():
  """The GPU branch run here: its rows are flax's, its gradient the float64 sum within float32's
  rounding, where autodiff's bf16 scatter is off by bf16's over the 1,024 rows of one id."""
  table, ids, grad = _batch()
  flax_rows = nn.Embed(VOCAB, WIDTH, dtype=jnp.bfloat16).apply({"params": {"embedding": table}}, ids)
  ours = layers.Embed(VOCAB, WIDTH, dtype=jnp.bfloat16).apply({"params": {"embedding": table}}, ids)
  gpu_lookup = functools.partial(layers._summed_sorted, jnp.bfloat16)  # pylint: disable=protected-access
  gpu_rows = gpu_lookup(table, ids)
  assert ours.dtype == gpu_rows.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(ours, np.float32), np.asarray(flax_rows, np.float32))
  np.testing.assert_array_equal(np.asarray(gpu_rows, np.float32), np.asarray(flax_rows, np.float32))
  exact = np.zeros((VOCAB, WIDTH))
  np.add.at(exact, np.asarray(ids).reshape(-1), np.asarray(grad, np.float64).reshape(-1, WIDTH))
  summed = _gradient(gpu_lookup, table, ids, grad)
  np.testing.assert_allclose(summed, exact, rtol=1e-5, atol=1e-5)
  autodiff = _gradient(lambda t, i: layers.take(t, i, jnp.bfloat16), table, ids, grad)  # the CPU's
  assert np.abs(autodiff - exact)[MASK].max() > 100 * np.abs(summed - exact)[MASK].max()
  # In float32 both branches sum in float32: the same gradient, up to the order of the sum.
  float32 = [_gradient(lookup, table, ids, grad.astype(jnp.float32))
             for lookup in (functools.partial(layers._summed_sorted, jnp.float32),  # pylint: disable=protected-access
                            lambda t, i: layers.take(t, i, jnp.float32))]
  np.testing.assert_allclose(*float32, rtol=1e-6, atol=1e-5)


def test_the_h200_program_scatters_sorted_float32_and_the_cpu_program_is_autodiffs():
  """BERT's embeddings (word, position and token-type tables), their gradient compiled for an H200
  on this CPU: every scatter into a table is float32 with its ids sorted (bf16 scatters in token
  order took 29.7 ms of DeBERTa-base's step); lowered for the CPU, autodiff's: no sort."""
  config = EncoderConfig(model_type="bert", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=1,
                         num_attention_heads=1, intermediate_size=64, max_position_embeddings=128,
                         type_vocab_size=2, dtype="bfloat16")
  module = bert.Embeddings(config)

  def rows(params, ids):
    positions = jnp.broadcast_to(jnp.arange(ids.shape[1]), ids.shape)
    return module.apply(params, ids, jnp.zeros_like(ids), positions, True).astype(jnp.float32).sum()

  params = jax.eval_shape(lambda: module.init(jax.random.key(0), *(jnp.ones((1, 8), jnp.int32),) * 3, True))
  replicated = NamedSharding(Mesh(np.array(aot.devices("h200")), ("data",)), PartitionSpec())
  abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
                                    (params, jax.ShapeDtypeStruct((4, 128), jnp.int32)))
  hlo = jax.jit(jax.grad(rows)).lower(*abstract).compile().as_text()
  scatters = re.findall(r"= (\w+)\[(\d+),64\]\{[^}]*\} scatter\(.*?indices_are_sorted=(\w+)", hlo)
  assert sorted(scatters) == [("f32", "128", "true"), ("f32", "2", "true"), ("f32", str(VOCAB), "true")], scatters
  cpu = jax.jit(jax.grad(rows)).trace(*abstract).lower(lowering_platforms=("cpu",)).as_text()
  assert "stablehlo.sort" not in cpu and "indices_are_sorted = true" not in cpu and "stablehlo.scatter" in cpu

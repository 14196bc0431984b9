"""The embedding lookup (layers.take): nn.Embed's rows everywhere; on a GPU its gradient sums each
id's rows in float32 with the ids sorted (under a mesh, each device its own rows, the sums then
added), elsewhere it is autodiff's (the CPU program unchanged)."""

import functools
import pathlib
import re
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tests.train.conftest import pretrain_env
from wyjax.aot import targets
from wyjax.core import partitioning
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


def _exact(ids, grad):
  exact = np.zeros((VOCAB, WIDTH))
  np.add.at(exact, np.asarray(ids).reshape(-1), np.asarray(grad, np.float64).reshape(-1, WIDTH))
  return exact


def _in_train_steps_mesh(fn, mesh):
  """fn as the train steps trace it: the mesh and the logical axis rules in context."""
  return partitioning.with_activation_constraints(fn, mesh, partitioning.rules(partitioning.LOGICAL_AXIS_RULES))


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
  exact = _exact(ids, grad)
  summed = _gradient(gpu_lookup, table, ids, grad)
  np.testing.assert_allclose(summed, exact, rtol=1e-5, atol=1e-5)
  autodiff = _gradient(lambda t, i: layers.take(t, i, jnp.bfloat16), table, ids, grad)  # the CPU's
  assert np.abs(autodiff - exact)[MASK].max() > 100 * np.abs(summed - exact)[MASK].max()
  # In float32 both branches sum in float32: the same gradient, up to the order of the sum.
  float32 = [
    _gradient(lookup, table, ids, grad.astype(jnp.float32))
    for lookup in (
      functools.partial(layers._summed_sorted, jnp.float32),  # pylint: disable=protected-access
      lambda t, i: layers.take(t, i, jnp.float32),
    )
  ]
  np.testing.assert_allclose(*float32, rtol=1e-6, atol=1e-5)


def _bert_embeddings():
  """(the sum of BERT's embedded rows as a function of (params, ids), its params' shapes): the
  word, position and token-type tables, each looked up by `layers.take`."""
  config = EncoderConfig(
    model_type="bert",
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=1,
    num_attention_heads=1,
    intermediate_size=64,
    max_position_embeddings=128,
    type_vocab_size=2,
    dtype="bfloat16",
  )
  module = bert.Embeddings(config)

  def rows(params, ids):
    positions = jnp.broadcast_to(jnp.arange(ids.shape[1]), ids.shape)
    return module.apply(params, ids, jnp.zeros_like(ids), positions, True).astype(jnp.float32).sum()

  return rows, jax.eval_shape(lambda: module.init(jax.random.key(0), *(jnp.ones((1, 8), jnp.int32),) * 3, True))


def test_the_h200_program_scatters_sorted_float32_and_the_cpu_program_is_autodiffs():
  """BERT's embeddings (word, position and token-type tables), their gradient compiled for an H200
  on this CPU: every scatter into a table is float32 with its ids sorted (bf16 scatters in token
  order took 29.7 ms of DeBERTa-base's step); lowered for the CPU, autodiff's: no sort."""
  rows, params = _bert_embeddings()
  replicated = NamedSharding(Mesh(np.array(targets.devices("h200")), ("data",)), PartitionSpec())
  abstract = jax.tree_util.tree_map(
    lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
    (params, jax.ShapeDtypeStruct((4, 128), jnp.int32)),
  )
  hlo = jax.jit(jax.grad(rows)).lower(*abstract).compile().as_text()
  scatters = re.findall(r"= (\w+)\[(\d+),64\]\{[^}]*\} scatter\(.*?indices_are_sorted=(\w+)", hlo)
  assert sorted(scatters) == [("f32", "128", "true"), ("f32", "2", "true"), ("f32", str(VOCAB), "true")], scatters
  cpu = jax.jit(jax.grad(rows)).trace(*abstract).lower(lowering_platforms=("cpu",)).as_text()
  assert "stablehlo.sort" not in cpu and "indices_are_sorted = true" not in cpu and "stablehlo.scatter" in cpu


def check_sharded_sum_is_the_exact_sum():
  """Run with 4 CPU devices (the test below)."""
  table, ids, grad = _batch()
  mesh = partitioning.make_mesh({"data": 2, "fsdp": 1, "tensor": 2}, jax.devices()[:4])
  batch = NamedSharding(mesh, PartitionSpec(partitioning.BATCH_AXES))
  gpu_lookup = functools.partial(layers._summed_sorted, jnp.bfloat16)  # pylint: disable=protected-access
  gradient = jax.jit(
    _in_train_steps_mesh(jax.grad(lambda t, i, g: (gpu_lookup(t, i) * g).astype(jnp.float32).sum()), mesh)
  )
  summed = np.asarray(gradient(table, jax.device_put(ids, batch), jax.device_put(grad, batch)))
  np.testing.assert_allclose(summed, _exact(ids, grad), rtol=1e-5, atol=1e-5)
  # 3 rows do not split over the 2 batch shards (a small micro-batch): summed on each device whole.
  np.testing.assert_allclose(
    np.asarray(gradient(table, ids[:3], grad[:3])), _exact(ids[:3], grad[:3]), rtol=1e-5, atol=1e-5
  )


def test_under_a_mesh_each_device_sums_its_rows_and_the_sums_add_up():
  """Data 2 × tensor 2 on 4 CPU devices, the train steps' rules: each batch shard sums its own
  rows (the tensor axis holds the same rows twice and must not count them twice); their sums,
  added, are the exact sum within float32's rounding. Rows that do not split over the shards
  (3 over 2) are summed whole, where a shard_map would refuse them."""
  code = "from tests.models import embed_test; embed_test.check_sharded_sum_is_the_exact_sum()"
  result = subprocess.run(
    [sys.executable, "-c", code],
    env=pretrain_env(devices=4),
    capture_output=True,
    text=True,
    timeout=300,
    cwd=pathlib.Path(__file__).resolve().parents[2],
  )
  assert result.returncode == 0, result.stderr[-3000:]


def test_on_eight_gpus_no_token_row_crosses_devices():
  """BERT's embeddings' gradient compiled for 8 H100s (data 8) on this CPU: the only collectives
  are float32 all-reduces of the gradients, at most one of each parameter. One sort of every
  device's tokens had XLA all-reduce each table's bf16 gradient rows, [tokens of all 8, width]."""
  rows, params = _bert_embeddings()
  mesh = partitioning.make_mesh({"data": 8, "fsdp": 1, "tensor": 1}, targets.devices("h100:8"))
  abstract = jax.tree_util.tree_map(
    lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, PartitionSpec())), params
  )
  ids = jax.ShapeDtypeStruct((64, 128), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec(partitioning.BATCH_AXES)))
  hlo = jax.jit(_in_train_steps_mesh(jax.grad(rows), mesh)).lower(abstract, ids).compile().as_text()
  collectives = re.findall(
    r"= (\w+)\[([\d,]*)\]\{[^}]*\} (all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute)",
    hlo,
  )
  assert collectives and all(dtype == "f32" and kind == "all-reduce" for dtype, _, kind in collectives), collectives
  reduced = sum(int(np.prod([int(d) for d in shape.split(",") if d])) for _, shape, _ in collectives)
  assert reduced <= sum(x.size for x in jax.tree_util.tree_leaves(params)), collectives  # XLA may join them

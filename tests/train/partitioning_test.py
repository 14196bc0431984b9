"""The models' activation constraints reach the train step the run compiles."""

import collections
import importlib.util

import jax
import jax.numpy as jnp

from tests.train.conftest import REPO_ROOT
from wyjax.aot import targets
from wyjax.core import partitioning
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import pretraining


def _tiny_config():
  spec = importlib.util.spec_from_file_location("deberta_tiny", REPO_ROOT / "configs" / "pretrain" / "deberta_tiny.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def test_activation_constraints_split_heads_and_mlp_over_the_tensor_axis():
  """deberta_tiny's pretraining step lowered for 8 v5p chips as (data 2, fsdp 2, tensor 2): with
  the default rules every layer's activations are pinned (batch over data and fsdp, heads and
  MLP over tensor), forward and backward; without the activation rules nothing is."""
  config = _tiny_config()
  config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 2, 2, 2
  config.attention = "xla"  # the reference path: its scores are constrained too (the kernel's shard_map pins its own)
  devices = targets.devices("v5p:2x2x2")

  def constraints(rules) -> collections.Counter:
    config.logical_axis_rules = rules
    run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), 128, devices)
    batch = jax.ShapeDtypeStruct((config.batch_size, 128), jnp.int32, sharding=run.program.data_sharding)
    text = run.train_step.lower(run.program.abstract_state, batch).as_text()
    return collections.Counter(
      line.split("<@mesh, ")[1].split(">")[0] for line in text.splitlines() if "sdy.sharding_constraint" in line
    )

  found = constraints(partitioning.LOGICAL_AXIS_RULES)
  per_layer_forward = {  # q, k, v, context; scores; MLP; attention output and layer output
    '[{"data", "fsdp"}, {}, {"tensor"}, {}]': 4,
    '[{"data", "fsdp"}, {"tensor"}, {}, {}]': 1,
    '[{"data", "fsdp"}, {}, {"tensor"}]': 1,
    '[{"data", "fsdp"}, {}, {}]': 2,
  }
  layers = config.model["num_hidden_layers"]
  expected = {spec: 2 * layers * n for spec, n in per_layer_forward.items()}  # and their transposes
  expected['[{"data", "fsdp"}, {}, {}]'] += 2  # the embeddings' output
  assert found == expected
  assert not constraints(tuple(r for r in partitioning.LOGICAL_AXIS_RULES if not r[0].startswith("activation_")))

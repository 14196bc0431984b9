"""Every parameter carries logical axis names, so the mesh rules can shard it."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

from wyjax.models import EncoderConfig, MaskedLM

KNOWN_AXES = {"vocab", "embed", "heads", "kv", "mlp", None}


@pytest.mark.parametrize("model_type", ["deberta-v2", "bert", "roberta"])
def test_every_param_is_logically_partitioned(model_type):
  config = EncoderConfig(
    vocab_size=50,
    model_type=model_type,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    type_vocab_size=2,
    relative_attention=model_type == "deberta-v2",
    position_buckets=8,
    pos_att_type="p2c|c2p",
    share_att_key=False,
    embedding_size=None,
  )
  boxed = jax.eval_shape(MaskedLM(config).init, jax.random.key(0), jnp.zeros((1, 4), jnp.int32))
  leaves = jax.tree_util.tree_leaves(boxed["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert leaves and all(isinstance(leaf, nn.LogicallyPartitioned) for leaf in leaves)
  for leaf in leaves:
    assert len(leaf.names) == len(leaf.value.shape)
    assert set(leaf.names) <= KNOWN_AXES
  names = {n for leaf in leaves for n in leaf.names}
  assert {"vocab", "embed", "heads", "kv", "mlp"} <= names

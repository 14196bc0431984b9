import numpy as np
import pytest
import torch
from transformers.models.deberta_v2 import modeling_deberta_v2

from wyjax.models import EncoderConfig
from wyjax.models.deberta_v2 import log_bucket_position, relative_position_index


@pytest.mark.parametrize("buckets,max_position", [(128, 512), (256, 512)])
def test_log_buckets_equal_transformers(buckets, max_position):
  relative = np.arange(-2047, 2048)
  theirs = modeling_deberta_v2.make_log_bucket_position(
      torch.tensor(relative), buckets, max_position).long().numpy()
  np.testing.assert_array_equal(log_bucket_position(relative, buckets, max_position), theirs)


@pytest.mark.parametrize("buckets,max_relative", [(128, -1), (0, 24), (-1, -1)])
def test_relative_index_equals_transformers_c2p_positions(buckets, max_relative):
  config = EncoderConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, relative_attention=True,
                         position_buckets=buckets, max_relative_positions=max_relative)
  length = 300
  positions = torch.zeros(1, length, 1)
  relative = modeling_deberta_v2.build_relative_position(
      positions, positions, bucket_size=buckets, max_position=config.max_relative_distance)[0]
  span = config.relative_span
  theirs = torch.clamp(relative + span, 0, 2 * span - 1).numpy()
  np.testing.assert_array_equal(relative_position_index(np.arange(length), np.arange(length), config), theirs)


def test_config_rejects_unknown_pos_att_type():
  with pytest.raises(ValueError, match="pos_att_type"):
    EncoderConfig(vocab_size=10, pos_att_type="c2p|x2y")


def test_config_accepts_string_and_list_pos_att_type():
  a = EncoderConfig(vocab_size=10, pos_att_type="p2c|c2p")
  b = EncoderConfig(vocab_size=10, pos_att_type=["P2C", "c2p"])
  assert a.pos_att_type == b.pos_att_type == ("p2c", "c2p")


def test_bfloat16_activations_track_float32():
  """dtype=bfloat16 runs matmuls in bf16 (params, LayerNorm, softmax, logits stay fp32)."""
  import jax
  import jax.numpy as jnp

  from wyjax.hf import init_params
  from wyjax.models import MaskedLM
  config = EncoderConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, relative_attention=True, position_buckets=8,
                         pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
                         position_biased_input=False)
  params = init_params(config, jax.random.key(0))
  ids = jax.random.randint(jax.random.key(1), (2, 24), 5, 64)
  fp32 = MaskedLM(config).apply({"params": params}, ids)
  bf16 = MaskedLM(config.replace(dtype="bfloat16")).apply({"params": params}, ids)
  assert bf16.dtype == jnp.float32 and bool(jnp.isfinite(bf16).all())
  relative = jnp.linalg.norm(bf16 - fp32) / jnp.linalg.norm(fp32)
  assert relative < 3e-2, relative
  assert float(jnp.mean(jnp.argmax(bf16, -1) == jnp.argmax(fp32, -1))) > 0.9

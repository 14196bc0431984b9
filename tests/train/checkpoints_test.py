import jax
import numpy as np
import pytest

import wyjax.hf
from wyjax.models import EncoderConfig
from wyjax.train import checkpoints


def test_params_round_trip_through_a_workdir(tmp_path):
  config = EncoderConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, relative_attention=True, position_buckets=8,
                         pos_att_type="p2c|c2p", share_att_key=True)
  params = wyjax.hf.init_params(config, jax.random.key(0))
  checkpoints.save_params(tmp_path, 3, jax.tree_util.tree_map(lambda x: x * 0 + 1, params), config)
  checkpoints.save_params(tmp_path, 7, params, config)
  for path, expected in ((tmp_path, params), (tmp_path / "checkpoints" / "7", params)):
    restored_config, restored = checkpoints.restore_model(path)
    assert restored_config == config
    jax.tree_util.tree_map(np.testing.assert_array_equal, restored, jax.tree_util.tree_map(np.asarray, expected))
  _, older = checkpoints.restore_model(tmp_path / "checkpoints" / "3")
  assert np.all(older["encoder"]["embeddings"]["word_embeddings"]["embedding"] == 1)


def test_not_a_checkpoint(tmp_path):
  with pytest.raises(FileNotFoundError, match="neither a transformers folder"):
    wyjax.hf.load(tmp_path)

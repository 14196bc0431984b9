import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

import wyjax.hf
from tests import checkpoint_files
from wyjax.core import checkpoints
from wyjax.models import EncoderConfig


def test_params_round_trip_through_a_workdir(tmp_path):
  config = EncoderConfig(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    relative_attention=True,
    position_buckets=8,
    pos_att_type="p2c|c2p",
    share_att_key=True,
  )
  params = wyjax.hf.init_params(config, jax.random.key(0))
  checkpoint_files.save_params(tmp_path, 3, jax.tree_util.tree_map(lambda x: x * 0 + 1, params), config)
  checkpoint_files.save_params(tmp_path, 7, params, config)
  for path, expected in ((tmp_path, params), (tmp_path / "checkpoints" / "7", params)):
    restored_config, restored = checkpoints.restore_model(path)
    assert EncoderConfig.from_dict(restored_config) == config
    jax.tree_util.tree_map(np.testing.assert_array_equal, restored, jax.tree_util.tree_map(np.asarray, expected))
  _, older = checkpoints.restore_model(tmp_path / "checkpoints" / "3")
  assert np.all(older["encoder"]["embeddings"]["word_embeddings"]["embedding"] == 1)


def test_not_a_checkpoint(tmp_path):
  with pytest.raises(FileNotFoundError, match="neither a transformers folder"):
    wyjax.hf.load(tmp_path)


def _save(mngr, step, state):
  writer = checkpoints.Writer(mngr)
  writer.save(step, ocp.args.Composite(state=ocp.args.PyTreeSave(state)), force=True)
  writer.wait()


def _abstract(tree):
  return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


def test_restore_latest_sets_aside_non_finite_checkpoints_and_refuses_incompatible_ones(tmp_path):
  good = {"params": {"w": jnp.arange(6.0).reshape(2, 3)}, "step": jnp.int32(1)}
  mngr = checkpoints.manager(tmp_path, max_to_keep=None)
  _save(mngr, 1, good)
  _save(mngr, 2, {"params": {"w": good["params"]["w"].at[0, 1].set(jnp.nan)}, "step": jnp.int32(2)})
  assert (tmp_path / "checkpoints" / "2" / checkpoints.CHECKSUMS).exists()  # sealed, and yet non-finite

  wider = {"params": {"w": jnp.zeros((2, 4)), "b": jnp.zeros(2)}, "step": jnp.int32(0)}
  before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
  with pytest.raises(
    checkpoints.IncompatibleCheckpoint,
    match=r"2 differences\):\n  params/b: not in the checkpoint"
    r"\n  params/w: checkpoint \(2, 3\) float32, this run "
    r"\(2, 4\) float32\n",
  ):
    checkpoints.restore_latest(mngr, _abstract(wider))
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before  # nothing moved

  state, step = checkpoints.restore_latest(mngr, _abstract(good))
  assert step == 1
  np.testing.assert_array_equal(state["params"]["w"], good["params"]["w"])
  assert [p.name.rsplit("-", 1)[0] for p in (tmp_path / "checkpoints").iterdir() if not p.name.isdigit()] == [
    "unreadable-2"
  ]
  mngr.close()


def test_checksums_name_the_damaged_file(tmp_path):
  config = EncoderConfig(
    vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
  )
  checkpoint_files.save_params(tmp_path, 3, wyjax.hf.init_params(config, jax.random.key(0)), config)
  step_dir = tmp_path / "checkpoints" / "3"
  assert checkpoints.integrity_problem(step_dir) is None
  metadata = step_dir / "state" / "_METADATA"
  metadata.write_bytes(metadata.read_bytes() + b" ")
  assert (
    checkpoints.integrity_problem(step_dir) == f"state/_METADATA has {metadata.stat().st_size} bytes, "
    f"{metadata.stat().st_size - 1} were written"
  )
  with pytest.raises(ValueError, match=r"checkpoints/3 is corrupt: state/_METADATA has"):
    checkpoints.restore_model(tmp_path)

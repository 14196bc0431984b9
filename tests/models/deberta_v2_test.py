import re

import numpy as np
import pytest
import torch
from transformers.models.deberta_v2 import modeling_deberta_v2

from wyjax.models import EncoderConfig, deberta_v2
from wyjax.models.deberta_v2 import log_bucket_position, relative_position_index


@pytest.mark.parametrize("buckets,max_position", [(128, 512), (256, 512)])
def test_log_buckets_equal_transformers(buckets, max_position):
  relative = np.arange(-2047, 2048)
  theirs = modeling_deberta_v2.make_log_bucket_position(torch.tensor(relative), buckets, max_position).long().numpy()
  np.testing.assert_array_equal(log_bucket_position(relative, buckets, max_position), theirs)


@pytest.mark.parametrize("buckets,max_relative", [(128, -1), (0, 24), (-1, -1)])
def test_relative_index_equals_transformers_c2p_positions(buckets, max_relative):
  config = EncoderConfig(
    vocab_size=10,
    hidden_size=8,
    num_attention_heads=2,
    relative_attention=True,
    position_buckets=buckets,
    max_relative_positions=max_relative,
  )
  length = 300
  positions = torch.zeros(1, length, 1)
  relative = modeling_deberta_v2.build_relative_position(
    positions, positions, bucket_size=buckets, max_position=config.max_relative_distance
  )[0]
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

  config = EncoderConfig(
    vocab_size=64,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    relative_attention=True,
    position_buckets=8,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
  )
  params = init_params(config, jax.random.key(0))
  ids = jax.random.randint(jax.random.key(1), (2, 24), 5, 64)
  fp32 = MaskedLM(config).apply({"params": params}, ids)
  bf16 = MaskedLM(config.replace(dtype="bfloat16")).apply({"params": params}, ids)
  assert bf16.dtype == jnp.float32 and bool(jnp.isfinite(bf16).all())
  relative = jnp.linalg.norm(bf16 - fp32) / jnp.linalg.norm(fp32)
  assert relative < 3e-2, relative
  assert float(jnp.mean(jnp.argmax(bf16, -1) == jnp.argmax(fp32, -1))) > 0.9


def test_skew_lines_each_entry_up_with_its_distance():
  import jax.numpy as jnp

  from wyjax.models.deberta_v2 import skew

  for length in (1, 2, 5):
    by_distance = np.random.default_rng(length).normal(size=(2, 3, length, 2 * length - 1)).astype(np.float32)
    i, j = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")
    np.testing.assert_array_equal(np.asarray(skew(jnp.asarray(by_distance))), by_distance[..., i, j - i + length - 1])


@pytest.mark.parametrize("buckets,max_relative,length", [(4, -1, 40), (0, 24, 9), (0, 6, 30), (-1, -1, 1)])
def test_rows_taken_by_distance_equal_the_gathered_rows(buckets, max_relative, length):
  """A forward's c2p and p2c rows on a CPU (by distance: copies and a skew) against the gather,
  on the block's rows and their transpose (p2c's), with buckets, clipping, and neither."""
  import jax.numpy as jnp

  config = EncoderConfig(
    vocab_size=10,
    hidden_size=8,
    num_attention_heads=2,
    relative_attention=True,
    max_position_embeddings=64,
    position_buckets=buckets,
    max_relative_positions=max_relative,
  )
  rows = relative_position_index(np.arange(length), np.arange(length), config)
  table = jnp.asarray(np.random.default_rng(length).normal(size=(2, 3, length, 2 * config.relative_span)))
  for block in (rows, rows.T):
    np.testing.assert_array_equal(
      np.asarray(deberta_v2._take_rows_by_distance(table, block)),
      np.asarray(deberta_v2._take_rows(table, jnp.asarray(block))),
    )


def _instructions(hlo: str, op: str) -> list[tuple[int, ...]]:
  """The result shapes of the `op` instructions of an HLO module's text, fusions' bodies included."""
  return [
    tuple(int(n) for n in dims.split(",") if n) for dims in re.findall(rf"= \w+\[([\d,]*)\]\{{[^}}]*\}} {op}\(", hlo)
  ]


_BATCH, _LENGTH, _HEADS = 4, 24, 4


def _training_pass(position_buckets: int = 10):
  """(loss of params, params) of a one-layer DeBERTa on the XLA path, with dropout."""
  import jax
  import jax.numpy as jnp

  from wyjax.models import DebertaV2

  config = EncoderConfig(
    vocab_size=40,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=_HEADS,
    intermediate_size=48,
    relative_attention=True,
    position_biased_input=False,
    pos_att_type="c2p|p2c",
    position_buckets=position_buckets,
    max_relative_positions=64,
    attention="xla",
  )
  ids = jnp.ones((_BATCH, _LENGTH), jnp.int32)
  params = DebertaV2(config).init(jax.random.key(0), ids)
  return (
    lambda p: DebertaV2(config).apply(p, ids, deterministic=False, rngs={"dropout": jax.random.key(1)}).sum(),
    params,
  )


def _lowered(text: str, op: str) -> list[tuple[int, ...]]:
  """The result shapes of the stablehlo `op`s of a lowered module's text (a scatter's after its region)."""
  return [
    tuple(int(n) for n in dims.split("x"))
    for dims in re.findall(rf'stablehlo\.{op}\b.*?-> tensor<([\dx]+)x\w+>', text, flags=re.S)
  ]


def test_xla_path_trains_without_gathers_over_the_scores(h100_mesh):
  """The XLA path's training pass (forward and backward, dropout) lowered for an H100: c2p and
  p2c come by distance and skew, so no gather or scatter reaches an array of [B, H, L, ·] size
  (only the [2L - 1, H, d] rows of the relative projections are gathered), and no matmul makes a
  [B·H·L, 2S] table: neither the forward's scores against all 2S rows nor the one-hot product the
  gather's backward once was."""
  import jax

  loss, params = _training_pass()
  span2 = (
    20  # 2S: unlike L, 2L - 1, d and the hidden sizes (the embeddings' gather is [B·L, hidden], under half the scores)
  )
  with jax.sharding.use_abstract_mesh(h100_mesh):
    text = jax.jit(jax.grad(loss)).trace(params).lower(lowering_platforms=("cuda",)).as_text()
  scores_half = _BATCH * _HEADS * _LENGTH * _LENGTH // 2
  moved = _lowered(text, "gather") + _lowered(text, "scatter")
  assert moved and all(np.prod(shape) < scores_half for shape in moved), moved
  dots = _lowered(text, "dot_general")
  tables = [s for s in dots if s[-1] == span2 and np.prod(s) >= _BATCH * _HEADS * _LENGTH * span2]
  assert dots and not tables, tables


@pytest.mark.parametrize("position_buckets", [10, 160])
def test_on_a_cpu_the_xla_path_selects_c2p_and_p2c_rows(position_buckets, monkeypatch):
  """On a CPU, where scoring all 2L - 1 distances costs more, the compiled training pass takes
  c2p and p2c from their [B, H, L, 2S] tables: by one-hot matmuls up to ONE_HOT_MOST_ROWS rows
  (2S = 20: no gather or scatter of the scores' size; the gradients those of the gather to
  float32 rounding), by gathers and scatter-adds of their gradients beyond (2S = 320)."""
  import jax

  loss, params = _training_pass(position_buckets)
  hlo = jax.jit(jax.grad(loss)).lower(params).compile().as_text()
  scores = _BATCH * _HEADS * _LENGTH * _LENGTH
  gathers = sum(np.prod(s) == scores for s in _instructions(hlo, "gather"))
  scatters = sum(np.prod(s) >= scores // 2 for s in _instructions(hlo, "scatter"))
  one_hot = 2 * position_buckets <= deberta_v2.ONE_HOT_MOST_ROWS
  assert (gathers, scatters > 0) == ((0, False) if one_hot else (2, True)), _instructions(hlo, "gather")
  if one_hot:
    grads = jax.grad(loss)(params)
    monkeypatch.setattr(deberta_v2, "ONE_HOT_MOST_ROWS", 0)
    jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), grads, jax.grad(loss)(params)
    )

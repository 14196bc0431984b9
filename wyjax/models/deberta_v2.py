"""DeBERTa-v2 encoder: disentangled attention over log-bucketed relative positions.

Numerically equal to transformers' `DebertaV2Model` (tests/models/parity_test.py); the
math, with its pitfalls, is written out in docs/models.md.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import attention, layers
from wyjax.models.config import EncoderConfig


def log_bucket_position(relative_pos: np.ndarray, bucket_size: int, max_position: int) -> np.ndarray:
  """transformers' `make_log_bucket_position`: exact inside ±bucket_size/2, log-spaced beyond."""
  relative_pos = np.asarray(relative_pos, dtype=np.int64)
  mid = bucket_size // 2
  sign = np.sign(relative_pos)
  abs_pos = np.where((relative_pos < mid) & (relative_pos > -mid), mid - 1, np.abs(relative_pos))
  log_pos = np.ceil(np.log(abs_pos / mid) / np.log((max_position - 1) / mid) * (mid - 1)) + mid
  return np.where(abs_pos <= mid, relative_pos, log_pos * sign).astype(np.int64)


def relative_rows(distance: np.ndarray, config: EncoderConfig) -> np.ndarray:
  """Rows of the 2S relative embeddings for query-key distances i - j (bucketed, clipped)."""
  if config.position_buckets > 0:
    distance = log_bucket_position(distance, config.position_buckets, config.max_relative_distance)
  span = config.relative_span
  return np.clip(distance + span, 0, 2 * span - 1).astype(np.int32)


def relative_position_index(
  query_positions: np.ndarray, key_positions: np.ndarray, config: EncoderConfig
) -> np.ndarray:
  """[q, k] row index into the 2S relative embeddings for query i attending key j.

  c2p and p2c share this table: bucket(i - j) is odd in (i - j), so transformers'
  transposed p2c gather reads the same rows.
  """
  return relative_rows(np.asarray(query_positions)[:, None] - np.asarray(key_positions)[None, :], config)


class Embeddings(nn.Module):
  config: EncoderConfig

  def setup(self):
    cfg = self.config
    self.word_embeddings = layers.embed(cfg, cfg.vocab_size, cfg.embed_dim, ("vocab", "embed"), name="word_embeddings")
    if cfg.position_biased_input:
      self.position_embeddings = layers.embed(
        cfg, cfg.max_position_embeddings, cfg.embed_dim, (None, "embed"), name="position_embeddings"
      )
    if cfg.type_vocab_size > 0:
      self.token_type_embeddings = layers.embed(
        cfg, cfg.type_vocab_size, cfg.embed_dim, (None, "embed"), name="token_type_embeddings"
      )
    if cfg.embed_dim != cfg.hidden_size:
      self.embed_proj = layers.dense(cfg, cfg.hidden_size, (None, "embed"), use_bias=False, name="embed_proj")
    self.norm = layers.LayerNorm(cfg)
    self.dropout = layers.Dropout(cfg.hidden_dropout_prob)

  def __call__(self, input_ids, token_type_ids, position_ids, padding_mask, deterministic):
    cfg = self.config
    x = self.word_embeddings(input_ids)
    if cfg.position_biased_input:
      x = x + self.position_embeddings(position_ids)
    if cfg.type_vocab_size > 0:
      x = x + self.token_type_embeddings(token_type_ids)
    if cfg.embed_dim != cfg.hidden_size:
      x = self.embed_proj(x)
    x = self.norm(x)
    x = x * padding_mask[..., None].astype(x.dtype)
    return self.dropout(x, deterministic=deterministic)


class DisentangledAttention(nn.Module):
  """Content-to-content plus c2p/p2c relative terms, all scaled by sqrt(d · (1 + #terms)).

  With cache_start (incremental decoding) the keys and values of all positions come from the
  'cache' collection, and the relative projections of the layer are computed once, when the
  cache is created, and read back at every later step.
  """

  config: EncoderConfig

  @nn.compact
  def __call__(self, x, mask, rel_embeddings, rel_index, deterministic, cache_start=None):
    cfg = self.config
    heads = (cfg.num_attention_heads, cfg.head_dim)
    qkv_axes = ("embed", "heads", "kv")
    query_proj = layers.dense(cfg, heads, qkv_axes, name="query")
    key_proj = layers.dense(cfg, heads, qkv_axes, name="key")
    q, k = query_proj(x), key_proj(x)
    v = layers.dense(cfg, heads, qkv_axes, name="value")(x)
    q, k, v = (layers.constrain(t, layers.PER_HEAD) for t in (q, k, v))
    if cache_start is not None:
      k, v = layers.cached_keys_values(self, k, v, cache_start, mask.shape[-1])

    scale = np.sqrt(cfg.head_dim * (1 + len(cfg.pos_att_type))).astype(np.float32)
    pos_key = pos_query = None
    if cfg.relative_attention:
      rel = layers.Dropout(cfg.hidden_dropout_prob)(rel_embeddings, deterministic=deterministic)

      def relative_projection(name, shared_proj):
        project = lambda: shared_proj(rel) if cfg.share_att_key else layers.dense(cfg, heads, qkv_axes, name=name)(rel)
        if cache_start is None:
          return project()
        return self.variable("cache", f"cached_{name}", project).value

      if "c2p" in cfg.pos_att_type:
        pos_key = relative_projection("pos_key", key_proj)
      if "p2c" in cfg.pos_att_type:
        pos_query = relative_projection("pos_query", query_proj)

    dropout = not deterministic and cfg.attention_probs_dropout_prob > 0
    how = (
      "xla"
      if cache_start is not None
      else attention.implementation(
        cfg.attention,
        relative=cfg.relative_attention,
        training=not deterministic,
        dropout=dropout,
        length=k.shape[1],
        padding_only=mask.shape[2] == 1,
        dtype=cfg.dtype,
        head_dim=cfg.head_dim,
      )
    )
    if how == "pallas":
      context = attention.fused_attention(
        q,
        k,
        v,
        mask,
        scale=scale,
        dropout_rate=cfg.attention_probs_dropout_prob if dropout else 0.0,
        seed=attention.dropout_seed(self) if dropout else None,
        pos_key=pos_key,
        pos_query=pos_query,
        relative_index=lambda distance: relative_rows(distance, cfg),
      )
    elif how in ("cudnn", "cudnn_dropout"):
      rate = cfg.attention_probs_dropout_prob if how == "cudnn_dropout" else 0.0
      context = cudnn_relative_attention(cfg, q, k, v, mask, scale, pos_key, pos_query, rate)
    else:
      context = xla_attention(cfg, q, k, v, mask, scale, pos_key, pos_query, rel_index, deterministic)
    return layers.dense(cfg, cfg.hidden_size, ("heads", "kv", "embed"), axis=(-2, -1), name="out")(context)


# The most relative rows (2S) a CPU takes by a one-hot matmul rather than a gather in training: on 2 cores
# one layer's c2p and p2c, forward and backward, ran faster that way up to 2S = 256 at every length
# measured, and slower at 2S = 512 on 128 tokens (docs/history/cpu_speed.md).
ONE_HOT_MOST_ROWS = 256


def _take_rows(table, rows):
  """table[..., q, rows[q, k]] → [..., q, k] by XLA's gather (a cached block's rows are traced)."""
  return jnp.take_along_axis(table, jnp.broadcast_to(rows, table.shape[:-2] + rows.shape), axis=-1)


def _take_rows_by_distance(table, rows: np.ndarray):
  """`_take_rows` for a whole block's rows ([L, L], a function of i - j alone), by copies, no matmul.

  Each distance's column is taken once ([..., q, 2L - 1], `distance_rows`' order) and skewed into place.
  Forward only: its gradient is a scatter-add, costlier than the one-hot's matmul.
  """
  by_distance = np.concatenate([rows[::-1, 0], rows[0, 1:]])  # distances L - 1, …, 0, …, -(L - 1)
  return skew(jnp.take(table, jnp.asarray(by_distance), axis=-1))


def _take_rows_by_one_hot(table, rows: np.ndarray):
  """`_take_rows` as a matmul with the rows' one-hot [q, k, r]: its gradient is a matmul, not a scatter-add."""
  one_hot = (jnp.asarray(rows)[..., None] == jnp.arange(table.shape[-1])).astype(table.dtype)
  return jnp.einsum("...qr,qkr->...qk", table, one_hot)


def skew(by_distance: jax.Array) -> jax.Array:
  """[..., L, 2L - 1] → [..., L, L]: out[..., i, j] = by_distance[..., i, j - i + L - 1].

  Transformer-XL's relative shift: the block read flat with a row pitch of 2L - 2 from L - 1. Slices and
  reshapes only, so the gradient is pads and reshapes, no gather or scatter.
  """
  *lead, length, width = by_distance.shape
  if length == 1:
    return by_distance
  flat = by_distance.reshape(*lead, length * width)
  rows = jax.lax.slice_in_dim(flat, length - 1, length - 1 + length * (width - 1), axis=-1)
  return rows.reshape(*lead, length, width - 1)[..., :length]


def _select_rows(projection, rows: np.ndarray):
  """projection[rows] ([2S, heads, d] → [len(rows), heads, d]) as a product with a static one-hot matrix.

  Its gradient is a matmul summed in float32 in a fixed order, where a gather's is a scatter-add in the
  projection's dtype by atomics on a GPU.
  """
  one_hot = jnp.asarray(rows[:, None] == np.arange(projection.shape[0]), projection.dtype)
  return jnp.einsum(
    "cr,rnd->cnd", one_hot, projection, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32
  ).astype(projection.dtype)


def distance_rows(cfg: EncoderConfig, length: int, pos_key, pos_query):
  """The relative rows of each distance L - 1, …, -(L - 1), which `relative_terms` scores against.

  Returns (pos_key's rows in that order, pos_query's in the reverse), each [2L - 1, heads, d], or None where
  the projection is None.
  """
  rows = relative_rows(np.arange(length - 1, -length, -1), cfg)  # distance L - 1 - c at column c
  return (
    None if pos_key is None else _select_rows(pos_key, rows),
    None if pos_query is None else _select_rows(pos_query, rows[::-1]),
  )


@jax.custom_vjp
def _gradients_together(tokens, rows):
  """The identity, whose backward pass hands on both gradients at once (an optimization barrier).

  The rows' gradient (read from the layer's [heads, batch · L, 2L - 1] product gradient) is then taken
  before the tokens' gradient flows on to the layer below. Without it, on several GPUs, XLA's scheduler
  deferred it to the end of the step, keeping every layer's product gradients alive until then.
  """
  return tokens, rows


_gradients_together.defvjp(
  lambda tokens, rows: ((tokens, rows), None), lambda _, gradients: jax.lax.optimization_barrier(gradients)
)


def _by_distance(tokens, rows):
  """[batch, L, heads, d] · [2L - 1, heads, d] → [batch, heads, L, 2L - 1], the token as the product's row.

  XLA:GPU then writes it distance-minor ([heads, batch · L, 2L - 1]) and `skew` reads it along rows
  (jnp.einsum's order, distance-major, made the bias's fusion read both products with a long stride).
  """
  tokens, rows = _gradients_together(tokens, rows)
  by_heads = jax.lax.dot_general(tokens, rows, (((3,), (2,)), ((2,), (1,))))  # [heads, batch, L, 2L - 1]
  return by_heads.transpose(1, 0, 2, 3)


def relative_terms(q, k, key_rows, query_rows):
  """c2p + p2c, unscaled, of a block from position 0: [batch, heads, L, L] (None without them).

  By distance, not by gather: each query (key) scores all 2L - 1 `distance_rows` in one matmul, and `skew`
  lines entry (i, j) up with distance i - j. c2p[i, j] = q_i · pos_key[r(i - j)]; p2c[i, j] =
  k_j · pos_query[r(i - j)], skewed per key (distances ascending) and transposed.
  """
  terms = []
  if key_rows is not None:
    terms.append(skew(_by_distance(q, key_rows)))
  if query_rows is not None:
    terms.append(skew(_by_distance(k, query_rows)).swapaxes(-1, -2))
  return sum(terms[1:], terms[0]) if terms else None


def cudnn_relative_attention(cfg: EncoderConfig, q, k, v, mask, scale, pos_key, pos_query, dropout_rate: float):
  """Attention by cuDNN with the relative terms as its bias, in the compute dtype; cuDNN gives its gradient.

  The backward pass recomputes the bias (two matmuls and a skew) and cuDNN's forward rather than keep a
  [batch, heads, L, L] array per layer. With cuDNN's own dropout (`dropout_rate` > 0) the bias is kept: a
  forward run again would draw another mask than the one its backward pass regenerates.
  """

  def attend(q, k, v, mask, key_rows, query_rows):
    relative = relative_terms(q, k, key_rows, query_rows)
    bias = (
      None
      if relative is None
      else layers.constrain((relative / scale.astype(relative.dtype)).astype(q.dtype), layers.SCORES)
    )
    if dropout_rate:
      attention.warn_cudnn_dropout()
      return attention.cudnn_dropout_attention(q, k, v, mask, float(scale), dropout_rate, bias)
    return attention.cudnn_attention(q, k, v, mask, float(scale), bias)  # a float: cuDNN's config is JSON

  rows = distance_rows(cfg, q.shape[1], pos_key, pos_query)
  if dropout_rate:
    return attend(q, k, v, mask, *rows)
  return jax.checkpoint(attend, policy=jax.checkpoint_policies.nothing_saveable)(q, k, v, mask, *rows)


def xla_attention(cfg: EncoderConfig, q, k, v, mask, scale, pos_key, pos_query, rel_index, deterministic):
  """The reference: full [batch, heads, q, k] scores and a float32 softmax in HBM.

  Call it inside DisentangledAttention (its softmax dropout is that module's child). rel_index: the
  relative rows of a cached block (decoding), whose c2p and p2c are gathered from [.., 2S] tables; None for
  a whole block from position 0 (`relative_terms`).
  """
  take_rows = _take_rows
  # On a CPU a whole block takes its rows from the tables too, cheaper than scoring all 2L - 1 distances:
  # a forward alone by distance (copies only, the same bits); training by one-hot matmuls up to
  # ONE_HOT_MOST_ROWS rows, else by XLA's gathers, whose gradients cost less than the copies' scatter-add.
  if rel_index is None and attention.platform() == "cpu":
    rel_index = relative_position_index(np.arange(q.shape[1]), np.arange(k.shape[1]), cfg)
    if deterministic:
      take_rows = _take_rows_by_distance
    elif 2 * cfg.relative_span <= ONE_HOT_MOST_ROWS:
      take_rows = _take_rows_by_one_hot
  scores = jnp.einsum("bqnd,bknd->bnqk", q, k / scale.astype(k.dtype))
  if rel_index is None:
    relative = relative_terms(q, k, *distance_rows(cfg, q.shape[1], pos_key, pos_query))
    if relative is not None:
      scores = scores + relative / scale.astype(relative.dtype)
  else:
    if pos_key is not None:
      c2p = jnp.einsum("bqnd,rnd->bnqr", q, pos_key)
      scores = scores + take_rows(c2p, rel_index) / scale.astype(c2p.dtype)
    if pos_query is not None:
      if q.shape[1] == 1:  # a decoding step: gather its row's relative queries, not all 2S per key
        p2c = jnp.einsum("bknd,qknd->bnqk", k, pos_query[rel_index])
      else:
        p2c = take_rows(jnp.einsum("bknd,rnd->bnkr", k, pos_query), rel_index.T).swapaxes(-1, -2)
      scores = scores + p2c / scale.astype(p2c.dtype)
  return layers.masked_softmax_attention(
    scores,
    mask,
    v,
    dropout_rate=cfg.attention_probs_dropout_prob,
    deterministic=deterministic,
    dtype=jnp.dtype(cfg.dtype),
  )


class Layer(nn.Module):
  """A post-LN transformer layer, as BERT's; scanned (config.scan_layers), it returns (output, None)."""

  config: EncoderConfig

  @nn.compact
  def __call__(self, x, mask, rel_embeddings, rel_index, deterministic, cache_start=None):
    attention = DisentangledAttention(self.config, name="attention")(
      x, mask, rel_embeddings, rel_index, deterministic, cache_start
    )
    y = layers.post_ln_residuals(self.config, x, attention, deterministic)
    return (y, None) if self.config.scan_layers else y


class DebertaV2(nn.Module):
  """The DeBERTa-v2 encoder: returns the last hidden state [batch, length, hidden]."""

  config: EncoderConfig

  def setup(self):
    cfg = self.config
    self.embeddings = Embeddings(cfg)
    if cfg.relative_attention:
      self.rel_embeddings = layers.embed(
        cfg, 2 * cfg.relative_span, cfg.hidden_size, (None, "embed"), name="rel_embeddings"
      )
      if cfg.layer_norm_rel_embeddings:
        self.rel_norm = layers.LayerNorm(cfg)
    self.layers = layers.layer_stack(Layer, cfg, static_argnums=(5, 6))

  def __call__(
    self,
    input_ids,
    attention_mask=None,
    token_type_ids=None,
    position_ids=None,
    *,
    deterministic: bool = True,
    cache_start=None,
  ):
    """Encodes `input_ids` [batch, length]; returns the last hidden state.

    Args:
      attention_mask: a [batch, key] padding mask or a [batch, query, key] mask (prefix LM). With a 3-D mask
        the embedding output is zeroed where input_ids == pad_token_id. On a GPU a 2-D mask must pad at the
        end of each row wherever cuDNN runs (without relative_attention, and in training with it), as
        `Bert.__call__` says; the other paths read any mask.
      cache_start: incremental decoding, with the 'cache' collection mutable. The tokens are at positions
        cache_start, cache_start + 1, … of a cache as long as attention_mask's last axis ([batch, query,
        cache]); their keys and values are written there, and they attend to every cached position the
        mask allows. The first call creates the cache.
    """
    cfg = self.config
    length = input_ids.shape[-1]
    start = 0 if cache_start is None else cache_start
    if attention_mask is None:
      attention_mask = jnp.ones_like(input_ids)
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    if position_ids is None:
      position_ids = jnp.broadcast_to(start + jnp.arange(length), input_ids.shape)
    padding_mask = attention_mask if attention_mask.ndim == 2 else input_ids != cfg.pad_token_id

    x = self.embeddings(input_ids, token_type_ids, position_ids, padding_mask, deterministic)
    x = layers.constrain(x, layers.HIDDEN)
    mask = layers.expand_mask(attention_mask)
    rel_embeddings = rel_index = None
    if cfg.relative_attention:
      rel_embeddings = self.rel_embeddings.embedding.astype(jnp.dtype(cfg.dtype))
      if cfg.layer_norm_rel_embeddings:
        rel_embeddings = self.rel_norm(rel_embeddings)
      if cache_start is not None:  # the rows of this block's positions (else: static, in relative_terms)
        keys = np.arange(attention_mask.shape[-1])
        rel_index = jax.lax.dynamic_slice_in_dim(
          jnp.asarray(relative_position_index(keys, keys, cfg)), cache_start, length, axis=0
        )
    return layers.apply_layers(self.layers, cfg, x, mask, rel_embeddings, rel_index, deterministic, cache_start)

  def word_embedding_table(self) -> jax.Array:
    return self.embeddings.word_embeddings.embedding

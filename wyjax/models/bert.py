"""BERT, RoBERTa and ELECTRA encoders (absolute positions, token types).

RoBERTa differs only in its position ids: they count non-pad tokens and start after
`pad_token_id` (transformers' `create_position_ids_from_input_ids`). ELECTRA's embeddings may be
narrower than its layers (`embedding_size`): a dense layer with bias projects them (`embeddings_project`).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from wyjax.models import attention, layers
from wyjax.models.config import EncoderConfig


def roberta_position_ids(input_ids, pad_token_id: int):
  not_pad = (input_ids != pad_token_id).astype(jnp.int32)
  return jnp.cumsum(not_pad, axis=-1) * not_pad + pad_token_id


class Embeddings(nn.Module):
  config: EncoderConfig

  def setup(self):
    cfg = self.config
    self.word_embeddings = layers.embed(cfg, cfg.vocab_size, cfg.embed_dim, ("vocab", "embed"), name="word_embeddings")
    self.position_embeddings = layers.embed(
      cfg, cfg.max_position_embeddings, cfg.embed_dim, (None, "embed"), name="position_embeddings"
    )
    if cfg.type_vocab_size > 0:
      self.token_type_embeddings = layers.embed(
        cfg, cfg.type_vocab_size, cfg.embed_dim, (None, "embed"), name="token_type_embeddings"
      )
    self.norm = layers.LayerNorm(cfg)
    self.dropout = layers.Dropout(cfg.hidden_dropout_prob)

  def __call__(self, input_ids, token_type_ids, position_ids, deterministic):
    x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
    if self.config.type_vocab_size > 0:
      x = x + self.token_type_embeddings(token_type_ids)
    return self.dropout(self.norm(x), deterministic=deterministic)


class SelfAttention(nn.Module):
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, mask, deterministic, cache_start=None):
    cfg = self.config
    heads = (cfg.num_attention_heads, cfg.head_dim)
    qkv_axes = ("embed", "heads", "kv")
    q = layers.dense(cfg, heads, qkv_axes, name="query")(x)
    k = layers.dense(cfg, heads, qkv_axes, name="key")(x)
    v = layers.dense(cfg, heads, qkv_axes, name="value")(x)
    q, k, v = (layers.constrain(t, layers.PER_HEAD) for t in (q, k, v))
    if cache_start is not None:
      k, v = layers.cached_keys_values(self, k, v, cache_start, mask.shape[-1])
    dropout = not deterministic and cfg.attention_probs_dropout_prob > 0
    how = (
      "xla"
      if cache_start is not None
      else attention.implementation(
        cfg.attention,
        relative=False,
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
        scale=cfg.head_dim**0.5,
        dropout_rate=cfg.attention_probs_dropout_prob if dropout else 0.0,
        seed=attention.dropout_seed(self) if dropout else None,
      )
    elif how == "cudnn":
      context = attention.cudnn_attention(q, k, v, mask, cfg.head_dim**0.5)
    elif how == "cudnn_dropout":
      attention.warn_cudnn_dropout()
      context = attention.cudnn_dropout_attention(q, k, v, mask, cfg.head_dim**0.5, cfg.attention_probs_dropout_prob)
    else:
      scores = jnp.einsum("bqnd,bknd->bnqk", q * cfg.head_dim**-0.5, k)
      context = layers.masked_softmax_attention(
        scores,
        mask,
        v,
        dropout_rate=cfg.attention_probs_dropout_prob,
        deterministic=deterministic,
        dtype=jnp.dtype(cfg.dtype),
      )
    return layers.dense(cfg, cfg.hidden_size, ("heads", "kv", "embed"), axis=(-2, -1), name="out")(context)


class Layer(nn.Module):
  """One post-LN transformer layer; scanned (config.scan_layers), it returns (output, None)."""

  config: EncoderConfig

  @nn.compact
  def __call__(self, x, mask, deterministic, cache_start=None):
    attention = SelfAttention(self.config, name="attention")(x, mask, deterministic, cache_start)
    y = layers.post_ln_residuals(self.config, x, attention, deterministic)
    return (y, None) if self.config.scan_layers else y


class Bert(nn.Module):
  """BERT, RoBERTa or ELECTRA (by `config.model_type`); returns the last hidden state."""

  config: EncoderConfig

  def setup(self):
    cfg = self.config
    self.embeddings = Embeddings(cfg)
    if cfg.embed_dim != cfg.hidden_size:
      self.embeddings_project = layers.dense(cfg, cfg.hidden_size, (None, "embed"), name="embeddings_project")
    self.layers = layers.layer_stack(Layer, self.config, static_argnums=(3, 4))

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
      attention_mask: a [batch, key] padding mask or a [batch, query, key] mask (prefix LM). A 2-D mask must
        hold each row's real tokens first, as wyjax's batches do: on a GPU where cuDNN serves
        (`attention.cudnn_serves`), it reaches cuDNN as each row's count of real tokens, unchecked, so a row
        padded at the start or with holes would attend the wrong keys. Pass such a mask as [batch, query, key]
        (broadcast over the queries), or use attention="xla": the XLA path and the kernels read any mask.
      cache_start: incremental decoding, as in `DebertaV2.__call__`.
    """
    cfg = self.config
    if attention_mask is None:
      attention_mask = jnp.ones_like(input_ids)
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    if position_ids is None:
      if cfg.model_type == "roberta":
        if cache_start is not None:
          raise ValueError("RoBERTa counts positions over the whole sequence: pass position_ids when decoding")
        position_ids = roberta_position_ids(input_ids, cfg.pad_token_id)
      else:
        start = 0 if cache_start is None else cache_start
        position_ids = jnp.broadcast_to(start + jnp.arange(input_ids.shape[-1]), input_ids.shape)
    x = self.embeddings(input_ids, token_type_ids, position_ids, deterministic)
    if cfg.embed_dim != cfg.hidden_size:
      x = self.embeddings_project(x)
    x = layers.constrain(x, layers.HIDDEN)
    return layers.apply_layers(self.layers, cfg, x, layers.expand_mask(attention_mask), deterministic, cache_start)

  def word_embedding_table(self) -> jax.Array:
    return self.embeddings.word_embeddings.embedding

"""Heads that sit on an encoder: the MLM head, ELECTRA's discriminator, the pooler and the fine-tuning tasks' heads."""

import flax.linen as nn
import jax.numpy as jnp

from wyjax.models import layers
from wyjax.models.bert import Bert
from wyjax.models.config import EncoderConfig
from wyjax.models.deberta_v2 import DebertaV2

ABSENT = -1e9  # the logit of a choice or position that is only padding: never predicted, no loss


def encoder_class(config: EncoderConfig) -> type[nn.Module]:
  """The encoder module of `config.model_type`: DebertaV2, or Bert for BERT, RoBERTa and ELECTRA."""
  return DebertaV2 if config.model_type == "deberta-v2" else Bert


class MlmHead(nn.Module):
  """dense → act → LayerNorm → tied word embeddings + bias.

  One module for all five transformers layouts: DeBERTa-v2 `cls.predictions` (legacy) and
  `lm_predictions.lm_head`, BERT `cls.predictions`, RoBERTa `lm_head` and ELECTRA's generator
  `generator_predictions` (the last two always use exact gelu, whatever hidden_act says).
  """

  config: EncoderConfig

  @nn.compact
  def __call__(self, hidden, word_embeddings):
    cfg = self.config
    act = "gelu" if cfg.model_type in ("roberta", "electra") else cfg.hidden_act
    x = layers.dense(cfg, cfg.embed_dim, ("embed", None), name="dense")(hidden)
    x = layers.LayerNorm(cfg, axis_name=None, name="norm")(layers.activation(act)(x))
    bias = self.param(
      "bias", layers.partitioned(nn.initializers.zeros_init(), ("vocab",)), (cfg.vocab_size,), jnp.float32
    )
    logits = jnp.einsum("bld,vd->blv", x, word_embeddings.astype(x.dtype))
    return logits.astype(jnp.float32) + bias


class MaskedLM(nn.Module):
  """Encoder + tied MLM head; params are {'encoder': ..., 'mlm_head': ...}."""

  config: EncoderConfig

  def setup(self):
    self.encoder = encoder_class(self.config)(self.config)
    self.mlm_head = MlmHead(self.config)

  def __call__(
    self,
    input_ids,
    attention_mask=None,
    token_type_ids=None,
    position_ids=None,
    *,
    deterministic: bool = True,
    predict_positions=None,
    cache_start=None,
  ):
    """Returns logits [batch, length, vocab], or [batch, K, vocab] at predict_positions [batch, K].

    Pretraining scores only the masked positions (the head is the costliest part). cache_start: incremental
    decoding (wyjax.models.prefix_lm).
    """
    hidden = self.encoder(
      input_ids, attention_mask, token_type_ids, position_ids, deterministic=deterministic, cache_start=cache_start
    )
    if predict_positions is not None:
      hidden = jnp.take_along_axis(hidden, predict_positions[..., None], axis=1)
    return self.mlm_head(hidden, self.encoder.word_embedding_table())


class DiscriminatorHead(nn.Module):
  """dense → hidden_act → dense to one logit per token: ELECTRA's `discriminator_predictions`.

  Returns [batch, length] float32 logits that a token was replaced. Params: {'dense', 'dense_prediction'}.
  """

  config: EncoderConfig

  @nn.compact
  def __call__(self, hidden):
    cfg = self.config
    x = layers.dense(cfg, cfg.hidden_size, ("embed", None), name="dense")(hidden)
    x = layers.activation(cfg.hidden_act)(x)
    return layers.dense(cfg, 1, ("embed", None), name="dense_prediction")(x)[..., 0].astype(jnp.float32)


class ReplacedTokenDetector(nn.Module):
  """Encoder + DiscriminatorHead (transformers' ElectraForPreTraining); params are {'encoder', 'rtd_head'}."""

  config: EncoderConfig

  def setup(self):
    self.encoder = encoder_class(self.config)(self.config)
    self.rtd_head = DiscriminatorHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, deterministic: bool = True):
    """Returns each token's logit [batch, length] that it was replaced."""
    hidden = self.encoder(input_ids, attention_mask, token_type_ids, deterministic=deterministic)
    return self.rtd_head(hidden)


class Pooler(nn.Module):
  """First token → dropout → dense → activation.

  BERT's pooler (tanh, no dropout) and DeBERTa's ContextPooler (pooler_hidden_act,
  pooler_dropout) are this module with different arguments.
  """

  config: EncoderConfig
  act: str = "tanh"
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, hidden, *, deterministic: bool = True):
    x = layers.Dropout(self.dropout_rate)(hidden[:, 0], deterministic=deterministic)
    x = layers.dense(self.config, self.config.hidden_size, ("embed", None), name="dense")(x)
    return layers.activation(self.act)(x)


def pooler_activation(config: EncoderConfig) -> str:
  """The pooler's activation: BERT's and RoBERTa's tanh, ELECTRA's gelu, DeBERTa's pooler_hidden_act (hidden_act)."""
  return {"deberta-v2": config.hidden_act, "electra": "gelu"}.get(config.model_type, "tanh")


class SequenceClassifier(nn.Module):
  """Encoder → pooler → dropout → dense: transformers' *ForSequenceClassification (DeBERTa-v2, BERT).

  Params: {'encoder', 'pooler', 'classifier'}.
  """

  config: EncoderConfig
  num_labels: int
  dropout_rate: float | None = None  # None: hidden_dropout_prob (transformers' cls_dropout default)

  def setup(self):
    self.encoder = encoder_class(self.config)(self.config)
    self.pooler = Pooler(self.config, act=pooler_activation(self.config))
    self.classifier = layers.dense(self.config, self.num_labels, ("embed", None), name="classifier")
    self.dropout = layers.Dropout(self.config.hidden_dropout_prob if self.dropout_rate is None else self.dropout_rate)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, deterministic: bool = True):
    hidden = self.encoder(input_ids, attention_mask, token_type_ids, deterministic=deterministic)
    pooled = self.pooler(hidden, deterministic=deterministic)
    return self.classifier(self.dropout(pooled, deterministic=deterministic)).astype(jnp.float32)


class MultipleChoice(nn.Module):
  """[batch, choices, length] → one score per choice, by a one-label SequenceClassifier (*ForMultipleChoice).

  With labels_per_choice > 1: [batch, choices, labels_per_choice] logits (CCPM's Cls: match / no match per
  pair). A row of padding only is no choice (C3's questions have 2 to 4): its score is ABSENT.
  Params: {'scorer': {'encoder', 'pooler', 'classifier'}}.
  """

  config: EncoderConfig
  labels_per_choice: int = 1

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, deterministic: bool = True):
    batch, choices, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * choices, length)
    scores = SequenceClassifier(self.config, self.labels_per_choice, name="scorer")(
      flat(input_ids), flat(attention_mask), flat(token_type_ids), deterministic=deterministic
    )
    if self.labels_per_choice > 1:
      return scores.reshape(batch, choices, -1)
    scores = scores.reshape(batch, choices)
    if attention_mask is None:
      return scores
    return jnp.where(attention_mask.any(-1), scores, ABSENT)  # an all-padding row: no choice there


class CosineMatch(nn.Module):
  """CCPM's Match model: [batch, 1 + candidates, length] → [batch, candidates] cosine scores.

  The query (row 0) and the candidates (rows 1..) are encoded separately, each mean-pooled over its tokens;
  a candidate's score is its cosine similarity with the query times `scale` (the softmax temperature:
  cosines alone span only [-1, 1]). With two_encoders, the candidates have their own encoder (both start
  from the pretrained one). Params: {'encoder'} (and 'candidate_encoder').
  """

  config: EncoderConfig
  scale: float = 20.0
  two_encoders: bool = False

  def _pooled(self, encoder, input_ids, attention_mask, deterministic):
    """Unit-length mean of the last layer over each row's tokens: [n, length] → [n, hidden]."""
    hidden = encoder(input_ids, attention_mask, deterministic=deterministic).astype(jnp.float32)
    weights = attention_mask.astype(jnp.float32)
    pooled = jnp.einsum("nl,nld->nd", weights, hidden) / jnp.maximum(weights.sum(-1, keepdims=True), 1.0)
    return pooled / jnp.maximum(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-6)

  @nn.compact
  def __call__(self, input_ids, attention_mask, token_type_ids=None, *, deterministic: bool = True):
    batch, rows, length = input_ids.shape
    encoder = encoder_class(self.config)(self.config, name="encoder")
    if self.two_encoders:
      query = self._pooled(encoder, input_ids[:, 0], attention_mask[:, 0], deterministic)
      candidate_encoder = encoder_class(self.config)(self.config, name="candidate_encoder")
      flat = lambda x: x[:, 1:].reshape(batch * (rows - 1), length)
      candidates = self._pooled(candidate_encoder, flat(input_ids), flat(attention_mask), deterministic)
      candidates = candidates.reshape(batch, rows - 1, -1)
    else:
      flat = lambda x: x.reshape(batch * rows, length)
      pooled = self._pooled(encoder, flat(input_ids), flat(attention_mask), deterministic).reshape(batch, rows, -1)
      query, candidates = pooled[:, 0], pooled[:, 1:]
    return self.scale * jnp.einsum("bd,bkd->bk", query, candidates)


class TokenClassifier(nn.Module):
  """Encoder → dropout → dense per token (transformers' *ForTokenClassification).

  Params: {'encoder', 'classifier'}.
  """

  config: EncoderConfig
  num_labels: int

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, deterministic: bool = True):
    hidden = encoder_class(self.config)(self.config, name="encoder")(
      input_ids, attention_mask, token_type_ids, deterministic=deterministic
    )
    hidden = layers.Dropout(self.config.hidden_dropout_prob)(hidden, deterministic=deterministic)
    return layers.dense(self.config, self.num_labels, ("embed", None), name="classifier")(hidden).astype(jnp.float32)


class SpanExtractor(nn.Module):
  """Extractive reading comprehension: [batch, windows, length] → start and end logits [batch, windows, 2, length].

  transformers' *ForQuestionAnswering, per window; padding positions score ABSENT.
  Params: {'encoder', 'qa_outputs'}.
  """

  config: EncoderConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, deterministic: bool = True):
    batch, windows, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * windows, length)
    hidden = encoder_class(self.config)(self.config, name="encoder")(
      flat(input_ids), flat(attention_mask), flat(token_type_ids), deterministic=deterministic
    )
    logits = layers.dense(self.config, 2, ("embed", None), name="qa_outputs")(hidden).astype(jnp.float32)
    logits = logits.reshape(batch, windows, length, 2).swapaxes(-1, -2)
    if attention_mask is None:
      return logits
    return jnp.where(attention_mask[:, :, None, :].astype(bool), logits, ABSENT)


class SpanPairClassifier(nn.Module):
  """XuCi's siamese head: both sentences [batch, 2, length] through the encoder in one pass → logits.

  u and v are the mean last-layer vectors over each sentence's target word (span_mask);
  [u; v; |u − v|] → dropout → dense without bias. Params: {'encoder', 'classifier'}.
  """

  config: EncoderConfig
  num_labels: int = 2

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, span_mask, deterministic: bool = True):
    batch, sentences, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * sentences, length)
    hidden = encoder_class(self.config)(self.config, name="encoder")(
      flat(input_ids), flat(attention_mask), flat(token_type_ids), deterministic=deterministic
    )
    hidden = hidden.reshape(batch, sentences, length, -1).astype(jnp.float32)
    weights = span_mask / jnp.maximum(span_mask.sum(-1, keepdims=True), 1.0)
    u, v = jnp.unstack(jnp.einsum("bsl,bsld->bsd", weights, hidden), axis=1)
    x = layers.Dropout(self.config.hidden_dropout_prob)(
      jnp.concatenate([u, v, jnp.abs(u - v)], -1), deterministic=deterministic
    )
    return layers.dense(self.config, self.num_labels, (None, None), use_bias=False, name="classifier")(x)

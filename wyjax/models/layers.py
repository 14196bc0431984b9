"""Pieces both encoder families share: partitioned Dense/Embed/LayerNorm, the
feed-forward block and masked softmax attention.

Every parameter carries logical axis names (`vocab`, `embed`, `heads`, `kv`, `mlp`);
`wyjax.train.partitioning` maps them onto the (data, fsdp, tensor) mesh.
"""
import functools
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from wyjax.models.config import EncoderConfig

# transformers' ACT2FN names. "gelu" is the exact erf form; flax defaults to tanh.
ACTIVATIONS = {
    "gelu": functools.partial(nn.gelu, approximate=False),
    "gelu_new": functools.partial(nn.gelu, approximate=True),
    "gelu_pytorch_tanh": functools.partial(nn.gelu, approximate=True),
    "relu": nn.relu,
    "silu": nn.silu,
    "swish": nn.silu,
    "tanh": jnp.tanh,
}


def activation(name: str):
  if name not in ACTIVATIONS:
    raise ValueError(f"hidden_act {name!r} is not supported; expected one of {sorted(ACTIVATIONS)}")
  return ACTIVATIONS[name]


def _normal(config: EncoderConfig, names: Sequence[str | None]):
  return nn.with_logical_partitioning(nn.initializers.normal(config.initializer_range), names)


def dense(config: EncoderConfig, features, kernel_axes: Sequence[str | None], *, axis=-1,
          use_bias: bool = True, name: str) -> nn.DenseGeneral:
  """A DenseGeneral whose kernel is [in axes..., out axes...] with logical names."""
  out_axes = kernel_axes[-len(features):] if isinstance(features, tuple) else kernel_axes[-1:]
  return nn.DenseGeneral(
      features=features,
      axis=axis,
      use_bias=use_bias,
      dtype=jnp.dtype(config.dtype),
      param_dtype=jnp.float32,
      kernel_init=_normal(config, kernel_axes),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), tuple(out_axes)),
      name=name,
  )


def embed(config: EncoderConfig, num: int, features: int, axes: Sequence[str | None], *,
          name: str) -> nn.Embed:
  return nn.Embed(
      num_embeddings=num,
      features=features,
      dtype=jnp.dtype(config.dtype),
      param_dtype=jnp.float32,
      embedding_init=_normal(config, axes),
      name=name,
  )


REMAT_POLICIES = {"full": None, "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable}


def remat(layer_cls: type[nn.Module], config: EncoderConfig, static_argnums: tuple[int, ...]):
  """`layer_cls` rematerialised as config.remat asks ("none": as it is). The params keep their
  names, so checkpoints and the transformers conversion are the same in every mode.
  static_argnums count `self` as 0: the Python-valued arguments (deterministic, cache_start)."""
  if config.remat == "none":
    return layer_cls
  return nn.remat(layer_cls, policy=REMAT_POLICIES[config.remat], static_argnums=static_argnums)


class LayerNorm(nn.Module):
  """LayerNorm computed in float32 whatever the activation dtype; output in that dtype."""
  config: EncoderConfig
  axis_name: str | None = "embed"

  @nn.compact
  def __call__(self, x):
    features = x.shape[-1]
    axes = (self.axis_name,)
    scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones_init(), axes),
                       (features,), jnp.float32)
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros_init(), axes),
                      (features,), jnp.float32)
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + self.config.layer_norm_eps) * scale + bias
    return y.astype(jnp.dtype(self.config.dtype))


class FeedForward(nn.Module):
  """intermediate dense → activation → output dense (transformers' Intermediate + Output)."""
  config: EncoderConfig

  @nn.compact
  def __call__(self, x):
    cfg = self.config
    h = dense(cfg, cfg.intermediate_size, ("embed", "mlp"), name="wi")(x)
    h = activation(cfg.hidden_act)(h)
    return dense(cfg, cfg.hidden_size, ("mlp", "embed"), name="wo")(h)


def post_ln_residuals(config: EncoderConfig, x, attention_output, deterministic: bool):
  """BERT's post-LN layer around an attention output: LN(x + attn), then LN(· + FFN(·)).

  Called inside a layer's compact __call__, so its modules (attention_norm, mlp, mlp_norm)
  are that layer's children.
  """
  dropout = nn.Dropout(config.hidden_dropout_prob)
  x = LayerNorm(config, name="attention_norm")(dropout(attention_output, deterministic=deterministic) + x)
  h = FeedForward(config, name="mlp")(x)
  return LayerNorm(config, name="mlp_norm")(dropout(h, deterministic=deterministic) + x)


def expand_mask(attention_mask: jax.Array) -> jax.Array:
  """A [batch, key] padding mask or a [batch, query, key] mask → boolean [batch, 1, q, k].

  A 2-D mask masks keys only. transformers' DeBERTa also masks padding query rows; those
  rows are padding outputs nobody reads, so the non-pad outputs are identical.
  """
  if attention_mask.ndim == 2:
    return attention_mask[:, None, None, :].astype(bool)
  if attention_mask.ndim == 3:
    return attention_mask[:, None, :, :].astype(bool)
  raise ValueError(f"attention_mask must be [batch, key] or [batch, query, key], got shape {attention_mask.shape}")


def cached_keys_values(module: nn.Module, key, value, start, length: int) -> tuple[jax.Array, jax.Array]:
  """Writes this block's keys and values [batch, block, heads, d] at position `start` of the
  module's 'cache' collection (allocated as zeros of `length` positions on the first call) and
  returns all cached keys and values [batch, length, heads, d]."""
  shape = (key.shape[0], length) + key.shape[2:]
  cached_key = module.variable("cache", "cached_key", jnp.zeros, shape, key.dtype)
  cached_value = module.variable("cache", "cached_value", jnp.zeros, shape, value.dtype)
  cached_key.value = jax.lax.dynamic_update_slice_in_dim(cached_key.value, key, start, axis=1)
  cached_value.value = jax.lax.dynamic_update_slice_in_dim(cached_value.value, value, start, axis=1)
  return cached_key.value, cached_value.value


def masked_softmax_attention(scores, mask, value, *, dropout_rate: float, deterministic: bool,
                             dtype) -> jax.Array:
  """softmax(scores masked) @ value, with the softmax in float32.

  scores: [batch, heads, q, k]; mask: boolean broadcastable to scores; value: [batch, k, heads, d].
  Returns [batch, q, heads, d].
  """
  scores = scores.astype(jnp.float32)
  scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(scores, axis=-1)
  probs = nn.Dropout(dropout_rate)(probs, deterministic=deterministic)
  return jnp.einsum("bnqk,bknd->bqnd", probs.astype(dtype), value)

"""Pieces both encoder families share: partitioned Dense/Embed/LayerNorm, feed-forward, masked attention.

Every parameter carries logical axis names (`vocab`, `embed`, `heads`, `kv`, `mlp`) and the main activations
`activation_*` ones; `wyjax.core.partitioning` maps both onto the (data, fsdp, tensor) mesh. Without logical
axis rules in context (outside the train steps) the activation constraints do nothing.
"""

import functools
import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.linen import spmd

from wyjax.kernels import attention_common
from wyjax.models.config import EncoderConfig


def gelu(x):
  """The exact GELU as transformers computes it, x Φ(x) with Φ(x) = (1 + erf(x / √2)) / 2."""
  # On a CPU jax.nn.gelu, whose erfc XLA:CPU leaves out of its YNNPACK fusions: with erf in them, those
  # materialised every broadcast they read (an evaluation step's memory nearly doubled, no faster).
  return jax.lax.platform_dependent(x, cpu=functools.partial(nn.gelu, approximate=False), default=_erf_gelu)


@jax.custom_vjp
def _erf_gelu(x):
  """x Φ(x) computed in float32 by erf, with the derivative Φ(x) + x φ(x) by a plain exp.

  XLA emits erf as a short polynomial, where jax.nn.gelu's erfc(-x / √2) expands to a hundred operations
  per element, and erf's own derivative takes an exp(-x²) accurate to the last bit.
  """
  return _gelu_forward(x)[0]


def _gelu_forward(x):
  x32 = x.astype(jnp.float32)
  return (x32 * _normal_cdf(x32)).astype(x.dtype), x


def _gelu_backward(x, grad):
  x32 = x.astype(jnp.float32)
  density = jnp.exp(-0.5 * x32 * x32) * np.float32(1 / math.sqrt(2 * math.pi))
  return ((grad.astype(jnp.float32) * (_normal_cdf(x32) + x32 * density)).astype(x.dtype),)


def _normal_cdf(x32):
  return 0.5 * (1 + jax.lax.erf(x32 * np.float32(math.sqrt(0.5))))


_erf_gelu.defvjp(_gelu_forward, _gelu_backward)


# transformers' ACT2FN names. "gelu" is the exact erf form; flax defaults to tanh.
ACTIVATIONS = {
  "gelu": gelu,
  "gelu_new": functools.partial(nn.gelu, approximate=True),
  "gelu_pytorch_tanh": functools.partial(nn.gelu, approximate=True),
  "relu": nn.relu,
  "silu": nn.silu,
  "swish": nn.silu,
  "tanh": jnp.tanh,
}


# Logical names of activation axes, for `constrain`.
HIDDEN = ("activation_batch", "activation_length", "activation_embed")  # [batch, length, hidden]
PER_HEAD = ("activation_batch", "activation_length", "activation_heads", "activation_kv")  # q, k, v, context
SCORES = ("activation_batch", "activation_heads", "activation_length", None)  # [batch, heads, query, key]
MLP = ("activation_batch", "activation_length", "activation_mlp")  # the feed-forward's intermediate


def constrain(x, names: tuple[str | None, ...]):
  """x constrained to the mesh axes the logical axis rules give `names`.

  Not at all when a name has no rule, or outside the train steps (no rules or mesh in context).
  """
  return nn.with_logical_constraint(x, names, fallback=spmd.RulesFallback.NO_CONSTRAINT)


def activation(name: str):
  """The activation function of transformers' name `name` (ACTIVATIONS); raises ValueError for others."""
  if name not in ACTIVATIONS:
    raise ValueError(f"hidden_act {name!r} is not supported; expected one of {sorted(ACTIVATIONS)}")
  return ACTIVATIONS[name]


def partitioned(init, names: Sequence[str | None]):
  """init, its params named by logical axes; the params' shardings are wyjax.core.partitioning's."""
  # rules=(): flax never constrains a param as it unboxes it (inside the train steps, it would constrain
  # DenseGeneral's flat [in, out] kernel by the names of its [in, heads, kv] shape).
  return nn.with_logical_partitioning(init, names, rules=())


def _normal(config: EncoderConfig, names: Sequence[str | None]):
  return partitioned(nn.initializers.normal(config.initializer_range), names)


def dense(
  config: EncoderConfig, features, kernel_axes: Sequence[str | None], *, axis=-1, use_bias: bool = True, name: str
) -> nn.DenseGeneral:
  """A DenseGeneral whose kernel is [in axes..., out axes...] with logical names."""
  out_axes = kernel_axes[-len(features) :] if isinstance(features, tuple) else kernel_axes[-1:]
  return nn.DenseGeneral(
    features=features,
    axis=axis,
    use_bias=use_bias,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    kernel_init=_normal(config, kernel_axes),
    bias_init=partitioned(nn.initializers.zeros_init(), tuple(out_axes)),
    name=name,
  )


def take(table, ids, dtype):
  """table[ids] in `dtype`, as nn.Embed looks rows up: the table cast, its rows gathered.

  The gradient scatter-adds one row per token into the table: on a GPU by `_summed_sorted`, on a CPU or TPU
  by autodiff.
  """
  # autodiff's scatter-add in bf16, token by token, was the costliest kernel of DeBERTa-base's step on an
  # H200 (docs/history/gpu_speed.md), its atomic adds queued on the rows thousands of tokens share ([MASK]).
  return jax.lax.platform_dependent(
    table, ids, cuda=functools.partial(_summed_sorted, dtype), default=functools.partial(_take, dtype)
  )


def _take(dtype, table, ids):
  return jnp.take(table.astype(dtype), ids, axis=0)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _summed_sorted(dtype, table, ids):
  """`_take`, whose gradient sums each id's rows in the table's float32, the ids sorted.

  XLA's scatter then adds each run of equal ids in registers and writes it once (indices_are_sorted).
  """
  return _take(dtype, table, ids)


def _summed_sorted_forward(dtype, table, ids):
  return _take(dtype, table, ids), (table, ids)


def _summed_sorted_backward(dtype, residuals, grad):
  table, ids = residuals

  def summed(ids, grad):
    ids = ids.reshape(-1)
    sorted_ids, order = jax.lax.sort_key_val(ids, jnp.arange(ids.size, dtype=ids.dtype))
    rows = grad.reshape(ids.size, -1)[order].astype(table.dtype)
    return jnp.zeros(table.shape, table.dtype).at[sorted_ids].add(rows, indices_are_sorted=True, mode="drop")

  mesh = jax.sharding.get_abstract_mesh()
  batch_axes = None if mesh.empty else nn.logical_to_mesh_axes(("activation_batch",))[0]
  batch_axes = (batch_axes,) if isinstance(batch_axes, str) else tuple(batch_axes or ())
  if not batch_axes or ids.shape[0] % math.prod(mesh.shape[axis] for axis in batch_axes):
    return summed(ids, grad), None  # no mesh, or rows that do not split evenly (a small micro-batch)
  # The train steps (a mesh in context): each device sums its own batch rows, then the sums add up
  # (one sort of every device's tokens would gather all their gradient rows to each device).
  batch = jax.sharding.PartitionSpec(batch_axes)
  per_device = jax.shard_map(
    lambda ids, grad: jax.lax.psum(summed(ids, grad), batch_axes),
    mesh=mesh,
    in_specs=(batch, batch),
    out_specs=jax.sharding.PartitionSpec(),
  )
  return per_device(ids, grad), None


_summed_sorted.defvjp(_summed_sorted_forward, _summed_sorted_backward)


class Embed(nn.Embed):
  """nn.Embed whose lookup is `take`."""

  def __call__(self, inputs):
    if self.num_embeddings == 1:  # flax's broadcast: no gather
      return super().__call__(inputs)
    return take(self.embedding, inputs, jnp.dtype(self.dtype))


def embed(config: EncoderConfig, num: int, features: int, axes: Sequence[str | None], *, name: str) -> Embed:
  """An Embed of `num` rows of `features`, its table named by the logical `axes`."""
  return Embed(
    num_embeddings=num,
    features=features,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    embedding_init=_normal(config, axes),
    name=name,
  )


REMAT_POLICIES = {"full": None, "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable}


def remat(layer_cls: type[nn.Module], config: EncoderConfig, static_argnums: tuple[int, ...]):
  """`layer_cls` rematerialised as config.remat asks ("none": as it is); the params keep their names.

  static_argnums count `self` as 0: the Python-valued arguments (deterministic, cache_start).
  """
  if config.remat == "none":
    return layer_cls
  # Inside a loop, XLA cannot merge the recomputation into the forward pass: no CSE barrier needed.
  in_a_loop = config.scan_layers and config.scan_unroll < config.num_hidden_layers
  return nn.remat(
    layer_cls, policy=REMAT_POLICIES[config.remat], static_argnums=static_argnums, prevent_cse=not in_a_loop
  )


def layer_stack(layer_cls: type[nn.Module], config: EncoderConfig, static_argnums: tuple[int, ...]):
  """The encoder's layers, rematerialised as config.remat asks; create them in setup, run by `apply_layers`.

  Modules `layer_<i>`, or with config.scan_layers one module `layers` run by nn.scan (config.scan_unroll
  layers per loop iteration), whose params are stacked on a leading axis (logical name "layers"). Scanned,
  every argument but the input is the same in each layer (broadcast), dropout draws differ per layer, and
  the decoding cache is stacked on axis 1 so that its batch axis stays first.
  """
  layer_cls = remat(layer_cls, config, static_argnums)
  if not config.scan_layers:
    return [layer_cls(config, name=f"layer_{i}") for i in range(config.num_hidden_layers)]
  return nn.scan(
    layer_cls,
    variable_axes={"params": 0, "cache": 1},
    split_rngs={"params": True, "dropout": True},
    in_axes=nn.broadcast,
    length=config.num_hidden_layers,
    unroll=config.scan_unroll,
    metadata_params={nn.PARTITION_NAME: "layers"},
  )(config, name="layers")


def apply_layers(stack, config: EncoderConfig, x, *args):
  """x through the layers of `layer_stack` (a scanned one returns nn.scan's carry and no per-layer output)."""
  if config.scan_layers:
    return stack(x, *args)[0]
  for layer in stack:
    x = layer(x, *args)
  return x


def stack_layers(encoder_params: dict) -> dict:
  """Encoder params with `layer_0` … `layer_<n-1>` → the scan_layers layout (numpy).

  One `layers` tree, each leaf the n layers' arrays stacked on a new leading axis.
  """
  names = sorted((k for k in encoder_params if k.startswith("layer_")), key=lambda k: int(k[len("layer_") :]))
  rest = {k: v for k, v in encoder_params.items() if k not in names}
  return {**rest, "layers": jax.tree_util.tree_map(lambda *xs: np.stack(xs), *(encoder_params[k] for k in names))}


def unstack_layers(encoder_params: dict) -> dict:
  """The inverse of `stack_layers`: `layers` → `layer_0` … `layer_<n-1>` (numpy)."""
  rest = {k: v for k, v in encoder_params.items() if k != "layers"}
  count = jax.tree_util.tree_leaves(encoder_params["layers"])[0].shape[0]
  return {
    **rest,
    **{
      f"layer_{i}": jax.tree_util.tree_map(lambda x: np.asarray(x[i]), encoder_params["layers"]) for i in range(count)
    },
  }


class LayerNorm(nn.Module):
  """LayerNorm computed in float32 whatever the activation dtype; output in that dtype."""

  config: EncoderConfig
  axis_name: str | None = "embed"

  @nn.compact
  def __call__(self, x):
    features = x.shape[-1]
    axes = (self.axis_name,)
    scale = self.param("scale", partitioned(nn.initializers.ones_init(), axes), (features,), jnp.float32)
    bias = self.param("bias", partitioned(nn.initializers.zeros_init(), axes), (features,), jnp.float32)
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
    h = constrain(activation(cfg.hidden_act)(h), MLP)
    return dense(cfg, cfg.hidden_size, ("mlp", "embed"), name="wo")(h)


def post_ln_residuals(config: EncoderConfig, x, attention_output, deterministic: bool):
  """BERT's post-LN layer around an attention output: LN(x + attn), then LN(· + FFN(·)).

  Called inside a layer's compact __call__, so its modules (attention_norm, mlp, mlp_norm)
  are that layer's children.
  """
  dropout = Dropout(config.hidden_dropout_prob)
  attention_output = constrain(attention_output, HIDDEN)
  x = LayerNorm(config, name="attention_norm")(dropout(attention_output, deterministic=deterministic) + x)
  h = FeedForward(config, name="mlp")(x)
  y = LayerNorm(config, name="mlp_norm")(dropout(h, deterministic=deterministic) + x)
  return constrain(y, HIDDEN)


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
  """Writes this block's keys and values [batch, block, heads, d] into the 'cache' collection at `start`.

  The cache holds `length` positions, zeros at the first call. Returns all cached keys and values
  [batch, length, heads, d].
  """
  shape = (key.shape[0], length) + key.shape[2:]
  cached_key = module.variable("cache", "cached_key", jnp.zeros, shape, key.dtype)
  cached_value = module.variable("cache", "cached_value", jnp.zeros, shape, value.dtype)
  cached_key.value = jax.lax.dynamic_update_slice_in_dim(cached_key.value, key, start, axis=1)
  cached_value.value = jax.lax.dynamic_update_slice_in_dim(cached_value.value, value, start, axis=1)
  return cached_key.value, cached_value.value


def masked_softmax_attention(scores, mask, value, *, dropout_rate: float, deterministic: bool, dtype) -> jax.Array:
  """softmax(scores masked) @ value, with the softmax in float32.

  scores: [batch, heads, q, k]; mask: boolean broadcastable to scores; value: [batch, k, heads, d].
  Returns [batch, q, heads, d].
  """
  scores = constrain(scores.astype(jnp.float32), SCORES)
  scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(scores, axis=-1)
  probs = Dropout(dropout_rate)(probs, deterministic=deterministic)
  return constrain(jnp.einsum("bnqk,bknd->bqnd", probs.astype(dtype), value), PER_HEAD)


def keep_mask(rng: jax.Array, shape: tuple[int, ...], threshold: int) -> jax.Array:
  """Booleans of `shape`, each True with probability threshold / 2^16, hashed from `rng`.

  Each entry is a 16-bit half of a counter's word hashed with rng's two words (murmur3's finaliser after
  each): a few integer ops that XLA fuses into the mask's consumer, where jax.random spends a threefry
  block on every entry. Counters are built per axis, so a sharded mask is drawn where it lives.
  """
  *lead, last = shape
  half = -(-last // 2)
  words_shape = (*lead, half)
  if math.prod(words_shape) >= 2**32:
    raise ValueError(f"a dropout mask of shape {shape} needs more than 2^32 counters")
  strides = np.cumprod((1, *words_shape[:0:-1]))[::-1]
  counter = sum(
    jax.lax.broadcasted_iota(jnp.int32, words_shape, axis) * np.uint32(stride).astype(np.int32)
    for axis, stride in enumerate(strides)
  )
  key = jax.lax.bitcast_convert_type(jax.random.key_data(rng), jnp.int32)  # the key's two words
  word = attention_common.mix(attention_common.mix(counter ^ key[0]) ^ key[1])
  halves = (word & 0xFFFF, jax.lax.shift_right_logical(word, 16))
  return jnp.concatenate([h < threshold for h in halves], -1)[..., :last]


class Dropout(nn.Module):
  """nn.Dropout with its mask from `keep_mask`.

  An entry is kept with probability round(2^16 (1 - rate)) / 2^16, within 2^-17 of 1 - rate, and scaled by
  its inverse.
  """

  rate: float

  @nn.compact
  def __call__(self, x, deterministic: bool):
    if deterministic or self.rate == 0.0:
      return x
    threshold = round(65536 * (1.0 - self.rate))
    keep = keep_mask(self.make_rng("dropout"), x.shape, threshold)
    return jnp.where(keep, x * (65536 / max(threshold, 1)), 0.0).astype(x.dtype)

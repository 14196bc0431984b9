"""The params of replaced-token detection's pair, a generator and a discriminator: their layout and their parts.

{"generator": MaskedLM params, "discriminator": ReplacedTokenDetector params, and for "gdes"
"embedding_delta"}. With "shared" or "gdes" embedding sharing the discriminator stores no word-embedding
table of its own: `discriminator_view` builds it from the generator's (in a train step),
`merged_discriminator` for what reads the discriminator as one model (export, probes, fine-tuning).
wyjax.train.replaced_tokens trains the pair; wyjax.hf.loading reads a run's pair as either model.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from wyjax.models.config import EncoderConfig

SHARINGS = ("gdes", "shared", "separate")
TABLE = ("encoder", "embeddings", "word_embeddings", "embedding")  # the word-embedding table's path in params


def _heads(hidden_size: int) -> int:
  """ELECTRA's heads for a width (hidden/64), made a divisor of it: the largest divisor at most that."""
  target = max(1, round(hidden_size / 64))
  return max(h for h in range(1, target + 1) if hidden_size % h == 0)


def generator_config(discriminator_config: EncoderConfig, rtd_config) -> EncoderConfig:
  """The generator's encoder: fewer layers, perhaps narrower, the discriminator's vocabulary and embedding width.

  A narrower generator reads the shared table through an embedding projection (embedding_size); its heads
  are hidden/64 and its feed-forward 4 × hidden, as ELECTRA's.
  """
  depth = rtd_config.generator_layers or max(1, discriminator_config.num_hidden_layers // 2)
  width = rtd_config.generator_hidden_size or discriminator_config.hidden_size
  if depth < 0 or width < 0:
    raise ValueError(
      f"config.rtd.generator_layers is {depth} and config.rtd.generator_hidden_size {width}; "
      "each must be 0 (the default) or positive"
    )
  if width == discriminator_config.hidden_size:
    return discriminator_config.replace(num_hidden_layers=depth)
  embed_dim = discriminator_config.embed_dim
  return discriminator_config.replace(
    num_hidden_layers=depth,
    hidden_size=width,
    num_attention_heads=_heads(width),
    intermediate_size=4 * width,
    embedding_size=None if embed_dim == width else embed_dim,
  )


def get(tree, path):
  for key in path:
    tree = tree[key]
  return tree


def with_leaf(tree, path, value):
  """`tree` with the leaf at `path` set to `value` (or removed when value is None); `tree` is not changed."""
  if len(path) == 1:
    rest = {k: v for k, v in tree.items() if k != path[0]}
    return rest if value is None else {**rest, path[0]: value}
  return {**tree, path[0]: with_leaf(tree[path[0]], path[1:], value)}


def stored(params: dict, sharing: str) -> dict:
  """A pair whose discriminator holds its own table, stored as `sharing` keeps it."""
  if sharing == "separate":
    return params
  stored = {**params, "discriminator": with_leaf(params["discriminator"], TABLE, None)}
  if sharing == "gdes":
    table = get(params["generator"], TABLE)
    boxed = isinstance(table, nn.Partitioned)
    stored["embedding_delta"] = table.replace_boxed(jnp.zeros_like(table.value)) if boxed else jnp.zeros_like(table)
  return stored


def _discriminator(params: dict, sharing: str, combine) -> dict:
  """params["discriminator"] with its word-embedding table: combine(the generator's table, the delta) for "gdes"."""
  if sharing == "separate":
    return params["discriminator"]
  table = get(params["generator"], TABLE)
  if sharing == "gdes":
    table = combine(table, params["embedding_delta"])
  return with_leaf(params["discriminator"], TABLE, table)


def discriminator_view(params: dict, sharing: str) -> dict:
  """The discriminator's params for the step, its table built from the generator's.

  "shared": the generator's table (both losses reach it); "gdes": stop_gradient(the generator's table)
  + embedding_delta (the discriminator's loss reaches only the delta); "separate": its own.
  """
  return _discriminator(params, sharing, lambda table, delta: jax.lax.stop_gradient(table) + delta)


def merged_discriminator(params: dict, sharing: str) -> dict:
  """Plain ReplacedTokenDetector params, the GDES delta merged: for export, probes and fine-tuning.

  Works on numpy arrays (a checkpoint read on the host) as on jax arrays.
  """
  return _discriminator(params, sharing, lambda table, delta: table + delta)


def discriminator_layout(tree: dict, sharing: str) -> dict:
  """The discriminator's part of a tree shaped as the pair's params (shardings, shapes): the generator's table."""
  return _discriminator(tree, sharing, lambda table, delta: table)


def sharing_of(params: dict) -> str:
  """The embedding sharing a pair's params were stored with, read from which tables they hold."""
  if "embedding_delta" in params:
    return "gdes"
  try:
    get(params["discriminator"], TABLE)
  except KeyError:
    return "shared"
  return "separate"


def generator_of(params: dict, discriminator_config: EncoderConfig) -> tuple[EncoderConfig, dict]:
  """The generator's config and MaskedLM params of a pair's params, its depth and width read from them."""
  generator = params["generator"]
  encoder = generator["encoder"]
  if "layers" in encoder:  # stacked: the leading axis
    depth = jax.tree_util.tree_leaves(encoder["layers"])[0].shape[0]
  else:
    depth = sum(name.startswith("layer_") for name in encoder)
  width = generator["mlm_head"]["dense"]["kernel"].shape[0]  # [hidden, embedding]
  sizes = ml_collections.ConfigDict(dict(generator_layers=depth, generator_hidden_size=width))
  return generator_config(discriminator_config, sizes), generator

"""Replaced-token detection (ELECTRA, DeBERTa-v3): a generator trained by MLM, a discriminator over every token.

The pair's params and their parts are wyjax.models.rtd_pair's. Here: the config, the pair's fresh or
continued params, sampled replacements and the losses. Loss sums add across micro-batches and devices;
`total_loss` divides.
"""

import jax
import jax.numpy as jnp
import ml_collections

from wyjax.core import guards
from wyjax.models import EncoderConfig, MaskedLM, ReplacedTokenDetector
from wyjax.models import rtd_pair as pair
from wyjax.train import mlm

GENERATOR_INITS = ("first_layers", "fresh")
# The sums `loss_sums` returns: what micro-batches and devices add before `total_loss` and `metrics` divide.
SUMS = (
  "generator_loss_sum",
  "generator_correct",
  "generator_weight",  # the masked positions scored, each given a sample
  "discriminator_loss_sum",
  "discriminator_correct",
  "tokens",  # non-padding positions, each judged by the discriminator
  "replaced",  # tokens whose sample differs from the original
  "predicted_replaced",
  "true_positives",  # replaced tokens predicted replaced
)


def defaults() -> ml_collections.ConfigDict:
  """config.rtd: the generator's size and start, the discriminator's weight λ and the embedding sharing."""
  return ml_collections.ConfigDict(
    dict(
      generator_layers=0,  # 0: half the discriminator's depth (DeBERTa-v3)
      generator_hidden_size=0,  # 0: the discriminator's width
      discriminator_weight=50.0,  # ELECTRA's λ
      embedding_sharing="gdes",  # one of SHARINGS (config_values checks it)
      generator_init="first_layers",  # one of GENERATOR_INITS
    )
  )


def models(discriminator_config: EncoderConfig, rtd_config) -> tuple[MaskedLM, ReplacedTokenDetector]:
  """The generator and the discriminator modules."""
  return MaskedLM(pair.generator_config(discriminator_config, rtd_config)), ReplacedTokenDetector(discriminator_config)


def init_params(rng, discriminator_config: EncoderConfig, rtd_config) -> dict:
  """Fresh pair params as model.init returns them (leaves boxed with their logical axes: nn.unbox for values).

  For "shared" and "gdes" the discriminator's table is not stored; "gdes" adds a zero embedding_delta.
  """
  generator, discriminator = models(discriminator_config, rtd_config)
  gen_rng, disc_rng = jax.random.split(rng)
  ids = jnp.zeros((1, 8), jnp.int32)
  params = {
    "generator": generator.init(gen_rng, ids, predict_positions=jnp.zeros((1, 1), jnp.int32))["params"],
    "discriminator": discriminator.init(disc_rng, ids)["params"],
  }
  return pair.stored(params, rtd_config.embedding_sharing)


def from_checkpoint(checkpoint: dict, fresh: dict, discriminator_config: EncoderConfig, rtd_config) -> dict:
  """A pair whose discriminator starts from a checkpoint's encoder (a wyjax run's, a transformers folder's).

  checkpoint: {"encoder", and perhaps "rtd_head" (an ELECTRA discriminator's) and "mlm_head"}; fresh:
  init_params's values (unboxed), for what the checkpoint does not hold. The word-embedding table is the
  checkpoint's (the generator's under "shared" and "gdes", the delta zero). With generator_init
  "first_layers" the generator's encoder is the checkpoint's first layers and its MLM head the checkpoint's
  where it has one (a generator as wide as the discriminator only); with "fresh" they are `fresh`'s.

  Raises:
    guards.RunError: "first_layers" for a generator narrower or deeper than the discriminator.
  """
  sharing = rtd_config.embedding_sharing
  discriminator = {
    "encoder": checkpoint["encoder"],
    "rtd_head": checkpoint.get("rtd_head", fresh["discriminator"]["rtd_head"]),
  }
  generator = fresh["generator"]
  if rtd_config.generator_init == "first_layers":
    config = pair.generator_config(discriminator_config, rtd_config)
    if config.hidden_size != discriminator_config.hidden_size:
      raise guards.RunError(
        f"config.rtd.generator_init='first_layers' needs a generator as wide as the discriminator "
        f"({discriminator_config.hidden_size}); config.rtd.generator_hidden_size is {config.hidden_size}: "
        "set config.rtd.generator_init='fresh' or generator_hidden_size=0"
      )
    if config.num_hidden_layers > discriminator_config.num_hidden_layers:
      raise guards.RunError(
        f"config.rtd.generator_init='first_layers' needs a generator no deeper than the discriminator "
        f"({discriminator_config.num_hidden_layers} layers); config.rtd.generator_layers is "
        f"{config.num_hidden_layers}: set config.rtd.generator_init='fresh' or fewer generator_layers"
      )
    generator = {
      "encoder": _first_layers(checkpoint["encoder"], config.num_hidden_layers),
      "mlm_head": checkpoint.get("mlm_head", generator["mlm_head"]),
    }
  if sharing != "separate":
    generator = pair.with_leaf(generator, pair.TABLE, pair.get(checkpoint, pair.TABLE))
  return pair.stored({**fresh, "generator": generator, "discriminator": discriminator}, sharing)


def _first_layers(encoder: dict, depth: int) -> dict:
  """An encoder's params with only its first `depth` layers, in the layout it has (per layer or stacked)."""
  if "layers" in encoder:
    return {**encoder, "layers": jax.tree_util.tree_map(lambda x: x[:depth], encoder["layers"])}
  names = {f"layer_{i}" for i in range(depth)}
  return {k: v for k, v in encoder.items() if not k.startswith("layer_") or k in names}


def detection_sums(logits, labels, mask) -> dict:
  """The discriminator's summed binary cross-entropy and counts over the positions where mask is 1.

  logits, labels and mask are [batch, length]; labels are 1 where a token was replaced.
  """
  logits = logits.astype(jnp.float32)
  labels, mask = labels.astype(jnp.float32), mask.astype(jnp.float32)
  bce = jnp.logaddexp(0.0, logits) - labels * logits
  predicted = (logits > 0).astype(jnp.float32)
  return {
    "discriminator_loss_sum": jnp.sum(bce * mask),
    "discriminator_correct": jnp.sum((predicted == labels) * mask),
    "tokens": jnp.sum(mask),
    "replaced": jnp.sum(labels * mask),
    "predicted_replaced": jnp.sum(predicted * mask),
    "true_positives": jnp.sum(predicted * labels * mask),
  }


def sample(rng, logits) -> jax.Array:
  """One token per position from softmax(logits) [..., vocab], by inverting the cumulative distribution.

  One uniform number per position, where jax.random.categorical's Gumbel-max draws one per vocabulary entry:
  on a CPU those draws were a fifth of the demo's tiny model's step (docs/benchmarks.md).
  """
  cumulative = jnp.cumsum(jax.nn.softmax(logits.astype(jnp.float32), axis=-1), axis=-1)
  uniform = jax.random.uniform(rng, (*logits.shape[:-1], 1)) * cumulative[..., -1:]
  return jnp.minimum(jnp.sum(cumulative <= uniform, axis=-1), logits.shape[-1] - 1)


def loss_sums(
  generator: MaskedLM,
  discriminator: ReplacedTokenDetector,
  params: dict,
  inputs,
  targets,
  weights,
  attention_mask,
  sample_rng,
  *,
  k: int,
  sharing: str,
  dropout_rng=None,
) -> dict:
  """The SUMS of one (micro-)batch: the generator's MLM on the masked positions, the discriminator's on all.

  inputs, targets, weights: mlm.mask_tokens's; the generator scores the first k masked positions of each row
  (mlm.prediction_positions), as the MLM objective does. Replacements are sampled from its distribution there,
  with no gradient through the sampling; a sample equal to the original is original. The discriminator reads
  the original tokens with the samples in place and judges every position where attention_mask is 1.
  dropout_rng None: deterministic (no dropout). Give each micro-batch its own sample_rng and dropout_rng.
  """
  positions, scored = mlm.prediction_positions(weights, k)
  originals = jnp.take_along_axis(targets, positions, axis=-1)
  deterministic = dropout_rng is None
  gen_rngs, disc_rngs = ({}, {}) if deterministic else [{"dropout": r} for r in jax.random.split(dropout_rng)]
  gen_logits = generator.apply(
    {"params": params["generator"]},
    inputs,
    attention_mask,
    predict_positions=positions,
    deterministic=deterministic,
    rngs=gen_rngs,
  )
  gen = mlm.loss_sums(gen_logits, originals, scored)
  samples = sample(sample_rng, jax.lax.stop_gradient(gen_logits))
  samples = jnp.where(scored > 0, samples, originals).astype(targets.dtype)
  rows = jnp.arange(targets.shape[0])[:, None]
  corrupted = targets.at[rows, positions].set(samples)  # prediction_positions' positions are distinct per row
  disc_logits = discriminator.apply(
    {"params": pair.discriminator_view(params, sharing)},
    corrupted,
    attention_mask,
    deterministic=deterministic,
    rngs=disc_rngs,
  )
  disc = detection_sums(disc_logits, corrupted != targets, attention_mask)
  return {
    "generator_loss_sum": gen["loss_sum"],
    "generator_correct": gen["correct"],
    "generator_weight": gen["weight"],
    **disc,
  }


def denominators(weights, attention_mask, k: int) -> dict:
  """The whole batch's scored masked positions and tokens: what `total_loss` divides a micro-batch's sums by."""
  return {
    "generator_weight": jnp.sum(mlm.prediction_positions(weights, k)[1]),
    "tokens": jnp.sum(attention_mask.astype(jnp.float32)),
  }


def total_loss(sums: dict, discriminator_weight: float, denominators: dict | None = None) -> jax.Array:
  """ELECTRA's loss: the generator's mean MLM loss + λ × the discriminator's mean loss per token.

  denominators: the whole batch's (`denominators`), so that micro-batches' losses and gradients add up to the
  batch's; None: the sums' own.
  """
  denominators = sums if denominators is None else denominators
  generator = sums["generator_loss_sum"] / jnp.maximum(denominators["generator_weight"], 1.0)
  return generator + discriminator_weight * sums["discriminator_loss_sum"] / jnp.maximum(denominators["tokens"], 1.0)


def metrics(sums: dict) -> dict:
  """Means of the sums: the generator's MLM loss and accuracy, the discriminator's loss, accuracy, precision and recall.

  replaced_fraction: the share of the scored masked positions whose sample differs from the original.
  """
  ratio = lambda a, b: sums[a] / jnp.maximum(sums[b], 1.0)
  return {
    "generator_loss": ratio("generator_loss_sum", "generator_weight"),
    "generator_accuracy": ratio("generator_correct", "generator_weight"),
    "discriminator_loss": ratio("discriminator_loss_sum", "tokens"),
    "discriminator_accuracy": ratio("discriminator_correct", "tokens"),
    "discriminator_precision": ratio("true_positives", "predicted_replaced"),
    "discriminator_recall": ratio("true_positives", "replaced"),
    "replaced_fraction": ratio("replaced", "generator_weight"),
  }

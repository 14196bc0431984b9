"""Pretraining's objectives, MLM and replaced-token detection: each one's params, pure steps and encoder.

Masking, sampling and dropout randomness is fold_in(seed, step), an evaluation batch's fold_in(seed + 1,
index): a step is deterministic in (seed, step) however the batch is sharded, split or resumed.
"""

import dataclasses
import functools
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import EncoderConfig, MaskedLM, rtd_pair
from wyjax.train import mlm, program
from wyjax.train import replaced_tokens as rtd
from wyjax.train.program import Program


@dataclasses.dataclass(frozen=True)
class Objective:
  """What pretraining by one objective builds on an encoder: its params, its steps and the encoder it makes."""

  init: Callable[[jax.Array], dict]  # rng → the params, boxed with their logical axes
  steps: Callable[[Program], tuple[Callable, Callable]]  # → (train step, evaluation step), not yet jitted
  forward_flops_per_token: float  # the models' forward pass, their heads on the positions they score
  # The encoder the run makes (RTD's discriminator): from the params, and its part of a tree shaped as them.
  encoder_params: Callable[[dict], dict]
  encoder_layout: Callable[[dict], dict]
  from_checkpoint: Callable[[dict, Program], dict]  # continuing.initial_params's parts (host) → params at step 0
  validation_metrics: Callable[[dict], dict]  # an evaluation's summed eval_step outputs → its metrics (valid_loss…)
  head: str  # the head model.json names: the one an export of the encoder keeps


def masked_language_modelling(config, model_config: EncoderConfig, tokenizer, length: int) -> Objective:
  """MLM: the encoder and its head predict the masked tokens."""
  model = MaskedLM(model_config)
  predicted_fraction = mlm.max_predictions(length, config.masking.rate) / length
  encoder = lambda tree: tree["encoder"]
  return Objective(
    init=lambda rng: model.init(rng, jnp.zeros((1, length), jnp.int32))["params"],
    steps=lambda prog: mlm_steps(model, prog, config, tokenizer, length),
    forward_flops_per_token=model_config.forward_flops_per_token(length, predicted_fraction),
    encoder_params=encoder,
    encoder_layout=encoder,
    from_checkpoint=lambda parts, prog: {"encoder": parts["encoder"], "mlm_head": parts["mlm_head"]},
    validation_metrics=mlm_validation_metrics,
    head="mlm_head",
  )


def replaced_token_detection(config, model_config: EncoderConfig, tokenizer, length: int) -> Objective:
  """RTD: a generator learns MLM; the encoder, its discriminator, tells which tokens the generator's samples replaced.

  The FLOPs: the generator's, its MLM head on the scored positions, and the discriminator's over every
  token with its head (H→H→1).
  """
  generator, discriminator = rtd.models(model_config, config.rtd)
  init = functools.partial(rtd.init_params, discriminator_config=model_config, rtd_config=config.rtd)
  sharing = config.rtd.embedding_sharing
  predicted_fraction = mlm.max_predictions(length, config.masking.rate) / length
  generator_config = rtd_pair.generator_config(model_config, config.rtd)
  generator_flops = generator_config.forward_flops_per_token(length, predicted_fraction)
  h = model_config.hidden_size
  discriminator_flops = model_config.forward_flops_per_token(length, predicted_fraction=0) + 2 * h * (h + 1)

  def from_checkpoint(parts, prog):
    fresh_params = jax.jit(lambda key: nn.unbox(init(key)), out_shardings=prog.params_sharding)  # no optimizer
    fresh = jax.device_get(fresh_params(jax.random.key(config.seed)))
    return rtd.from_checkpoint(parts, fresh, model_config, config.rtd)

  return Objective(
    init=init,
    steps=lambda prog: rtd_steps(generator, discriminator, prog, config, tokenizer, length),
    forward_flops_per_token=generator_flops + discriminator_flops,
    encoder_params=lambda params: rtd_pair.merged_discriminator(params, sharing)["encoder"],
    encoder_layout=lambda tree: rtd_pair.discriminator_layout(tree, sharing)["encoder"],
    from_checkpoint=from_checkpoint,
    validation_metrics=functools.partial(rtd_validation_metrics, weight=config.rtd.discriminator_weight),
    head="rtd_head",
  )


OBJECTIVES = {"mlm": masked_language_modelling, "rtd": replaced_token_detection}  # config.objective's values


def masking(config, tokenizer) -> dict:
  """mlm.mask_tokens's arguments but the key and the batch: config.masking over `tokenizer`."""
  return dict(
    mask_id=tokenizer.mask_id,
    vocab_size=len(tokenizer),
    special_ids=(tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.unk_id),
    rate=config.masking.rate,
    max_ngram=config.masking.max_ngram,
    ngram_distribution=config.masking.ngram_distribution,
    mask_prob=config.masking.mask_prob,
    random_prob=config.masking.random_prob,
  )


def _masked(config, tokenizer, rng, batch):
  """(inputs, targets, weights, attention_mask) of a batch masked with `rng`."""
  inputs, targets, weights = mlm.mask_tokens(rng, batch, **masking(config, tokenizer))
  return inputs, targets, weights, (batch != tokenizer.pad_id).astype(jnp.int32)


def mlm_steps(model: MaskedLM, prog: Program, config, tokenizer, length: int):
  """MLM's train step (state, batch) → (state, metrics) and evaluation step (params, batch, index) → loss sums."""
  k = mlm.max_predictions(length, config.masking.rate)

  def predict(params, inputs, targets, weights, attention_mask, **kwargs):
    positions, weights = mlm.prediction_positions(weights, k)
    logits = model.apply({"params": params}, inputs, attention_mask, predict_positions=positions, **kwargs)
    return mlm.loss_sums(logits, jnp.take_along_axis(targets, positions, axis=-1), weights)

  def loss_fn(params, inputs, targets, weights, attention_mask, rng):
    sums = predict(params, inputs, targets, weights, attention_mask, deterministic=False, rngs={"dropout": rng})
    return sums["loss_sum"], sums

  def train_step(state, batch):
    mask_rng, dropout_rng = jax.random.split(jax.random.fold_in(jax.random.key(config.seed), state["step"]))
    masked = _masked(config, tokenizer, mask_rng, batch)
    grad_fn = jax.grad(loss_fn, has_aux=True)
    grads, sums = program.accumulate(grad_fn, state["params"], masked, config.grad_accum_steps, dropout_rng)
    weight = jnp.maximum(sums["weight"], 1.0)
    grads = jax.tree_util.tree_map(lambda g: g / weight, grads)
    new_state, update_metrics = prog.apply_gradients(state, grads, sums["loss_sum"])
    _, _, weights, attention_mask = masked
    return new_state, {
      "loss": sums["loss_sum"] / weight,
      "mlm_accuracy": sums["correct"] / weight,
      "masked_fraction": jnp.sum(weights) / jnp.sum(attention_mask),
      **update_metrics,
    }

  def eval_step(params, batch, index):
    return predict(
      params, *_masked(config, tokenizer, jax.random.fold_in(jax.random.key(config.seed + 1), index), batch)
    )

  return train_step, eval_step


def rtd_steps(generator, discriminator, prog: Program, config, tokenizer, length: int):
  """Replaced-token detection's train step (state, batch) → (state, metrics) and evaluation step → rtd.SUMS.

  The loss is rtd.total_loss over the whole batch's denominators, so that the gradients of its
  micro-batches add up to the batch's.
  """
  k = mlm.max_predictions(length, config.masking.rate)
  sharing, weight = config.rtd.embedding_sharing, config.rtd.discriminator_weight

  def sums_of(params, inputs, targets, weights, attention_mask, rng, *, train: bool):
    sample_rng, dropout_rng = jax.random.split(rng)
    return rtd.loss_sums(
      generator,
      discriminator,
      params,
      inputs,
      targets,
      weights,
      attention_mask,
      sample_rng,
      k=k,
      sharing=sharing,
      dropout_rng=dropout_rng if train else None,
    )

  def train_step(state, batch):
    mask_rng, rng = jax.random.split(jax.random.fold_in(jax.random.key(config.seed), state["step"]))
    masked = _masked(config, tokenizer, mask_rng, batch)
    _, _, weights, attention_mask = masked
    denominators = rtd.denominators(weights, attention_mask, k)

    def loss_fn(params, *micro_batch):
      sums = sums_of(params, *micro_batch, train=True)
      return rtd.total_loss(sums, weight, denominators), sums

    grads, sums = program.accumulate(
      jax.grad(loss_fn, has_aux=True), state["params"], masked, config.grad_accum_steps, rng
    )
    loss = rtd.total_loss(sums, weight)
    new_state, update_metrics = prog.apply_gradients(state, grads, loss)
    return new_state, {
      "loss": loss,
      **rtd.metrics(sums),
      "masked_fraction": jnp.sum(weights) / jnp.sum(attention_mask),
      **update_metrics,
    }

  def eval_step(params, batch, index):
    mask_rng, rng = jax.random.split(jax.random.fold_in(jax.random.key(config.seed + 1), index))
    return sums_of(params, *_masked(config, tokenizer, mask_rng, batch), rng, train=False)

  return train_step, eval_step


def mlm_validation_metrics(totals: dict) -> dict:
  """MLM's evaluation metrics from its batches' summed mlm_steps eval_step outputs."""
  loss = totals["loss_sum"] / max(totals["weight"], 1.0)
  return {
    "valid_loss": loss,
    "valid_accuracy": totals["correct"] / max(totals["weight"], 1.0),
    "valid_perplexity": float(np.exp(loss)),
  }


def rtd_validation_metrics(totals: dict, weight: float) -> dict:
  """RTD's evaluation metrics from its batches' summed rtd_steps eval_step outputs (valid_loss: rtd.total_loss)."""
  loss = rtd.total_loss(totals, weight)
  return {"valid_loss": float(loss), **{f"valid_{k}": float(v) for k, v in rtd.metrics(totals).items()}}

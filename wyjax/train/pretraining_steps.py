"""The pure train and evaluation steps of pretraining's objectives: MLM, and replaced-token detection.

Masking, sampling and dropout randomness is fold_in(seed, step), an evaluation batch's fold_in(seed + 1,
index): a step is deterministic in (seed, step) however the batch is sharded, split or resumed.
"""

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import MaskedLM
from wyjax.train import mlm, program
from wyjax.train import replaced_tokens as rtd
from wyjax.train.program import Program

OBJECTIVES = ("mlm", "rtd")


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


def validation_metrics(config, totals: dict) -> dict:
  """An evaluation's metrics from its batches' summed eval_step outputs (valid_loss: the objective's loss)."""
  if config.objective == "rtd":
    loss = rtd.total_loss(totals, config.rtd.discriminator_weight)
    return {"valid_loss": float(loss), **{f"valid_{k}": float(v) for k, v in rtd.metrics(totals).items()}}
  loss = totals["loss_sum"] / max(totals["weight"], 1.0)
  return {
    "valid_loss": loss,
    "valid_accuracy": totals["correct"] / max(totals["weight"], 1.0),
    "valid_perplexity": float(np.exp(loss)),
  }

"""The pure train and predict steps of a task's model, for TaskModel to jit over the mesh."""

import jax
import jax.numpy as jnp
import optax

from wyjax.tasks.tagging import IGNORE
from wyjax.train import program


def make_steps(prog: program.Program, module, head, pad_id: int):
  """The train step and the prediction step of the task's `module` (its encoder under `head`), trained by `prog`.

  Returns:
    train_step(state, inputs, labels, rng) → (state, metrics): rng is the seed's key; step n (the
      state's step counter + 1) drops out with fold_in(rng, n) inside the step, so the loop neither
      dispatches nor transfers anything for it.
    predict_step(params, inputs) → logits (a generating head's: the argmax token at every position).
  """

  def logits_of(params, inputs, rng=None):
    ids = inputs["input_ids"]
    mask = (ids != pad_id).astype(jnp.int32)
    if head.attention_mask:
      mask = head.attention_mask(inputs["token_type_ids"], mask)
    kwargs = {"span_mask": inputs["span_mask"]} if "span_mask" in inputs else {}
    return module.apply(
      {"params": params},
      ids,
      mask,
      inputs.get("token_type_ids"),
      deterministic=rng is None,
      rngs=None if rng is None else {"dropout": rng},
      **kwargs,
    )

  def train_step(state, inputs, labels, rng):
    rng = jax.random.fold_in(rng, state["step"] + 1)

    def loss_fn(params):
      valid = labels != IGNORE
      losses = optax.softmax_cross_entropy_with_integer_labels(
        logits_of(params, inputs, rng), jnp.where(valid, labels, 0)
      )
      return jnp.sum(losses * valid) / jnp.maximum(jnp.sum(valid), 1)

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    new_state, update_metrics = prog.apply_gradients(state, grads, loss)
    return new_state, {"loss": loss, **update_metrics}

  def predict_step(params, inputs):
    logits = logits_of(params, inputs)
    return jnp.argmax(logits, -1) if head.generates else logits

  return train_step, predict_step

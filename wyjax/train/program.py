"""What pretraining and fine-tuning both compile: a model's sharded train state, optimizer and jitted steps.

The train state is sharded over a named (data, fsdp, tensor) mesh and the steps have explicit
shardings. A loop writes its pure step functions and jits them here, so a run and its
`--compile_only` report compile the same program.
"""

import dataclasses
import functools
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding

from wyjax.core import guards, optimizer, partitioning


@dataclasses.dataclass(frozen=True)
class Program:
  """A model's train state on a mesh: its optimizer, shardings, abstract state and fresh-state program."""

  mesh: Mesh
  logical_rules: tuple  # logical axis names → mesh axes
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  params_sharding: dict
  state_sharding: dict
  abstract_state: dict  # {step, params, opt_state} as ShapeDtypeStructs carrying their shardings
  data_sharding: NamedSharding  # batches: rows over the data and fsdp axes
  replicated: NamedSharding
  init_state: Callable  # jitted rng → a fresh sharded state
  frozen_steps: int = 0  # the first steps train only the params whose path `trainable` accepts
  trainable: Callable[[tuple[str, ...]], bool] | None = None

  def apply_gradients(self, state: dict, grads, loss) -> tuple[dict, dict]:
    """The optimizer's update inside a train step: (state, {grad_norm, learning_rate, finite}).

    Skipped (state kept) when the loss or the gradients' norm is not finite
    (guards.skip_if_not_finite). The norm is reduced once (optimizer.global_norm), for the clip,
    the guard and the metric; in the frozen first steps it leaves out the frozen params' gradients.
    """
    if self.frozen_steps:
      grads = optimizer.without_frozen(grads, state["step"] < self.frozen_steps, self.trainable)
    grad_norm = optimizer.global_norm(grads)
    updates, opt_state = self.tx.update(grads, state["opt_state"], state["params"], grad_norm=grad_norm)
    new_state = {
      "step": state["step"] + 1,
      "params": optax.apply_updates(state["params"], updates),
      "opt_state": opt_state,
    }
    new_state, finite = guards.skip_if_not_finite(state, new_state, loss, grad_norm)
    return new_state, {"grad_norm": grad_norm, "learning_rate": self.schedule(state["step"]), "finite": finite}

  def jit_train(self, step: Callable, *arg_shardings) -> Callable:
    """step(state, *args) → (state, metrics), jitted: the state donated, metrics replicated."""
    return jax.jit(
      partitioning.with_activation_constraints(step, self.mesh, self.logical_rules),
      in_shardings=(self.state_sharding, *arg_shardings),
      out_shardings=(self.state_sharding, self.replicated),
      donate_argnums=(0,),
    )

  def jit_eval(self, step: Callable, *arg_shardings) -> Callable:
    """step(params, *args) → outputs, jitted: outputs replicated."""
    return jax.jit(
      partitioning.with_activation_constraints(step, self.mesh, self.logical_rules),
      in_shardings=(self.params_sharding, *arg_shardings),
      out_shardings=self.replicated,
    )

  def place(self, params) -> dict:
    """A fresh state around host params (fine-tuning's, pretrained parts grafted in), on the mesh."""
    return self._state_around(jax.device_put(params, self.params_sharding))

  @functools.cached_property
  def _state_around(self) -> Callable:
    """params → a fresh state holding them: one program for the step counter and the optimizer state."""

    def fresh_state(params):
      return _state_at_zero(params, self.tx)

    return jax.jit(fresh_state, out_shardings=self.state_sharding, donate_argnums=(0,))


def _state_at_zero(params, tx: optax.GradientTransformation) -> dict:
  """The training state before the first step, holding `params`."""
  return {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": tx.init(params)}


def build(
  init: Callable[[jax.Array], dict],
  config,
  *,
  warmup_steps: int,
  total_steps: int,
  devices=None,
  frozen_steps: int = 0,
  trainable=None,
) -> Program:
  """The program of the params `init` makes over config.mesh of `devices` (default: all of them).

  init: a key → the params as a module's init returns them, boxed with their logical axes (shapes and
  placement come from it: jax.eval_shape, no program). AdamW from config (learning_rate, b1, b2, eps,
  weight_decay, max_grad_norm; optimizer.adamw), training only the params whose path `trainable`
  accepts for the first `frozen_steps`; params and optimizer state are placed by
  config.logical_axis_rules.
  """
  mesh = partitioning.make_mesh(config.mesh.to_dict(), devices)
  logical_rules = partitioning.rules(config.logical_axis_rules)
  tx, schedule = optimizer.adamw(
    learning_rate=config.learning_rate,
    warmup_steps=warmup_steps,
    total_steps=total_steps,
    b1=config.b1,
    b2=config.b2,
    eps=config.eps,
    weight_decay=config.weight_decay,
    max_grad_norm=config.max_grad_norm,
    frozen_steps=frozen_steps,
    trainable=trainable,
  )

  def init_state(rng):
    return _state_at_zero(nn.unbox(init(rng)), tx)

  boxed_params = jax.eval_shape(lambda: init(jax.random.key(0)))
  abstract = jax.eval_shape(lambda: init_state(jax.random.key(0)))  # the key traced: no program
  params_sharding = partitioning.param_shardings(boxed_params, mesh, logical_rules)
  state_sharding = partitioning.state_shardings(abstract, params_sharding, tx, mesh)
  abstract_state = jax.tree_util.tree_map(
    lambda a, sharding: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), abstract, state_sharding
  )
  return Program(
    mesh=mesh,
    logical_rules=logical_rules,
    tx=tx,
    schedule=schedule,
    params_sharding=params_sharding,
    state_sharding=state_sharding,
    abstract_state=abstract_state,
    data_sharding=partitioning.batch_sharding(mesh),
    replicated=partitioning.replicated(mesh),
    init_state=jax.jit(init_state, out_shardings=state_sharding),
    frozen_steps=frozen_steps,
    trainable=trainable,
  )


def accumulate(grad_fn: Callable, params, batch: tuple, steps: int, rng) -> tuple:
  """grad_fn(params, *batch, rng) → (grads, sums) over a batch split into `steps` micro-batches, added up.

  Micro-batch i draws its randomness from fold_in(rng, i); one step is the whole batch with rng itself.
  Whatever grad_fn returns must add across micro-batches (sums, or gradients of whole-batch means).
  """
  if steps == 1:
    return grad_fn(params, *batch, rng)
  micro = jax.tree_util.tree_map(lambda x: x.reshape(steps, x.shape[0] // steps, *x.shape[1:]), batch)

  def add(carry, xs):
    i, micro_batch = xs
    return jax.tree_util.tree_map(jnp.add, carry, grad_fn(params, *micro_batch, jax.random.fold_in(rng, i))), None

  first = jax.tree_util.tree_map(lambda x: x[0], micro)
  zeros = jax.tree_util.tree_map(
    lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(lambda: grad_fn(params, *first, rng))
  )
  total, _ = jax.lax.scan(add, zeros, (jnp.arange(steps), micro))
  return total

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
  model: nn.Module
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
  model: nn.Module,
  init_inputs: dict,
  config,
  *,
  warmup_steps: int,
  total_steps: int,
  devices=None,
  frozen_steps: int = 0,
  trainable=None,
) -> Program:
  """The program of `model` over config.mesh of `devices` (default: all of them).

  Shapes come from model.init(**init_inputs); AdamW from config (learning_rate, b1, b2, eps,
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
    return _state_at_zero(nn.unbox(model.init(rng, **init_inputs)["params"]), tx)

  boxed_params = jax.eval_shape(lambda: model.init(jax.random.key(0), **init_inputs)["params"])
  abstract = jax.eval_shape(lambda: init_state(jax.random.key(0)))  # the key traced: no program
  params_sharding = partitioning.param_shardings(boxed_params, mesh, logical_rules)
  state_sharding = partitioning.state_shardings(abstract, params_sharding, tx, mesh)
  abstract_state = jax.tree_util.tree_map(
    lambda a, sharding: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), abstract, state_sharding
  )
  return Program(
    model=model,
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

"""AdamW with the WYWEB paper's defaults, and its two-stage form with part of the parameters frozen at first.

Defaults: β (0.9, 0.999), ε 1e-6, weight decay 0.01 on all but biases and LayerNorm parameters,
global-norm clipping 1.0, linear warm-up then linear decay to zero. The two-stage form is GuwenBERT's
recipe: a continued model's new embeddings learn before its encoder moves.
"""

import collections
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax


def learning_rate_schedule(peak: float, warmup_steps: int, total_steps: int) -> optax.Schedule:
  return optax.join_schedules(
    [
      optax.linear_schedule(0.0, peak, max(warmup_steps, 1)),
      optax.linear_schedule(peak, 0.0, max(total_steps - warmup_steps, 1)),
    ],
    [max(warmup_steps, 1)],
  )


def decay_mask(params):
  """False for biases and LayerNorm scales/biases (leaves named 'bias' or 'scale')."""
  return jax.tree_util.tree_map_with_path(
    lambda path, _: getattr(path[-1], "key", None) not in ("bias", "scale"), params
  )


def global_norm(tree) -> jax.Array:
  """sqrt(Σ x²) over the tree's floating-point leaves, in float32; inf past about 1.8e19."""
  # Leaves of one shape and dtype (one parameter in each layer, sharded alike) are stacked and reduced in
  # one fused kernel, ~15 in all, where optax.tree.norm takes one per leaf (~200 for 12 layers).
  stacks = collections.defaultdict(list)
  for leaf in jax.tree_util.tree_leaves(tree):
    if jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
      stacks[(jnp.shape(leaf), jnp.result_type(leaf))].append(jnp.asarray(leaf, jnp.float32))
  return jnp.sqrt(sum(jnp.sum(jnp.square(jnp.stack(leaves))) for leaves in stacks.values()))


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformationExtraArgs:
  """optax.clip_by_global_norm, taking the norm the train step computed: `update(..., grad_norm=global_norm(g))`."""

  def update(updates, state, params=None, *, grad_norm):
    del params
    clip = lambda g: jax.lax.select(grad_norm < max_norm, g, (g / grad_norm.astype(g.dtype)) * max_norm)
    return jax.tree_util.tree_map(clip, updates), state

  return optax.GradientTransformationExtraArgs(optax.init_empty_state, update)


class FrozenState(NamedTuple):
  count: jax.Array  # updates seen, applied or not
  inner: optax.OptState


def frozen_for(steps: int, inner: optax.GradientTransformation) -> optax.GradientTransformation:
  """`inner`, but its first `steps` updates change nothing, not even its own state.

  The parameters stay bit for bit and gather no moments; `inner` then starts as if new (its schedule
  begins at `steps`, with its own warm-up).
  """

  def init(params):
    return FrozenState(count=jnp.zeros((), jnp.int32), inner=inner.init(params))

  def update(updates, state, params=None, **extra):
    new_updates, new_inner = inner.update(updates, state.inner, params, **extra)
    frozen = state.count < steps
    keep = lambda old, new: jnp.where(frozen, old, new)
    return (
      jax.tree_util.tree_map(lambda u: jnp.where(frozen, jnp.zeros_like(u), u), new_updates),
      FrozenState(count=state.count + 1, inner=jax.tree_util.tree_map(keep, state.inner, new_inner)),
    )

  return optax.GradientTransformationExtraArgs(init, update)


def adamw(
  *,
  learning_rate: float,
  warmup_steps: int,
  total_steps: int,
  b1: float = 0.9,
  b2: float = 0.999,
  eps: float = 1e-6,
  weight_decay: float = 0.01,
  max_grad_norm: float = 1.0,
  frozen_steps: int = 0,
  trainable: Callable[[tuple[str, ...]], bool] | None = None,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """The optimizer and its learning-rate schedule.

  With `frozen_steps`, only the parameters whose path `trainable` accepts learn for those steps (warm-up,
  then decay to zero at the last of them); then all learn on a schedule of their own (warm-up again,
  decay to zero at `total_steps`), the others with fresh moments.
  """
  adam = lambda schedule: optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=decay_mask)
  clip = clip_by_global_norm(max_grad_norm)
  if not frozen_steps:
    schedule = learning_rate_schedule(learning_rate, warmup_steps, total_steps)
    return optax.chain(clip, adam(schedule)), schedule
  second = learning_rate_schedule(learning_rate, warmup_steps, total_steps - frozen_steps)
  first = learning_rate_schedule(learning_rate, min(warmup_steps, frozen_steps), frozen_steps)
  schedule = optax.join_schedules([first, second], [frozen_steps])
  labels = lambda params: jax.tree_util.tree_map_with_path(
    lambda path, _: "trainable" if trainable(path_names(path)) else "frozen", params
  )
  return optax.chain(
    clip, optax.multi_transform({"trainable": adam(schedule), "frozen": frozen_for(frozen_steps, adam(second))}, labels)
  ), schedule


def without_frozen(grads, frozen: jax.Array, trainable: Callable[[tuple[str, ...]], bool]):
  """`grads` with those of the params `trainable` rejects zeroed while `frozen`, so the clip's norm is the learners'."""
  return jax.tree_util.tree_map_with_path(
    lambda path, g: g if trainable(path_names(path)) else jnp.where(frozen, jnp.zeros_like(g), g), grads
  )


def path_names(path) -> tuple[str, ...]:
  """A tree path's keys as names: ('encoder', 'embeddings', 'word_embeddings', 'embedding')."""
  return tuple(str(getattr(key, "key", key)) for key in path)

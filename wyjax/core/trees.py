"""Whole-tree reductions in a few kernels, not one per leaf."""
import collections

import jax
import jax.numpy as jnp


def stacks(tree) -> list[jax.Array]:
  """The tree's floating-point leaves, those of one shape and dtype stacked on a new leading axis:
  a reduction over the tree is then one per stack (a 12-layer encoder's ~200 leaves make ~15
  stacks), and XLA fuses each stack into its reduction, so nothing is copied. Leaves of one shape
  are the same parameter in each layer, sharded alike, so a stack needs no communication."""
  groups = collections.defaultdict(list)
  for leaf in jax.tree_util.tree_leaves(tree):
    if jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
      groups[(jnp.shape(leaf), jnp.result_type(leaf))].append(leaf)
  return [group[0][None] if len(group) == 1 else jnp.stack(group) for group in groups.values()]

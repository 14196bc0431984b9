"""Mesh (data, fsdp, tensor) from the config, and shardings from logical axis names.

Parameters carry logical names (`vocab`, `embed`, `heads`, `kv`, `mlp`; `layers` for the
stacked axis of scanned layers), the models' main activations `activation_*` names; the
config's `logical_axis_rules` map them to mesh axes. Optimizer moments take their parameter's
sharding; batches are split over (data, fsdp).
"""

import functools
import logging
from collections.abc import Callable, Mapping, Sequence

import flax.linen as nn
import jax
import numpy as np
import optax
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")
# The default logical_axis_rules. The activation rules keep a tensor-parallel mesh's heads and
# MLP split between the matmuls, where XLA would otherwise be free to gather them.
LOGICAL_AXIS_RULES = (
  ("vocab", "tensor"),
  ("embed", "fsdp"),
  ("heads", "tensor"),
  ("kv", None),
  ("mlp", "tensor"),
  ("layers", None),
  ("activation_batch", BATCH_AXES),
  ("activation_length", None),
  ("activation_embed", None),
  ("activation_heads", "tensor"),
  ("activation_kv", None),
  ("activation_mlp", "tensor"),
)


def make_mesh(axis_sizes: Mapping[str, int], devices=None) -> Mesh:
  """{'data': -1, 'fsdp': 1, 'tensor': 1}; one -1 takes the remaining devices."""
  devices = jax.devices() if devices is None else devices
  unknown = set(axis_sizes) - set(MESH_AXES)
  if unknown:
    raise ValueError(f"unknown mesh axes {sorted(unknown)}; use {MESH_AXES}")
  sizes = [int(axis_sizes.get(a, 1)) for a in MESH_AXES]
  if sizes.count(-1) > 1:
    raise ValueError(f"at most one mesh axis may be -1: {dict(axis_sizes)}")
  known = int(np.prod([s for s in sizes if s != -1]))
  if -1 in sizes:
    if len(devices) % known:
      raise ValueError(f"{len(devices)} devices do not split into mesh {dict(axis_sizes)}")
    sizes[sizes.index(-1)] = len(devices) // known
  if int(np.prod(sizes)) != len(devices):
    raise ValueError(
      f"mesh {dict(zip(MESH_AXES, sizes))} needs {int(np.prod(sizes))} devices, there are {len(devices)}"
    )
  try:
    grid = mesh_utils.create_device_mesh(sizes, devices)
  except (AssertionError, NotImplementedError, ValueError):  # e.g. CPU devices, no topology
    grid = np.asarray(devices).reshape(sizes)
  return Mesh(grid, MESH_AXES)


def rules(pairs: Sequence) -> tuple:
  """[('embed', 'fsdp'), ('heads', 'tensor'), ('kv', None), …] as flax logical rules."""
  return tuple((name, tuple(axes) if isinstance(axes, list) else axes) for name, axes in pairs)


def with_activation_constraints(fn: Callable, mesh: Mesh, logical_rules) -> Callable:
  """fn, traced with the models' activation constraints in force (logical rules and a mesh in context)."""

  @functools.wraps(fn)
  def constrained(*args):
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), nn.logical_axis_rules(logical_rules):
      return fn(*args)

  return constrained


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def param_shardings(boxed_params, mesh: Mesh, logical_rules) -> dict:
  """NamedShardings for the (unboxed) params from their logical partitioning metadata.

  A dimension that its mesh axes do not divide (a 22,669-token vocabulary over 4 tensor
  shards) is replicated instead, and logged.
  """
  specs = nn.logical_to_mesh(nn.get_partition_spec(boxed_params), logical_rules)
  shapes = jax.tree_util.tree_map(lambda x: x.shape, nn.unbox(boxed_params))
  return jax.tree_util.tree_map_with_path(
    lambda path, spec, shape: NamedSharding(mesh, _fit(spec, shape, mesh, jax.tree_util.keystr(path))),
    specs,
    shapes,
    is_leaf=lambda x: isinstance(x, PartitionSpec),
  )


def _fit(spec: PartitionSpec, shape, mesh: Mesh, name: str) -> PartitionSpec:
  fitted = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    ways = int(np.prod([mesh.shape[a] for a in names])) if names else 1
    if dim % ways:
      logging.info("%s: dimension %d is not divisible by %s (%d); replicated", name, dim, names, ways)
      axes = None
    fitted.append(axes)
  return PartitionSpec(*fitted)


def state_shardings(abstract_state: dict, params_sharding, tx: optax.GradientTransformation, mesh: Mesh) -> dict:
  """Shardings for {'step', 'params', 'opt_state'}: moments follow their parameters.

  A partition of the optimizer holds moments of its own parameters only (the others are MaskedNode).
  """
  masked = lambda x: isinstance(x, optax.MaskedNode)
  opt_sharding = optax.tree_map_params(
    tx,
    lambda moment, sharding: moment if masked(moment) else sharding,
    abstract_state["opt_state"],
    params_sharding,
    transform_non_params=lambda _: replicated(mesh),
    is_leaf=masked,
  )
  return {"step": replicated(mesh), "params": params_sharding, "opt_state": opt_sharding}

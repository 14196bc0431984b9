"""The devices to compile for: this machine's, a TPU topology's, or GPUs that this host does not have.

- "local": this machine's devices.
- A TPU topology ("v5p:2x2x1", "v4:2x2x4"): its abstract devices, through libtpu.
- GPUs of one host ("h100", "h100:8"): XLA:GPU's compile-only devices for the card (its CUDA
  plugin, ptxas and cuDNN, the 'gpu-compile' extra; no GPU needed).
"""

import os

import jax

from wyjax.aot.accelerators import ACCELERATORS, GPU_CARDS
from wyjax.core import guards

EXTRA = "pip install -c constraints.txt -e '.[gpu-compile]'"
# The cuDNN the compiled program may call: which fused attentions XLA emits depends on it.
# A current cuDNN 9 (the gpu-compile extra's wheel is 9.20); a GPU with an older one may differ.
CUDNN_VERSION = (9, 10, 0)


def devices(topology: str) -> list:
  """The devices to compile for: "local", a TPU topology "v5p:2x2x1" or GPUs of one host, "h100" or "h100:8"."""
  if topology == "local":
    return jax.devices()
  chip, _, shape = topology.partition(":")
  if chip in GPU_CARDS:
    return _gpu_devices(topology, chip, shape)
  if chip not in ACCELERATORS or not chip.startswith("v"):
    raise guards.RunError(
      f"--compile_only={topology!r}: expected 'local', a TPU topology such as v5p:2x2x1, "
      f"v4:2x2x4 or v5e:16x16 (chips {sorted(c for c in ACCELERATORS if c.startswith('v'))}), or "
      f"GPUs of one host such as h100 or h100:8 ({sorted(GPU_CARDS)})"
    )
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # compiling beside another libtpu process
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  try:
    return list(topologies.get_topology_desc(platform="tpu", topology_name=topology).devices)
  except Exception as e:  # libtpu missing, or a topology it does not know
    raise guards.RunError(
      f"--compile_only={topology}: no TPU topology ({type(e).__name__}: {str(e)[:300]}); "
      "compiling for TPU needs libtpu (pip install -e '.[tpu]')"
    ) from e


def _gpu_devices(topology: str, chip: str, count: str) -> list:
  """Compile-only CUDA devices: XLA:GPU given the card's description, on a host without one."""
  if not (count or "1").isdigit() or int(count or 1) < 1:
    raise guards.RunError(f"--compile_only={topology!r}: expected {chip} or {chip}:N, N GPUs of one host")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  try:
    topology_desc = topologies.get_topology_desc(
      platform="cuda", target_config=target(chip), topology=f"1x1x{int(count or 1)}"
    )
  except Exception as e:  # no CUDA plugin: jax knows no 'cuda' platform
    raise guards.RunError(
      f"--compile_only={topology}: compiling for a GPU needs jax's CUDA plugin, ptxas and "
      f"cuDNN ({type(e).__name__}: {str(e).splitlines()[0][:200]}); install them: "
      f"{EXTRA}"
    ) from e
  return list(topology_desc.devices)


def devices_per_chip(devs) -> int:
  """Devices a chip holds: TPU v4's abstract topology has one per TensorCore, two per chip; others one."""
  coords = {tuple(d.coords) for d in devs if hasattr(d, "coords")}
  return len(devs) // len(coords) if coords else 1


def target(name: str) -> str:
  """The GpuTargetConfigProto (text) of a card in GPU_CARDS: CUDA's per-architecture limits and the card's figures."""
  card = GPU_CARDS[name]
  major, minor = card.compute_capability
  cudnn = dict(zip(("major", "minor", "patch"), CUDNN_VERSION))
  return f"""gpu_device_info {{
  name: "{card.device_kind}"
  threads_per_block_limit: 1024
  threads_per_warp: 32
  threads_per_core_limit: 2048
  thread_dim_limit_x: 1024
  thread_dim_limit_y: 1024
  thread_dim_limit_z: 64
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  shared_memory_per_block: 49152
  shared_memory_per_core: {card.shared_memory_per_sm}
  shared_memory_per_block_optin: {card.shared_memory_per_block}
  core_count: {card.sms}
  fpus_per_core: {card.fp32_units_per_sm}
  clock_rate_ghz: {card.boost_clock_ghz}
  memory_bandwidth: {int(card.hbm_bandwidth)}
  device_memory_size: {int(card.hbm_bytes)}
  l2_cache_size: {card.l2_bytes}
  cuda_compute_capability {{
    major: {major}
    minor: {minor}
    feature_extension: {"ACCELERATED_FEATURES" if card.accelerated_features else "NONE"}
  }}
}}
platform_name: "CUDA"
dnn_version_info {{ major: {cudnn["major"]} minor: {cudnn["minor"]} patch: {cudnn["patch"]} }}
device_description_str: "{card.device_kind}"
"""

"""The accelerators wyjax compiles for and predicts on: each one's published figures, in one table.

Every entry has its dense bf16 peak, HBM size and HBM bandwidth (the roofline and MFU); a GPU
card also carries what XLA:GPU's target description and the step predictor need.
"""

import dataclasses
import re

import jax

from wyjax.core.host_memory import GiB

GB = 1e9


@dataclasses.dataclass(frozen=True)
class Accelerator:
  """A TPU chip or a GPU: the figures a roofline needs."""

  peak_flops: float  # dense bf16 FLOP/s (a GPU's tensor cores; TF32 runs at half)
  hbm_bytes: float
  hbm_bandwidth: float  # bytes/s


@dataclasses.dataclass(frozen=True)
class GpuCard(Accelerator):
  """A GPU that wyjax compiles for without one (targets.target) and costs kernels on (gpu_step_time)."""

  name: str  # the key: "h100"
  device_kind: str  # as jax reports it
  link_bandwidth: float  # NVLink, bytes/s each way, to the other GPUs of the host
  sms: int
  boost_clock_ghz: float
  l2_bytes: int
  shared_memory_per_sm: int
  shared_memory_per_block: int  # the opt-in maximum
  fp32_units_per_sm: int
  compute_capability: tuple[int, int]
  accelerated_features: bool  # sm_90a: wgmma and TMA, which XLA's Triton GEMMs and cuDNN use

  @property
  def fp32_flops(self) -> float:
    """The CUDA cores' float32 FLOP/s (a matmul at precision HIGHEST): an FMA, 2 FLOPs, per core per clock."""
    return 2 * self.sms * self.fp32_units_per_sm * self.boost_clock_ghz * 1e9

  def matmul_rate(self, precision: str) -> float:
    """Peak FLOP/s of a matmul at `precision`: "bf16", "tf32" (float32 at XLA's default) or "f32"."""
    return {"bf16": self.peak_flops, "tf32": self.peak_flops / 2, "f32": self.fp32_flops}[precision]


# NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense bf16; HBM3 80 GB (80 GiB of stacks; the device
# reports 79.1 GiB to CUDA), 3.35 TB/s. H100 Tensor Core GPU architecture whitepaper: 132 SMs,
# 1.98 GHz boost, 50 MB L2, 228 KB shared memory per SM (227 KB per block), 128 FP32 cores per
# SM, sm_90; NVLink 4: 900 GB/s both ways together.
H100 = GpuCard(
  peak_flops=989e12,
  hbm_bytes=80 * GiB,
  hbm_bandwidth=3350 * GB,
  name="h100",
  device_kind="NVIDIA H100 80GB HBM3",
  link_bandwidth=450 * GB,
  sms=132,
  boost_clock_ghz=1.98,
  l2_bytes=50 * 2**20,
  shared_memory_per_sm=228 * 2**10,
  shared_memory_per_block=227 * 2**10,
  fp32_units_per_sm=128,
  compute_capability=(9, 0),
  accelerated_features=True,
)

ACCELERATORS = {
  # cloud.google.com/tpu/docs/v4: 275 TFLOP/s bf16; HBM2 32 GiB, 1,200 GB/s
  "v4": Accelerator(275e12, 32 * GiB, 1200 * GB),
  # cloud.google.com/tpu/docs/v5e: 197 TFLOP/s bf16; HBM2 16 GB, 819 GB/s
  "v5e": Accelerator(197e12, 16 * GB, 819 * GB),
  # cloud.google.com/tpu/docs/v5p-training: 459 TFLOP/s bf16; HBM2e 95 GB, 2,765 GB/s
  "v5p": Accelerator(459e12, 95 * GB, 2765 * GB),
  # cloud.google.com/tpu/docs/v6e: 918 TFLOP/s bf16; HBM 32 GB, 1,640 GB/s
  "v6e": Accelerator(918e12, 32 * GB, 1640 * GB),
  "h100": H100,
  # NVIDIA H200 SXM datasheet: the H100's GH100 with HBM3e 141 GB (the device reports 141 GiB),
  # 4.8 TB/s; 989 TFLOP/s dense bf16, NVLink 900 GB/s.
  "h200": dataclasses.replace(
    H100, name="h200", device_kind="NVIDIA H200", hbm_bytes=141 * GiB, hbm_bandwidth=4800 * GB
  ),
  # NVIDIA A100 SXM 80GB datasheet: 312 TFLOP/s dense bf16; HBM2e 80 GB (80 GiB of stacks),
  # 2,039 GB/s. A100 Tensor Core GPU architecture whitepaper: 108 SMs, 1.41 GHz boost, 40 MB L2,
  # 164 KB shared memory per SM (163 KB per block), 64 FP32 cores per SM, sm_80; NVLink 3:
  # 600 GB/s both ways together.
  "a100": GpuCard(
    peak_flops=312e12,
    hbm_bytes=80 * GiB,
    hbm_bandwidth=2039 * GB,
    name="a100",
    device_kind="NVIDIA A100-SXM4-80GB",
    link_bandwidth=300 * GB,
    sms=108,
    boost_clock_ghz=1.41,
    l2_bytes=40 * 2**20,
    shared_memory_per_sm=164 * 2**10,
    shared_memory_per_block=163 * 2**10,
    fp32_units_per_sm=64,
    compute_capability=(8, 0),
    accelerated_features=False,
  ),
  # NVIDIA L4 datasheet: 121 TFLOP/s dense bf16; GDDR6 24 GB, 300 GB/s
  "l4": Accelerator(121e12, 24 * GB, 300 * GB),
}
# The GPUs that wyjax compiles for without one and predicts steps on.
GPU_CARDS = {name: card for name, card in ACCELERATORS.items() if isinstance(card, GpuCard)}
# jax's device_kind → ACCELERATORS key (the first that the kind contains), for this machine's devices.
DEVICE_KINDS = {
  "TPU v4": "v4",
  "TPU v5 lite": "v5e",
  "TPU v5e": "v5e",
  "TPU v5p": "v5p",
  "TPU v5": "v5p",
  "TPU v6 lite": "v6e",
  "H100": "h100",
  "H200": "h200",
  "A100": "a100",
  "L4": "l4",
}


def chip_of(topology: str, device) -> str | None:
  """The ACCELERATORS key of a --compile_only topology, or for "local" of `device`'s kind (None if unknown)."""
  if topology != "local":
    return topology.split(":")[0]
  return next(
    (
      chip
      for kind, chip in DEVICE_KINDS.items()
      if re.search(rf"\b{re.escape(kind)}\b", device.device_kind, re.IGNORECASE)
    ),
    None,
  )


def peak_flops_per_device(override: float | None = None) -> float | None:
  """Dense bf16 peak FLOP/s of this machine's accelerator, for MFU; None on a CPU.

  override: config.peak_flops_per_device, taken when set.
  """
  if override:
    return override
  chip = chip_of("local", jax.devices()[0])
  return ACCELERATORS[chip].peak_flops if chip else None

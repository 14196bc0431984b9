"""The GPUs wyjax compiles for without one and predicts steps on: each card's published figures,
in one place. aot compiles for a card (`target` writes it as XLA's GpuTargetConfigProto) and
gpu_step_time costs every kernel of the compiled step at its figures."""

import dataclasses

GB, GiB = 1e9, 2**30


@dataclasses.dataclass(frozen=True)
class GpuCard:
  name: str  # the key: "h100"
  device_kind: str  # as jax reports it
  matmul_flops: float  # dense bf16 tensor-core FLOP/s; TF32 runs at half
  hbm_bytes: float
  hbm_bandwidth: float  # bytes/s
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
    return {"bf16": self.matmul_flops, "tf32": self.matmul_flops / 2, "f32": self.fp32_flops}[precision]


CARDS = {
  # NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense bf16; HBM3 80 GB (80 GiB of stacks; the device
  # reports 79.1 GiB to CUDA), 3.35 TB/s. H100 Tensor Core GPU architecture whitepaper: 132 SMs,
  # 1.98 GHz boost, 50 MB L2, 228 KB shared memory per SM (227 KB per block), 128 FP32 cores per
  # SM, sm_90; NVLink 4: 900 GB/s both ways together.
  "h100": GpuCard(
    "h100",
    "NVIDIA H100 80GB HBM3",
    989e12,
    80 * GiB,
    3350 * GB,
    450 * GB,
    132,
    1.98,
    50 * 2**20,
    228 * 2**10,
    227 * 2**10,
    128,
    (9, 0),
    True,
  ),
  # NVIDIA H200 SXM datasheet: the H100's GH100 with HBM3e 141 GB (the device reports 141 GiB),
  # 4.8 TB/s; 989 TFLOP/s dense bf16, NVLink 900 GB/s.
  "h200": GpuCard(
    "h200",
    "NVIDIA H200",
    989e12,
    141 * GiB,
    4800 * GB,
    450 * GB,
    132,
    1.98,
    50 * 2**20,
    228 * 2**10,
    227 * 2**10,
    128,
    (9, 0),
    True,
  ),
  # NVIDIA A100 SXM 80GB datasheet: 312 TFLOP/s dense bf16; HBM2e 80 GB (80 GiB of stacks),
  # 2,039 GB/s. A100 Tensor Core GPU architecture whitepaper: 108 SMs, 1.41 GHz boost, 40 MB L2,
  # 164 KB shared memory per SM (163 KB per block), 64 FP32 cores per SM, sm_80; NVLink 3:
  # 600 GB/s both ways together.
  "a100": GpuCard(
    "a100",
    "NVIDIA A100-SXM4-80GB",
    312e12,
    80 * GiB,
    2039 * GB,
    300 * GB,
    108,
    1.41,
    40 * 2**20,
    164 * 2**10,
    163 * 2**10,
    64,
    (8, 0),
    False,
  ),
}
# The cuDNN the compiled program may call: which fused attentions XLA emits depends on it.
# A current cuDNN 9 (the gpu-compile extra's wheel is 9.20); a GPU with an older one may differ.
CUDNN_VERSION = (9, 10, 0)


def target(name: str) -> str:
  """The GpuTargetConfigProto (text) of a card in CARDS: CUDA's per-architecture limits
  (threads, blocks, registers) and the card's figures."""
  card = CARDS[name]
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

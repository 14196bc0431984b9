"""Compile a train step for hardware this machine does not have, and predict what it costs.

`devices("v5p:4x4x4")` gives the abstract devices of a TPU topology through libtpu,
`devices("h100")` (or "h200", "a100"; "h100:8" for 8 GPUs of one host) compile-only GPU devices
through XLA:GPU's deviceless compilation (the CUDA plugin, ptxas and cuDNN of the
'gpu-compile' extra; no GPU needed), and "local" this machine's. The training code builds its
exact step over them and compiles it ahead of time; `report()` turns the compiler's memory and
cost analyses into per-chip figures and a roofline: a step can run no faster than its FLOPs at
peak or its HBM traffic at full bandwidth, whichever takes longer, so `mfu_ceiling` (the
model's FLOPs over that time at peak) bounds the MFU a real run can reach. For a GPU it adds
what XLA built (wyjax.core.gpu_program): kernels per step by kind, custom calls, the largest
buffers, and a predicted step time, every kernel costed and calibrated on measured programs
(gpu_step_time.predict) with the error it had on programs held out of its fit: what a real run
can plan with, where the roofline is only a lower bound. All figures are predictions.
"""

import dataclasses
import json
import os
import re

import jax
import numpy as np

from wyjax.core import gpu_cards, gpu_program, gpu_step_time, guards
from wyjax.core.storage import cache_dir

GB, GiB = 1e9, 2**30


@dataclasses.dataclass(frozen=True)
class Chip:
  peak_flops: float  # dense bf16 FLOP/s
  hbm_bytes: float
  hbm_bandwidth: float  # bytes/s


CHIPS = {
  # cloud.google.com/tpu/docs/v4: 275 TFLOP/s bf16; HBM2 32 GiB, 1,200 GB/s
  "v4": Chip(275e12, 32 * GiB, 1200 * GB),
  # cloud.google.com/tpu/docs/v5e: 197 TFLOP/s bf16; HBM2 16 GB, 819 GB/s
  "v5e": Chip(197e12, 16 * GB, 819 * GB),
  # cloud.google.com/tpu/docs/v5p-training: 459 TFLOP/s bf16; HBM2e 95 GB, 2,765 GB/s
  "v5p": Chip(459e12, 95 * GB, 2765 * GB),
  # cloud.google.com/tpu/docs/v6e: 918 TFLOP/s bf16; HBM 32 GB, 1,640 GB/s
  "v6e": Chip(918e12, 32 * GB, 1640 * GB),
  # The GPUs: their figures are gpu_cards'.
  **{name: Chip(card.matmul_flops, card.hbm_bytes, card.hbm_bandwidth) for name, card in gpu_cards.CARDS.items()},
  # NVIDIA L4 datasheet: 121 TFLOP/s dense bf16; GDDR6 24 GB, 300 GB/s
  "l4": Chip(121e12, 24 * GB, 300 * GB),
}
# jax's device_kind → CHIPS key (the first that the kind contains), for this machine's devices.
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


EXTRA = "pip install -c constraints.txt -e '.[gpu-compile]'"


def use_compilation_cache(compile_only: str | None = None) -> None:
  """JAX's persistent compilation cache under <wyjax cache>/xla, unless one is configured
  (JAX_COMPILATION_CACHE_DIR): a rerun of the same step loads it instead of compiling; small
  programs too (JAX keeps only those over a second by default; a warm TLC fine-tuning run
  recompiled 118 smaller ones, 5 s on 2 cores). On a GPU, jax (jax_persistent_cache_enable_xla_caches'
  default) keeps XLA's autotuning results beside it, fusion by fusion, in
  xla/xla_gpu_per_fusion_autotune_cache_dir: a program that misses the cache (another length, a
  changed model) still skips the autotuning of every fusion tuned before. A directory that
  XLA_FLAGS names (--xla_gpu_per_fusion_autotune_cache_dir) stands: jax would override it. Not
  when compiling for a TPU topology: a compile-only client cannot load an executable back."""
  if compile_only not in (None, "local"):
    jax.config.update("jax_enable_compilation_cache", False)
  else:
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if not jax.config.jax_compilation_cache_dir:
      jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "xla"))
    if "--xla_gpu_per_fusion_autotune_cache_dir" in os.environ.get("XLA_FLAGS", ""):
      jax.config.update("jax_persistent_cache_enable_xla_caches", None)


class DoesNotFit(guards.RunError):
  """The compiled step needs more memory per chip than the chip has."""


def devices(topology: str) -> list:
  """The devices to compile for: "local" (this machine's), a TPU topology "v5p:2x2x1" or GPUs
  of one host, "h100" or "h100:8"."""
  if topology == "local":
    return jax.devices()
  chip, _, shape = topology.partition(":")
  if chip in gpu_cards.CARDS:
    return _gpu_devices(topology, chip, shape)
  if chip not in CHIPS or not chip.startswith("v"):
    raise guards.RunError(
      f"--compile_only={topology!r}: expected 'local', a TPU topology such as v5p:2x2x1, "
      f"v4:2x2x4 or v5e:16x16 (chips {sorted(c for c in CHIPS if c.startswith('v'))}), or "
      f"GPUs of one host such as h100 or h100:8 ({sorted(gpu_cards.CARDS)})"
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
      platform="cuda", target_config=gpu_cards.target(chip), topology=f"1x1x{int(count or 1)}"
    )
  except Exception as e:  # no CUDA plugin: jax knows no 'cuda' platform
    raise guards.RunError(
      f"--compile_only={topology}: compiling for a GPU needs jax's CUDA plugin, ptxas and "
      f"cuDNN ({type(e).__name__}: {str(e).splitlines()[0][:200]}); install them: "
      f"{EXTRA}"
    ) from e
  return list(topology_desc.devices)


def chip_of(topology: str, device) -> str | None:
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


def devices_per_chip(devs) -> int:
  """TPU v4's abstract topology has one device per TensorCore, two per chip; others one."""
  coords = {tuple(d.coords) for d in devs if hasattr(d, "coords")}
  return len(devs) // len(coords) if coords else 1


def per_device_bytes(tree) -> int:
  """Bytes one device holds of a tree of sharded ShapeDtypeStructs (its shard of each leaf)."""
  return int(
    sum(np.prod(x.sharding.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree))
  )


def buffer_bytes(memory) -> int:
  """Bytes of the buffers a compiled program holds on one device (its memory_analysis()): its
  arguments, its outputs less those aliased to arguments (a donated state), its temporaries."""
  return (
    memory.argument_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes + memory.temp_size_in_bytes
  )


@dataclasses.dataclass(frozen=True)
class CompiledStep:
  compiled: jax.stages.Compiled
  cost: dict  # XLA's per-device "flops" and "bytes accessed" ({} where it has none)
  gpu: gpu_program.GpuProgram | None  # what XLA built, for a GPU target


def compile_step(jitted, abstract_state, *abstract_args, topology: str) -> CompiledStep:
  """jitted.lower(abstract_state, *abstract_args).compile() with its cost analysis, and for a GPU
  (this host's too, with topology "local") what XLA built; the TPU compiler's out-of-memory refusal
  turned into DoesNotFit, and a GPU's before compiling where the state alone outgrows the card."""
  chip = chip_of(topology, jax.devices()[0])
  if chip in gpu_cards.CARDS:
    check_state_fits(abstract_state, chip)
  try:
    lowered = jitted.lower(abstract_state, *abstract_args)
    if chip in gpu_cards.CARDS:
      compiled, program, cost = gpu_program.compile(
        lowered, estimates=gpu_cards.CARDS[chip].compute_capability >= (9, 0)
      )
      return CompiledStep(compiled, cost or {}, program)
    compiled = lowered.compile()
  except Exception as e:  # pylint: disable=broad-except
    too_big = out_of_memory(e, topology)
    if too_big is None:
      raise
    raise too_big from e
  cost = compiled.cost_analysis()
  return CompiledStep(compiled, (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}, None)


def report(
  step: CompiledStep, *, topology: str, devs, mesh, abstract_state, analytic_flops_per_step: float, tokens_per_step: int
) -> dict:
  """Per-chip memory, FLOPs, HBM traffic and the roofline step time of a compiled step.

  analytic_flops_per_step is for the whole step over all chips (train/metrics.py); XLA's
  figures are per device, and a chip holds `devices_per_chip` of them. On a GPU, XLA counts no
  FLOPs or bytes inside custom calls (cuDNN's attention): the roofline takes the larger of its
  FLOPs and the model's.
  """
  per_chip = devices_per_chip(devs)
  chips = len(devs) // per_chip
  chip_name = chip_of(topology, devs[0])
  memory, cost = step.compiled.memory_analysis(), step.cost
  hbm = (buffer_bytes(memory) + memory.generated_code_size_in_bytes) * per_chip
  result = {
    "topology": topology,
    "chip": chip_name,
    "chips": chips,
    "mesh": dict(mesh.shape),
    "hbm_bytes_per_chip": int(hbm),
    "params_bytes_per_chip": per_device_bytes(abstract_state["params"]) * per_chip,
    "optimizer_bytes_per_chip": per_device_bytes(abstract_state["opt_state"]) * per_chip,
    "temporaries_bytes_per_chip": int(memory.temp_size_in_bytes) * per_chip,
    "flops_per_step_per_chip": max(float(cost.get("flops", 0.0)), 0.0) * per_chip,
    "analytic_flops_per_step_per_chip": analytic_flops_per_step / chips,
    "bytes_accessed_per_chip": max(float(cost.get("bytes accessed", 0.0)), 0.0) * per_chip,
    "tokens_per_step": tokens_per_step,
  }
  if step.gpu is not None:
    result.update(
      step.gpu.summary(),
      largest_buffers=[
        f"{b.dtype}[{','.join(map(str, b.shape))}] {b.bytes / 2**20:.1f} MiB"
        for b in sorted(step.gpu.buffers, key=lambda b: -b.bytes)[:LARGEST_BUFFERS]
      ],
    )
    if chip_name in gpu_cards.CARDS:  # every device runs the program: a step takes one device's time
      result.update(gpu_step_time.predict(step.gpu, gpu_cards.CARDS[chip_name]).report(tokens_per_step))
  spec = CHIPS.get(chip_name)
  if spec is None:  # e.g. --compile_only=local on a CPU: memory and FLOPs, but no roofline
    return result
  flops = result["flops_per_step_per_chip"]
  if step.gpu is not None:
    flops = max(flops, result["analytic_flops_per_step_per_chip"])
  seconds = max(flops / spec.peak_flops, result["bytes_accessed_per_chip"] / spec.hbm_bandwidth)
  result.update(
    hbm_capacity_bytes=int(spec.hbm_bytes),
    peak_flops_per_chip=spec.peak_flops,
    hbm_bandwidth_per_chip=spec.hbm_bandwidth,
    roofline_step_seconds=seconds,
    bound="compute" if flops / spec.peak_flops >= seconds else "memory",
    tokens_per_second=tokens_per_step / seconds,
    mfu_ceiling=result["analytic_flops_per_step_per_chip"] / (seconds * spec.peak_flops),
  )
  return result


LARGEST_BUFFERS = 5  # a GPU report lists this many of the step's largest arrays


ADVICE = (
  "shard the state over more chips (config.mesh.fsdp), lower config.batch_size or raise "
  "config.grad_accum_steps, or recompute activations (config.remat='full')"
)


def check_fits(result: dict) -> None:
  """Raises DoesNotFit when the step needs more HBM per chip than the chip has."""
  capacity = result.get("hbm_capacity_bytes")
  if capacity and result["hbm_bytes_per_chip"] > capacity:
    raise _too_big(
      f"{result['hbm_bytes_per_chip'] / GiB:.1f} GiB per chip", result["hbm_bytes_per_chip"], capacity, result["chip"]
    )


def check_state_fits(abstract_state, chip: str) -> None:
  """Raises DoesNotFit when a GPU (one device a chip) cannot hold the step's parameters and
  optimizer state alone: no batch, remat or temporary could make that fit, and XLA:GPU, which has
  no refusal of its own, would first spend minutes rematerialising toward the card (a TPU's
  compiler refuses by itself: out_of_memory)."""
  capacity = CHIPS[chip].hbm_bytes
  state = per_device_bytes(abstract_state["params"]) + per_device_bytes(abstract_state["opt_state"])
  if state > capacity:
    raise _too_big(
      f"more than {state / GiB:.1f} GiB per chip (its parameters and optimizer state alone)", state, capacity, chip
    )


def _too_big(needs: str, needed: float, capacity: float, chip: str) -> DoesNotFit:
  return DoesNotFit(
    f"the step needs {needs}, {(needed - capacity) / GiB:.1f} GiB more than one {chip} has "
    f"({capacity / GiB:.1f} GiB): {ADVICE}"
  )


def out_of_memory(error: Exception, topology: str) -> DoesNotFit | None:
  """The TPU compiler refuses a program larger than HBM; its message says by how much."""
  text = str(error)
  if "RESOURCE_EXHAUSTED" not in text and "Ran out of memory" not in text:
    return None
  sizes = re.search(r"\(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", text)
  if sizes:
    needed, available = map(float, sizes.groups())
    detail = (
      f"it needs {needed:.2f} GiB per chip, {needed - available:.2f} GiB more than the {available:.2f} GiB a chip has"
    )
  else:
    detail = text[:300]
  return DoesNotFit(f"the step does not fit {topology}: {detail}; {ADVICE}")


def summary(result: dict) -> str:
  """The report as a few readable lines (the JSON line follows them)."""
  lines = [
    f"compiled for {result['topology']}: {result['chips']} chips ({result['chip'] or 'unknown chip'}), "
    f"mesh {result['mesh']}, {result['tokens_per_step']:,} tokens per step",
    f"  HBM per chip {result['hbm_bytes_per_chip'] / GiB:.2f} GiB: params "
    f"{result['params_bytes_per_chip'] / GiB:.2f}, optimizer {result['optimizer_bytes_per_chip'] / GiB:.2f}, "
    f"temporaries {result['temporaries_bytes_per_chip'] / GiB:.2f}"
    + (f" (capacity {result['hbm_capacity_bytes'] / GiB:.1f})" if "hbm_capacity_bytes" in result else ""),
    f"  per chip per step: {result['flops_per_step_per_chip'] / 1e12:.3f} TFLOP (XLA), "
    f"{result['analytic_flops_per_step_per_chip'] / 1e12:.3f} TFLOP (model), "
    f"{result['bytes_accessed_per_chip'] / GiB:.2f} GiB accessed",
  ]
  if "kernels_per_step" in result:
    kinds = ", ".join(f"{kind} {n}" for kind, n in result["kernels_by_kind"].items())
    calls = ", ".join(f"{target} {n}" for target, n in result["custom_calls"].items()) or "none"
    loops = f"; {result['while_loops']} while loops, their bodies counted once" if result["while_loops"] else ""
    lines += [
      f"  GPU program: {result['kernels_per_step']:,} kernels per step ({kinds}){loops}",
      f"  custom calls: {calls}",
      f"  largest buffers: {', '.join(result['largest_buffers'])}",
    ]
  if "predicted_step_seconds" in result:  # the calibrated step first, the roofline among its bounds
    lines += gpu_step_time.describe(result)
  elif "roofline_step_seconds" in result:
    lines.append(
      f"  roofline (a lower bound: every FLOP at peak or every byte at full bandwidth, no launches): "
      f"{result['roofline_step_seconds'] * 1e3:.1f} ms per step ({result['bound']}-bound), "
      f"{result['tokens_per_second']:,.0f} tokens/s, MFU ceiling {result['mfu_ceiling']:.1%}"
    )
  return "\n".join(lines)


def print_report(result: dict) -> None:
  print(summary(result))
  print(json.dumps(result))

"""The compile-only report: a step compiled for other hardware, and what it will cost there per chip.

`compile_step` compiles the training code's exact step over the devices of targets.devices;
`report` turns the compiler's memory and cost analyses into per-chip figures and a roofline: a
step can run no faster than its FLOPs at peak or its HBM traffic at full bandwidth, so
`mfu_ceiling` bounds the MFU a real run can reach. For a GPU it adds what XLA built (gpu_program)
and the calibrated predicted step (gpu_step_time), with the error it had on programs held out of
its fit. All figures are predictions.
"""

import dataclasses
import json
import re

import jax
import numpy as np

from wyjax.aot import gpu_program, gpu_step_time
from wyjax.aot.accelerators import ACCELERATORS, GPU_CARDS, chip_of
from wyjax.aot.targets import devices_per_chip
from wyjax.core.host_memory import DoesNotFit, GiB, buffer_bytes

LARGEST_BUFFERS = 5  # a GPU report lists this many of the step's largest arrays
ADVICE = (
  "shard the state over more chips (config.mesh.fsdp), lower config.batch_size or raise "
  "config.grad_accum_steps, or recompute activations (config.remat='full')"
)


def per_device_bytes(tree) -> int:
  """Bytes one device holds of a tree of sharded ShapeDtypeStructs (its shard of each leaf)."""
  return int(
    sum(np.prod(x.sharding.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree))
  )


@dataclasses.dataclass(frozen=True)
class CompiledStep:
  """A step compiled for a topology, with what the compiler says of it."""

  compiled: jax.stages.Compiled
  cost: dict  # XLA's per-device "flops" and "bytes accessed" ({} where it has none)
  gpu: gpu_program.GpuProgram | None  # what XLA built, for a GPU target


def compile_step(jitted, abstract_state, *abstract_args, topology: str) -> CompiledStep:
  """Compiles jitted.lower(abstract_state, *abstract_args) with its cost analysis.

  For a GPU (this host's too, with topology "local") it also reads what XLA built.

  Raises:
    DoesNotFit: the TPU compiler refused the program as larger than HBM, or, for a GPU, the
      state alone outgrows the card (checked before compiling).
  """
  chip = chip_of(topology, jax.devices()[0])
  if chip in GPU_CARDS:
    check_state_fits(abstract_state, chip)
  try:
    lowered = jitted.lower(abstract_state, *abstract_args)
    if chip in GPU_CARDS:
      compiled, program, cost = gpu_program.compile(lowered, estimates=GPU_CARDS[chip].compute_capability >= (9, 0))
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

  analytic_flops_per_step is for the whole step over all chips (the model's count); XLA's
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
    if chip_name in GPU_CARDS:  # every device runs the program: a step takes one device's time
      result.update(gpu_step_time.predict(step.gpu, GPU_CARDS[chip_name]).report(tokens_per_step))
  spec = ACCELERATORS.get(chip_name)
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


def check_fits(result: dict) -> None:
  """Raises DoesNotFit when the step needs more HBM per chip than the chip has."""
  capacity = result.get("hbm_capacity_bytes")
  if capacity and result["hbm_bytes_per_chip"] > capacity:
    raise _too_big(
      f"{result['hbm_bytes_per_chip'] / GiB:.1f} GiB per chip", result["hbm_bytes_per_chip"], capacity, result["chip"]
    )


def check_state_fits(abstract_state, chip: str) -> None:
  """Raises DoesNotFit when a GPU cannot hold the step's parameters and optimizer state alone.

  No batch, remat or temporary could make that fit, and XLA:GPU, which has no refusal of its own,
  would first spend minutes rematerialising toward the card (a TPU's compiler refuses by itself:
  out_of_memory).
  """
  capacity = ACCELERATORS[chip].hbm_bytes
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
  """The TPU compiler's refusal of a program larger than HBM as DoesNotFit (by how much, where it says); else None."""
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
  """Prints the report's readable lines, then the report as one JSON line."""
  print(summary(result))
  print(json.dumps(result))

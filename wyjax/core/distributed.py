"""Multi-host set-up: `jax.distributed.initialize()` when the environment describes a job.

SLURM (`SLURM_NTASKS` > 1), TPU pods (several `TPU_WORKER_HOSTNAMES`) and explicit
`JAX_COORDINATOR_ADDRESS` + `JAX_NUM_PROCESSES` + `JAX_PROCESS_ID` need no flags; a
single-process run is left alone.
"""

import logging
import os

import jax


def multi_process_environment() -> bool:
  if os.environ.get("JAX_COORDINATOR_ADDRESS"):
    return True
  if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
    return True
  return len([h for h in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]) > 1


def initialize() -> None:
  if not multi_process_environment() or jax.distributed.is_initialized():
    return
  if jax.config.jax_platforms in (None, "", "cpu") and not os.environ.get("SLURM_NTASKS"):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if os.environ.get("JAX_COORDINATOR_ADDRESS"):
    jax.distributed.initialize(
      coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
      num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
      process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
  else:
    jax.distributed.initialize()  # SLURM and TPU pods are auto-detected
  logging.info(
    "process %d of %d, %d local of %d devices",
    jax.process_index(),
    jax.process_count(),
    jax.local_device_count(),
    jax.device_count(),
  )

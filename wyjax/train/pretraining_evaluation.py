"""A pretraining run's evaluation: the validation batches' loss (the objective's) and the probes' scores.

It is due at step 0, every eval_every steps and at the last step (`due`). An evaluation a stop cut
short is redone when the run resumes at its step: metrics.jsonl holds no record of it (`recorded`).
"""

import jax
import numpy as np
from jax.experimental import multihost_utils

from wyjax.core import guards, run_config
from wyjax.train import mlm

KEY = "valid_loss"  # in every evaluation's record


def due(step: int, config) -> bool:
  """Whether the run evaluates at `step`."""
  return step == 0 or step % config.eval_every == 0 or step == config.num_train_steps


def recorded(workdir, step: int) -> bool:
  """Whether metrics.jsonl records the evaluation of `step` (process 0's file, agreed by every process)."""
  found = KEY in run_config.metric_keys(workdir, step) if jax.process_index() == 0 else False
  if jax.process_count() > 1:
    found = bool(multihost_utils.broadcast_one_to_all(np.int32(found)))
  return found


class Evaluation:
  """The evaluation of a run's params: its validation batches, on the devices once, and its probes."""

  def __init__(self, run, eval_batches: list, tokenizer, global_batch, run_probes):
    """run: the pretraining.Pretraining whose eval_step sums; global_batch: a host batch → a global array."""
    self.run, self.probes = run, run_probes
    self.entropy = mlm.unigram_entropy(eval_batches, tokenizer)
    self.eval_arrays = [global_batch(b) for b in eval_batches]

  def __call__(self, params, stop: guards.StopRequest) -> tuple[dict | None, int]:
    """(the validation metrics, 0), or (None, the signal) when a stop request came first.

    The request is agreed between batches as the steps agree it; the loop then checkpoints and stops.
    """
    totals = {}
    for i, batch in enumerate(self.eval_arrays):
      if signum := stop.signal_at(i):
        return None, signum
      sums = jax.device_get(self.run.eval_step(params, batch, i))
      totals = {k: totals.get(k, 0.0) + float(v) for k, v in sums.items()}
    count = len(self.eval_arrays)
    probed, signum = self.probes.evaluate(
      self.run.objective.encoder_params(params), lambda probed: stop.signal_at(count + probed)
    )
    if signum:
      return None, signum
    return {
      **self.run.objective.validation_metrics(totals),
      "valid_unigram_entropy": self.entropy,
      **probed,
    }, 0

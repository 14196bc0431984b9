"""Why a training loop stops early: a stop signal, or too many non-finite steps in a row.

- `stop_signals()` turns SIGTERM/SIGINT into a request the loop honours at a step boundary: it
  checkpoints, then raises `Interrupted`. Several processes agree on it every `sync_every` steps. Long
  work inside the block that is no step (an evaluation) calls `honour_stop` between batches.
- `skip_if_not_finite()`, inside the jitted step, keeps the old state on a non-finite loss or gradient
  norm (the step counter still advances); `NonFiniteSteps` raises `NonFiniteError` after `max_in_a_row`
  such steps, so a state with NaN/Inf is never checkpointed.
"""

import contextlib
import logging
import signal

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils


class RunError(Exception):
  """A run cannot go on; the message says why and what to do, so no traceback is needed."""


class Interrupted(Exception):
  """The loop stopped because of a signal at `step`, checkpointed (None: between steps); rerunning resumes.

  Step 0, before any training, has no checkpoint: the rerun starts again. `where`, when given, replaces that
  account: where the loop stopped, what it kept and what the rerun does.
  """

  def __init__(self, signum: int, step: int | None = None, where: str | None = None):
    self.signum, self.step, self.where = signum, step, where
    if where is None and step == 0:
      where = "at step 0, before any checkpoint; rerun the same command to start again"
    elif where is None:
      where = f"at step {step} after checkpointing" if step is not None else "between steps (its last checkpoint kept)"
      where += "; rerun the same command to resume"
    super().__init__(f"stopped by {signal.Signals(signum).name} {where}")

  def __reduce__(self):  # rebuilt from its arguments, not its message (pickle's default)
    return type(self), (self.signum, self.step, self.where), self.__dict__

  @property
  def exit_code(self) -> int:
    return 128 + self.signum  # the shell's convention for a process ended by a signal


class NonFiniteError(RunError):
  """Too many steps in a row had a non-finite loss, gradient or update."""


def all_finite(tree) -> jax.Array:
  """True iff every floating-point element of the tree is finite."""
  # Each leaf on its own: a global norm would overflow for large but finite values.
  leaves = [
    jnp.all(jnp.isfinite(x))
    for x in jax.tree_util.tree_leaves(tree)
    if jnp.issubdtype(jnp.result_type(x), jnp.floating)
  ]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def skip_if_not_finite(old: dict, new: dict, loss, grad_norm) -> tuple[dict, jax.Array]:
  """(state, finite): `new` when the loss and the gradients' global norm are finite, else `old` with `new`'s step.

  The new state needs no check of its own: from a finite state, AdamW with clipped gradients stays
  finite but for absurd learning rates, whose next loss overflows and is skipped.
  """
  # The norm (float32) is finite iff every gradient is, or its squares overflowed: that step is skipped too.
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  kept = jax.tree_util.tree_map(lambda n, o: jnp.where(finite, n, o), new, old)
  return {**kept, "step": new["step"]}, finite


class NonFiniteSteps:
  """Host-side count of skipped steps, read one step late so the device never waits."""

  def __init__(self, max_in_a_row: int):
    self.max_in_a_row = max_in_a_row
    self.in_a_row = 0
    self.skipped = 0  # since the last `take_skipped()`
    self._last_step = 0
    self._pending = None  # (step, device flag) of the step dispatched last

  def push(self, step: int, finite) -> None:
    """Records the flag of `step` and reads the one before it."""
    self.flush()
    self._pending = (step, finite)

  def flush(self) -> None:
    """Reads the pending step's flag now."""
    if self._pending is None:
      return
    (self._last_step, finite), self._pending = self._pending, None
    if bool(jax.device_get(finite)):
      self.in_a_row = 0
      return
    self.in_a_row += 1
    self.skipped += 1
    logging.warning(
      "step %d: non-finite loss or gradients, update skipped (%d in a row)", self._last_step, self.in_a_row
    )

  def check(self) -> None:
    """Raises NonFiniteError once max_in_a_row steps in a row were skipped."""
    if self.in_a_row >= self.max_in_a_row:
      first = self._last_step - self.in_a_row + 1
      raise NonFiniteError(
        f"steps {first}-{self._last_step}: the loss or gradients were not finite {self.in_a_row} times in a row "
        f"(limit max_nonfinite_steps={self.max_in_a_row}); every update was skipped, so the last checkpoint holds "
        "the last finite state. Lower the learning rate or check the data, then rerun."
      )

  def take_skipped(self) -> int:
    skipped, self.skipped = self.skipped, 0
    return skipped


class StopRequest:
  """The signal received, if any, agreed across processes (see `stop_signals`)."""

  def __init__(self, sync_every: int):
    self.sync_every = max(1, sync_every)
    self.received = 0

  def _handle(self, signum, frame):
    del frame
    logging.warning("received %s: stopping at the next step or batch", signal.Signals(signum).name)
    self.received = signum

  def signal_at(self, step: int) -> int:
    """The signal number to stop on at this step (0: go on).

    Several processes agree only every `sync_every` steps (a signal any one received); one, every step.
    """
    if jax.process_count() == 1:
      return self.received
    if step % self.sync_every:
      return 0
    return int(np.max(multihost_utils.process_allgather(np.int32(self.received))))


_open_requests: list[StopRequest] = []  # those of the stop_signals blocks open now, innermost last


def honour_stop(count: int) -> None:
  """Raises Interrupted (no step) once a stop signal came inside a stop_signals block.

  Call it between the batches of long work that is no training step, `count` the batches so far (all
  processes make the same calls; they agree every sync_every).
  """
  if _open_requests and (signum := _open_requests[-1].signal_at(count)):
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_signals(sync_every: int = 1):
  """Makes SIGTERM and SIGINT set a StopRequest during the block; the previous handlers are restored after it."""
  request = StopRequest(sync_every)
  previous = {sig: signal.signal(sig, request._handle) for sig in (signal.SIGTERM, signal.SIGINT)}
  _open_requests.append(request)
  try:
    yield request
  finally:
    _open_requests.remove(request)
    for sig, handler in previous.items():  # None: a handler not set from Python; the default then
      signal.signal(sig, signal.SIG_DFL if handler is None else handler)

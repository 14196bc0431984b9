"""metrics.jsonl and TensorBoard: the metrics a run writes."""

import contextlib
import functools
import json
import sys
import time

from etils import epath

from wyjax.core import storage


@functools.cache
def _summary_writer() -> type:
  """tensorboardX's SummaryWriter, imported without torch; torch stays importable afterwards.

  tensorboardX imports torch wherever it is installed, only to accept torch tensors (wyjax writes
  floats), which slows every training command's start and exit.
  """
  if "torch" in sys.modules:
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

    return SummaryWriter
  sys.modules["torch"] = None  # `import torch` raises ImportError, which tensorboardX expects
  try:
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
  finally:
    del sys.modules["torch"]
  return SummaryWriter


class MetricWriter:
  """One JSON object per line in metrics.jsonl, and the same scalars in TensorBoard.

  Every record is on storage when write() returns. A bucket's objects cannot be appended to,
  so there the whole file is rewritten each time (a record per log_every steps keeps that small).
  """

  def __init__(self, workdir, *, enabled: bool = True):
    self.enabled = enabled
    if enabled:
      workdir = epath.Path(workdir)
      workdir.mkdir(parents=True, exist_ok=True)
      self._path = workdir / "metrics.jsonl"
      self._local = storage.is_local(workdir)
      if self._local:
        self._file = open(self._path, "a")
      else:
        self._text = self._path.read_text() if self._path.exists() else ""
      self._tb = _summary_writer()(str(workdir / "tensorboard"))

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    line = json.dumps({"step": int(step), **{k: float(v) for k, v in metrics.items()}}) + "\n"
    if self._local:
      self._file.write(line)
      self._file.flush()
    else:
      self._text += line
      self._path.write_text(self._text)
    for name, value in metrics.items():
      self._tb.add_scalar(name, float(value), int(step))

  def close(self) -> None:
    if self.enabled:
      if self._local:
        self._file.close()
      self._tb.close()


class StepClock:
  """The seconds a run's training steps took between two logs, the time of its evaluations set apart.

  Checkpoint writes stay in: they are part of what a run's steps cost.
  """

  def __init__(self, clock=time.perf_counter):
    self._clock = clock
    self._start, self._apart = clock(), 0.0

  @contextlib.contextmanager
  def set_apart(self):
    """Time spent in the block is not the steps'."""
    start = self._clock()
    try:
      yield
    finally:
      self._apart += self._clock() - start

  def lap(self) -> float:
    """The steps' seconds since the last lap (or the clock's start); the next lap starts now."""
    now = self._clock()
    seconds = now - self._start - self._apart
    self._start, self._apart = now, 0.0
    return seconds


def brief(scores: dict) -> str:
  """Scores as one short log line: 'loss 2.3456, accuracy 0.4123'."""
  return ", ".join(
    f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}" for name, value in scores.items()
  )

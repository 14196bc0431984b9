"""Worker processes for a command's work units.

They end with the command however it ends, and a worker that dies ends the work with one line of error.
"""

import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys

import tqdm

from wyjax.core import guards

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with(parent: int) -> None:
  """Makes this process end when `parent` does, however it ends (SIGKILL included).

  Linux sends SIGKILL to a process whose parent has died (PR_SET_PDEATHSIG); a parent that died before
  that was set is seen here, as a new parent (init's).
  """
  if sys.platform.startswith("linux"):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
  if os.getppid() != parent:
    os._exit(1)


def _start(parent: int, initializer, initargs) -> None:
  """A worker's initializer: it ends with its parent, then runs `initializer`."""
  end_with(parent)
  initializer(*initargs)


@contextlib.contextmanager
def processes(workers: int, initializer, initargs: tuple):
  """A pool of `workers` processes, each started by initializer(*initargs); workers 1: None, this process.

  - A worker's error reaches the caller as raised; a worker that dies, or a result that cannot be read
    back, breaks the pool, which raises (multiprocessing.Pool would wait for ever).
  - Leaving the block cancels the units not started; leaving it by an exception (an error, Ctrl-C)
    also ends the workers. A parent killed without leaving it takes its workers with it (end_with).
  """
  if workers == 1:
    initializer(*initargs)
    yield None
    return
  pool = concurrent.futures.ProcessPoolExecutor(
    workers, multiprocessing.get_context("spawn"), _start, (os.getpid(), initializer, initargs)
  )
  try:
    yield pool
  except BaseException:
    for process in pool._processes.values():  # (Python 3.14: pool.terminate_workers())
      process.terminate()
    raise
  finally:
    pool.shutdown(cancel_futures=True)


def ordered_map(pool, fn, units, progress: bool, what: str):
  """fn(unit) for every unit, in order, in `pool` (None: in this process)."""
  if pool:
    # The workers start here and inherit SIGINT blocked: Ctrl-C, sent to the whole process
    # group, reaches only this process, which cancels the work.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    try:
      results = pool.map(fn, units)
    finally:
      signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
  with tqdm.tqdm(total=len(units), desc=what, unit="file", disable=not progress, file=sys.stderr) as bar:
    try:
      for result in results if pool else map(fn, units):
        bar.update()
        yield result
    except concurrent.futures.BrokenExecutor as e:  # a worker died, or its result could not be read back
      raise guards.RunError(f"{what}: {e} (--workers=1 does the work in this process)") from e

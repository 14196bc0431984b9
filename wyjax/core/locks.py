"""One writer per folder: the lock a command holds while it writes a workdir, a prepared corpus or an export.

`held(folder, what)` refuses a second writer in one line naming the first (`Busy`: "FOLDER is being
written by fine-tuning (process 4242 on host-a, since …)"). The lock is FOLDER/.wyjax.lock, holding the
holder's process id, host and start time:
- on a file system with flock it is flock()ed, and released by the kernel however its process ends;
- in a bucket (gs://) or without flock it is checked, written, then read back: two commands starting
  at the same moment may both pass, and a holder on another host is obeyed until its file is deleted.
"""

import contextlib
import datetime
import errno
import fcntl
import json
import logging
import os
import socket

from etils import epath

from wyjax.core import guards, storage

LOCK = ".wyjax.lock"  # in the folder it locks; every check for a non-empty folder passes over it


class Busy(guards.RunError):
  """Another command is writing the folder."""


@contextlib.contextmanager
def held(folder, what: str, *, enabled: bool = True):
  """Runs the block as the one writer of `folder` (created if missing, removed if still empty at the end).

  Args:
    folder: the folder written.
    what: names the command, in another command's refusal.
    enabled: False holds nothing (a multi-process run's other processes: process 0 writes for all).

  Raises:
    Busy: another command holds the folder.
    OSError: the lock cannot be written (a full disk, a read-only one); nothing is left behind.
  """
  if not enabled:
    yield
    return
  folder = epath.Path(folder)
  created = not folder.exists()
  folder.mkdir(parents=True, exist_ok=True)
  record = {
    "what": what,
    "pid": os.getpid(),
    "host": socket.gethostname(),
    "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }
  try:
    release = (_hold_local if storage.is_local(folder) else _hold_in_bucket)(folder / LOCK, record)
  except BaseException:
    _remove_if_empty(folder, created)
    raise
  try:
    yield
  finally:
    release()
    _remove_if_empty(folder, created)


def _remove_if_empty(folder: epath.Path, created: bool) -> None:
  if created and folder.exists() and not any(folder.iterdir()):  # (a bucket has no empty folders)
    folder.rmdir()


def _hold_local(path: epath.Path, record: dict):
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      holder = _record(os.read(fd, 4096))
      os.close(fd)
      if e.errno in (errno.EAGAIN, errno.EACCES):
        raise Busy(_refusal(path, holder, liveness=True)) from None
      if not holder:  # the empty file just opened: no flock on this file system (a bucket mounted by gcsfuse)
        path.unlink(missing_ok=True)
      return _hold_in_bucket(path, record)
    try:  # the file we locked is still the lock: its holder may have removed it since we opened it
      if os.stat(path).st_ino == os.fstat(fd).st_ino:
        break
    except FileNotFoundError:
      pass
    os.close(fd)
  previous = _record(os.read(fd, 4096))
  if previous:
    logging.info(
      "%s: took over the lock of process %s on %s, which ended without releasing it",
      path.parent,
      previous.get("pid"),
      previous.get("host"),
    )
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
  except OSError as e:  # a full disk: a write names no file, and an empty lock would be left
    os.unlink(path)
    os.close(fd)
    raise OSError(e.errno, e.strerror, os.fspath(path)) from None

  def release():
    with contextlib.suppress(FileNotFoundError):  # (removed by hand meanwhile)
      os.unlink(path)  # before the flock ends: a command that opened this file then sees it gone
    os.close(fd)

  return release


def _hold_in_bucket(path: epath.Path, record: dict):
  if path.exists():
    holder = _record(path.read_bytes())
    if not _gone(holder):
      raise Busy(_refusal(path, holder, liveness=False))
    logging.info(
      "%s: took over the lock of process %s, which is no longer running here", path.parent, holder.get("pid")
    )
  path.write_text(json.dumps(record))
  if (holder := _record(path.read_bytes())) != record:  # another command wrote it at the same moment
    raise Busy(_refusal(path, holder, liveness=False))

  def release():
    if path.exists() and _record(path.read_bytes()) == record:
      path.unlink()

  return release


def _record(data: bytes) -> dict:
  """The holder's record; {} for a file cut short or not yet written."""
  try:
    record = json.loads(data)
  except ValueError:
    return {}
  return record if isinstance(record, dict) else {}


def _gone(holder: dict) -> bool:
  """Whether the holder is known to have ended: a process of this host that no longer runs."""
  if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
    return False
  try:
    os.kill(holder["pid"], 0)
  except ProcessLookupError:
    return True
  except PermissionError:  # another user's process: running
    pass
  return False


def _refusal(path: epath.Path, holder: dict, *, liveness: bool) -> str:
  """The refusal naming the holder; without `liveness` (no flock) it may be gone: say so."""
  who = (
    f"{holder.get('what', 'a wyjax command')} (process {holder['pid']} on {holder.get('host')}, since "
    f"{holder.get('since')})"
    if "pid" in holder
    else "another wyjax command"
  )
  message = f"{path.parent} is being written by {who}; wait until it ends, or choose another folder"
  if not liveness:
    message += f" (if that process is gone, delete {path}: a bucket cannot tell)"
  return message

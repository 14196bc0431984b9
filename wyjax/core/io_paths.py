"""Outputs never land in inputs: a command refuses, before any work and `--overwrite` or not.

Each command names the paths it reads and writes by the flags the user typed; it refuses
- an output that is an input or lies inside one (`predict --output=MODEL/vocab.txt`);
- an input inside what it writes in its output folder (`finetune --config.init=WORKDIR/seed_0`);
- an output folder that is a file or a link to nothing, or lies under a file (check_folder).

Paths compare by what they name (storage.place: links, `..`, a trailing slash). Standard output
redirected to a file (`> M/vocab.txt`) is that file.
"""

import errno
import fnmatch
import os

from wyjax.core import guards, storage

STDOUT = "-"


def _named(path) -> str | None:
  """The place `path` names (storage.place); None for no path."""
  return storage.place(os.fspath(path)) if path else None


def _redirected_stdout() -> str | None:
  """The file standard output is redirected to (`> M/vocab.txt`); None for a terminal or a pipe."""
  target = os.path.realpath("/proc/self/fd/1")
  return target if os.path.isfile(target) else None


def inside(path, folder) -> bool:
  """Whether `path` is `folder` or lies inside it, by what they name."""
  path, folder = _named(path), _named(folder)
  if path is None or folder is None:
    return False
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_apart(outputs: dict, inputs: dict, command: str) -> None:
  """Refuses an output ({flag as typed: path}; stdout as "-") that is one of the inputs ({flag: path}) or inside one."""
  for out_flag, out in outputs.items():
    target = _redirected_stdout() if out == STDOUT else out
    for in_flag, read in inputs.items():
      if not inside(target, read):
        continue
      where = "is" if _named(target) == _named(read) else "lies inside"
      if out == STDOUT:
        raise guards.RunError(
          f"standard output ({target}) {where} {in_flag} {read}, which {command} reads: redirect it elsewhere"
        )
      raise guards.RunError(
        f"{out_flag} {out} {where} {in_flag} {read}, which {command} reads; writing there would "
        f"change what it reads: choose another {out_flag}"
      )


def check_not_written(folder_flag: str, folder, written, inputs: dict, command: str) -> None:
  """Refuses an input ({flag: path}) inside an entry `command` writes in `folder` (`written`: fnmatch patterns)."""
  for flag, read in inputs.items():
    if not inside(read, folder) or _named(read) == _named(folder):
      continue
    entry = os.path.relpath(_named(read), _named(folder)).split(os.sep)[0]
    if any(fnmatch.fnmatchcase(entry, pattern) for pattern in written):
      raise guards.RunError(
        f"{flag} {read} lies inside {entry} of {folder_flag} {folder}, which {command} writes (and "
        f"replaces): copy it outside {folder}, or choose another {folder_flag}"
      )


def check_folder(flag: str, folder) -> None:
  """Refuses an output folder (the value of `flag`) that exists as no folder, or lies under a file; one line, named."""
  folder = os.fspath(folder)
  if not storage.is_local(folder):
    return
  place = os.path.normpath(folder)  # then the nearest of its parents that exists (or is a link)
  while not os.path.lexists(place) and os.path.dirname(place) not in ("", place):
    place = os.path.dirname(place)
  if os.path.isdir(place) or not os.path.lexists(place):  # a folder, or one to be made
    return
  which = f"{flag} {folder}" if place == os.path.normpath(folder) else f"{flag} {folder} lies under {place}, which"
  raise guards.RunError(f"{which} {_not_a_folder(place)}; choose a folder, or a name that is free")


def _not_a_folder(path: str) -> str:
  """What `path`, there (or a link) and no folder, is, for a message."""
  if not os.path.islink(path) or os.path.exists(path):
    return "is a file, not a folder"
  try:
    os.stat(path)
  except OSError as e:
    if e.errno == errno.ELOOP:
      return "is a symbolic link in a loop"
  return f"is a symbolic link to {os.readlink(path)}, which does not exist"

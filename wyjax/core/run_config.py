"""What a rerun of a workdir may continue.

- WORKDIR/run_config.json holds the run's config. A rerun whose config differs in what changes the
  training (model, data, batch size, steps, learning rate, ...) is refused, listing the differences,
  unless accepted (then appended to config_changes.jsonl). How a run executes or is observed (the mesh,
  intervals) may change; paths compare by the folder they name, a relative one as typed in the
  working directory run_config.json records.
- WORKDIR/data_files.json holds the size and SHA-256 of every data file the runs read: a rerun over
  changed files is refused, naming them. `set_aside` moves the old runs aside for a fresh start.
- `trim_metrics` drops the records of the steps a resumed run recomputes.
"""

import contextlib
import datetime
import fnmatch
import json
import logging
import os

import jax
import ml_collections
from etils import epath
from jax.experimental import multihost_utils

from wyjax.core import guards, io_paths, storage

CONFIG = "run_config.json"  # not config.json: that name marks a transformers folder
WORKING_DIRECTORY = "working_directory"  # run_config.json's one key that is no config's: where its paths were typed
CHANGES = "config_changes.jsonl"
DATA = "data_files.json"
PREVIOUS = "previous-"  # WORKDIR/previous-<time>/: runs set aside for a fresh start


class ConfigChanged(guards.RunError):
  """The config differs from the one the workdir's run was made with."""


def flatten(tree: dict, prefix: str = "") -> dict:
  """{'a.b': value} for nested dicts; values as JSON would store them (tuples → lists)."""
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = json.loads(json.dumps(value))
  return out


def _ignored(key: str, ignore) -> bool:
  return any(key == i or key.startswith(i + ".") for i in ignore)


def check_config(
  workdir, config: ml_collections.ConfigDict, *, ignore=(), defaults=None, accept: bool = False, places=None
) -> dict:
  """{key: (stored, new)}: how config differs from WORKDIR/run_config.json outside `ignore`; writes nothing.

  A key the stored config lacks counts as its value in `defaults` (the base config). `places` maps the
  keys that name files or folders to what compares them (storage.place).

  Raises:
    ConfigChanged: listing the changes, unless `accept` (then they are logged).
  """
  workdir = epath.Path(workdir)
  if not (workdir / CONFIG).exists():
    return {}
  record = storage.read_json(workdir / CONFIG)
  typed_in = record.pop(WORKING_DIRECTORY, None)
  stored = {**(flatten(defaults.to_dict()) if defaults else {}), **flatten(record)}
  current = flatten(config.to_dict())
  place = lambda key, value: (places or {}).get(key, lambda v: v)(value)
  changes = {}
  for key in sorted(set(stored) | set(current)):
    old, new = stored.get(key, "<absent>"), current.get(key, "<absent>")
    if not _ignored(key, ignore) and _stored_place(typed_in, lambda: place(key, old)) != place(key, new):
      changes[key] = (old, new)
  if changes:
    listing = "\n".join(f"  {k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())
    if not accept:
      raise ConfigChanged(
        f"{workdir} holds a run made with another config; continuing it would mix two trainings:\n{listing}\n"
        "Rerun with the stored config (WORKDIR/run_config.json), use another --workdir, or pass "
        "--accept_config_change to continue with these changes (they are logged)."
      )
    logging.warning("continuing %s with an accepted config change:\n%s", workdir, listing)
  return changes


def _stored_place(typed_in: str | None, place):
  """place() of a stored value, as in the working directory it was typed in (when that still is one).

  A relative path names the place it named there, whichever folder the rerun starts from.
  """
  if not typed_in or typed_in == os.getcwd() or not os.path.isdir(typed_in):
    return place()
  with contextlib.chdir(typed_in):  # (a place function may resolve links, or ask whether a path exists)
    return place()


def store_config(workdir, config: ml_collections.ConfigDict, changes: dict, data: dict | None = None) -> None:
  """Writes run_config.json (the config, and the working directory its paths were typed in) and the records.

  `changes` are appended to config_changes.jsonl, and `data` written to data_files.json.
  """
  workdir = epath.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  if changes:
    record = {
      "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
      "changes": {k: {"old": old, "new": new} for k, (old, new) in changes.items()},
    }
    logged = (workdir / CHANGES).read_text() if (workdir / CHANGES).exists() else ""  # no appending in a bucket
    with storage.written_whole(workdir / CHANGES, encoding="utf-8") as f:  # the history, never cut short
      f.write(logged + json.dumps(record, ensure_ascii=False) + "\n")
  storage.write_json(workdir / CONFIG, {**config.to_dict(), WORKING_DIRECTORY: os.getcwd()})
  if data is not None:
    storage.write_json(workdir / DATA, data)


class DataChanged(guards.RunError):
  """The data files differ from those the workdir's runs were made from."""


def data_fingerprint(data_dir, files: dict) -> dict:
  """{split: {file (relative to data_dir): {"bytes", "sha256"}}} of `files`, {split: [paths]}."""
  fingerprint = {}
  for split, paths in files.items():
    fingerprint[split] = {}
    for path in map(epath.Path, paths):
      fingerprint[split][os.path.relpath(path, data_dir)] = {
        "bytes": path.stat().length,
        "sha256": storage.file_sha256(path),
      }
  return fingerprint


FRESH_START = (
  "Pass --fresh_start to set those runs aside (WORKDIR/previous-<time>/) and train afresh, or use another --workdir."
)


def check_data(workdir, fingerprint: dict, remedy: str = FRESH_START) -> None:
  """Raises DataChanged naming each file that differs from WORKDIR/data_files.json, and `remedy`; writes nothing.

  A workdir without data_files.json passes (with a warning when it holds a run).
  """
  workdir = epath.Path(workdir)
  if not (workdir / DATA).exists():
    if (workdir / CONFIG).exists():
      logging.warning("%s: no record of the data its runs read (%s); taking it to be these files", workdir, DATA)
    return
  stored = storage.read_json(workdir / DATA)
  changes = []
  for split in sorted(set(stored) | set(fingerprint)):
    old, new = stored.get(split, {}), fingerprint.get(split, {})
    for name in sorted(set(old) | set(new)):
      if name not in new:
        changes.append(f"  {split}: {name} is no longer read")
      elif name not in old:
        changes.append(f"  {split}: {name} is new")
      elif old[name] != new[name]:
        changes.append(
          f"  {split}: {name} changed ({old[name]['bytes']:,} bytes, sha256 {old[name]['sha256'][:12]} "
          f"-> {new[name]['bytes']:,} bytes, sha256 {new[name]['sha256'][:12]})"
        )
  if changes:
    raise DataChanged(
      f"{workdir} holds runs made from other data; continuing would keep their scores as if made from these files:\n"
      + "\n".join(changes)
      + "\n"
      + remedy
    )


def check_unclaimed(workdir, written: tuple[str, ...]) -> None:
  """Refuses a workdir without run_config.json that holds entries named as the command's own (`written`).

  Those are the user's (a `submission/` in a project folder), which a run would write over.
  """
  workdir = epath.Path(workdir)
  if not workdir.exists() or (workdir / CONFIG).exists():
    return
  theirs = sorted(p.name for p in workdir.iterdir() if _matches(p.name, (CHANGES, DATA, *written)))
  if theirs:
    raise guards.RunError(
      f"--workdir {workdir} holds {', '.join(theirs)}, named as a run's own files but written by "
      f"no run (it has no {CONFIG}); choose another --workdir, or move them"
    )


def check_reads(workdir, written: tuple[str, ...], reads: dict, command: str) -> None:
  """Refuses a --workdir that is no folder, is or lies in a path the run reads, or holds a read path it writes.

  `reads`: {flag as typed: path}. What the run writes: the records store_config writes, and `written`
  (fnmatch patterns).
  """
  io_paths.check_folder("--workdir", workdir)
  io_paths.check_apart({"--workdir": workdir}, reads, command)
  io_paths.check_not_written("--workdir", workdir, (CONFIG, CHANGES, DATA, *written), reads, command)


def _matches(name: str, patterns) -> bool:
  return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def set_aside(workdir, written: tuple[str, ...]) -> None:
  """Moves what earlier runs wrote in `workdir` into WORKDIR/previous-<UTC time>/, for a fresh start.

  Moved: the records store_config writes and the entries `written` (fnmatch patterns) names; never a
  user's file. Process 0 moves them; the others wait for it.
  """
  workdir = epath.Path(workdir)
  earlier = (
    [p for p in workdir.iterdir() if _matches(p.name, (CONFIG, CHANGES, DATA, *written))] if workdir.exists() else []
  )
  if earlier and jax.process_index() == 0:
    aside = workdir / (PREVIOUS + datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S"))
    aside.mkdir()
    for path in earlier:
      path.rename(aside / path.name)
    logging.warning("starting afresh: the earlier runs of %s are now in %s", workdir, aside)
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("earlier runs set aside")


def metric_keys(workdir, step: int) -> set[str]:
  """The metrics WORKDIR/metrics.jsonl records of `step` (a line cut off by a kill skipped)."""
  path = epath.Path(workdir) / "metrics.jsonl"
  keys = set()
  for line in path.read_text().splitlines() if path.exists() else ():
    try:
      record = json.loads(line)
    except ValueError:
      continue
    if record.get("step") == step:
      keys |= record.keys() - {"step"}
  return keys


def trim_metrics(workdir, last_step: int) -> None:
  """Drops the records of steps after `last_step` from WORKDIR/metrics.jsonl, and a line cut off by a kill."""
  path = epath.Path(workdir) / "metrics.jsonl"
  if not path.exists():
    return
  kept, dropped, broken = [], 0, 0
  for line in path.read_text().splitlines():
    try:
      record = json.loads(line)
    except ValueError:
      broken += 1
      continue
    if record.get("step", 0) <= last_step:
      kept.append(line)
    else:
      dropped += 1
  if dropped or broken:
    logging.info("%s: dropped %d records after step %d and %d cut-off lines", path, dropped, last_step, broken)
    partial = path.parent / (path.name + ".partial")
    partial.write_text("".join(line + "\n" for line in kept))
    partial.replace(path)

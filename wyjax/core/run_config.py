"""What a rerun of a workdir may continue.

A run stores its config in WORKDIR/run_config.json. Rerunning with a config that differs in
anything that changes the training (model, data, batch size, steps, learning rate, ...) is
refused with the differences listed, unless the user accepts them explicitly; accepted
changes are logged and appended to WORKDIR/config_changes.jsonl. Keys that only change how
a run is executed or observed (the mesh, logging and evaluation intervals, ...) may change.

A resumed run recomputes the steps after its checkpoint, so `trim_metrics` first drops their
records from metrics.jsonl: every step is recorded once, by the run that kept it.
"""
import datetime
import json
import logging

import ml_collections
from etils import epath

from wyjax.core import guards, storage

CONFIG = "run_config.json"  # not config.json: that name marks a transformers folder
CHANGES = "config_changes.jsonl"


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


def check_config(workdir, config: ml_collections.ConfigDict, *, ignore=(), defaults=None,
                 accept: bool = False) -> dict:
  """{key: (stored, new)}: how config differs from WORKDIR/run_config.json outside `ignore`.
  A key the stored config lacks (added to wyjax after the run began) counts as its value in
  `defaults` (the base config): the run was made with that behaviour. Raises ConfigChanged
  listing the changes unless `accept` (then they are logged). Writes nothing: `store_config`
  does, once the run has really continued."""
  workdir = epath.Path(workdir)
  if not (workdir / CONFIG).exists():
    return {}
  stored = {**(flatten(defaults.to_dict()) if defaults else {}), **flatten(storage.read_json(workdir / CONFIG))}
  current = flatten(config.to_dict())
  changes = {k: (stored.get(k, "<absent>"), current.get(k, "<absent>")) for k in sorted(set(stored) | set(current))
             if not _ignored(k, ignore) and stored.get(k, "<absent>") != current.get(k, "<absent>")}
  if changes:
    listing = "\n".join(f"  {k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())
    if not accept:
      raise ConfigChanged(
          f"{workdir} holds a run made with another config; continuing it would mix two trainings:\n{listing}\n"
          "Rerun with the stored config (WORKDIR/run_config.json), use another --workdir, or pass "
          "--accept_config_change to continue with these changes (they are logged).")
    logging.warning("continuing %s with an accepted config change:\n%s", workdir, listing)
  return changes


def store_config(workdir, config: ml_collections.ConfigDict, changes: dict) -> None:
  """Writes WORKDIR/run_config.json and appends accepted `changes` to config_changes.jsonl."""
  workdir = epath.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  if changes:
    record = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "changes": {k: {"old": old, "new": new} for k, (old, new) in changes.items()}}
    logged = (workdir / CHANGES).read_text() if (workdir / CHANGES).exists() else ""  # no appending in a bucket
    with storage.written_whole(workdir / CHANGES, encoding="utf-8") as f:  # the history, never cut short
      f.write(logged + json.dumps(record, ensure_ascii=False) + "\n")
  storage.write_json(workdir / CONFIG, config.to_dict())


def trim_metrics(workdir, last_step: int) -> None:
  """Drops the records of steps after `last_step` from WORKDIR/metrics.jsonl (they belong to
  the part of an interrupted run the resumed one recomputes), and a line cut off by a kill."""
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

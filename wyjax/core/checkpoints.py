"""The wyjax checkpoint layout, shared by pretraining, fine-tuning and export, and its integrity rules.

    workdir/
      model.json                   {"encoder": EncoderConfig fields, "heads": [...],
                                   "vocab_sha256": its vocabulary in order}; its scan_layers
                                   says whether the params' layers are stacked
      tokenizer/                   vocab.txt and the other tokenizer files
      checkpoints/<step>/state     orbax PyTree: the train state; its `params` hold the model
                                   ({"encoder": ..., "mlm_head": ...})
      checkpoints/<step>/checksums.json
                                   SHA-256 and size of every file of the step, written once
                                   orbax has finished the save (`Writer`)

Other items (the data iterator of pretraining) sit beside `state` in each step folder.

Restoring (`restore_latest`) tells two failures apart:
- *incompatible* (tree, shapes or dtypes differ from the run's state): the run stops, naming the
  differing leaves, and nothing is touched;
- *unreadable* (fails its checksums, cannot be read, holds non-finite values): it is moved aside
  (`unreadable-<step>-<time>`, never deleted) and the previous one is tried.
"""

import concurrent.futures
import json
import logging
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from jax.experimental import multihost_utils

from wyjax.core import guards, storage

STATE = "state"
CHECKSUMS = "checksums.json"
_TMP_SUFFIX = ".orbax-checkpoint-tmp"  # orbax's name for a step folder being written


class IncompatibleCheckpoint(guards.RunError):
  """The checkpoint's tree differs from the state this config builds."""


class CheckpointSaveError(guards.RunError):
  """An (async) save failed; the checkpoints before it are intact."""


def manager(
  workdir, *, folder: str = "checkpoints", max_to_keep: int | None = 3, extra_handlers=None, **options
) -> ocp.CheckpointManager:
  """The CheckpointManager of workdir/folder; `extra_handlers` adds items beside `state`.

  Temporary folders of saves that never finished (a killed process) are removed on opening.
  """
  options.setdefault("cleanup_tmp_directories", not options.get("read_only", False))
  workdir = epath.Path(workdir)
  mngr = ocp.CheckpointManager(
    (workdir.absolute() if storage.is_local(workdir) else workdir) / folder,
    options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, **options),
    item_handlers={STATE: ocp.PyTreeCheckpointHandler(), **(extra_handlers or {})},
  )
  # Orbax removes those folders in a background thread; a run refused right after opening
  # (a changed config) would exit under it. Orbax 0.12 has no public wait for it.
  mngr._maybe_await_cleanup_tmp_directory()  # pylint: disable=protected-access
  return mngr


# --- integrity -------------------------------------------------------------------------------------


def _files(folder: epath.Path):
  for path in sorted(folder.iterdir()):
    if path.is_dir():
      yield from _files(path)
    elif path.name != CHECKSUMS:
      yield path


def seal(step_dir) -> None:
  """Writes step_dir/checksums.json (atomically: a partial file is never read as a seal)."""
  step_dir = epath.Path(step_dir)
  sums = {
    str(p.relative_to(step_dir)): {"size": p.stat().length, "sha256": storage.file_sha256(p)} for p in _files(step_dir)
  }
  partial = step_dir / (CHECKSUMS + ".partial")
  partial.write_text(json.dumps(sums, indent=1, sort_keys=True))
  partial.replace(step_dir / CHECKSUMS)


def integrity_problem(step_dir) -> str | None:
  """What is wrong with a step folder against its checksums; None when it matches or has none (logged as unverified)."""
  step_dir = epath.Path(step_dir)
  if not (step_dir / CHECKSUMS).exists():
    logging.warning("%s has no %s: restored without verification", step_dir, CHECKSUMS)
    return None
  try:
    expected = json.loads((step_dir / CHECKSUMS).read_text())
  except ValueError as e:
    return f"{CHECKSUMS} is not valid JSON ({e})"
  for name, want in expected.items():
    path = step_dir / name
    if not path.exists():
      return f"{name} is missing"
    if path.stat().length != want["size"]:
      return f"{name} has {path.stat().length} bytes, {want['size']} were written"
    if storage.file_sha256(path) != want["sha256"]:
      return f"{name} does not match its SHA-256 (corrupted)"
  return None


def agreed_problem(find, elsewhere: str) -> str | None:
  """find() (a problem, or None), computed by process 0 alone; the others get `elsewhere`, so all stop or go on."""
  problem = find() if jax.process_index() == 0 else None
  if jax.process_count() > 1:
    bad = multihost_utils.broadcast_one_to_all(np.int32(problem is not None))
    problem = problem or (elsewhere if bad else None)
  return problem


class Writer:
  """Saves through a CheckpointManager and seals each save (checksums.json) once orbax has finished it.

  Sealing runs in a background thread on process 0; a failed async save raises CheckpointSaveError at
  the next `poll()`, a step later.
  """

  def __init__(self, mngr: ocp.CheckpointManager):
    self.mngr = mngr
    self._unsealed: list[int] = []
    self._sealing = concurrent.futures.ThreadPoolExecutor(1) if jax.process_index() == 0 else None
    self._seals: list[concurrent.futures.Future] = []

  def save(self, step: int, args, *, force: bool = False) -> bool:
    self.poll()
    try:
      started = self.mngr.save(step, args=args, force=force)
    except Exception as e:  # this (synchronous) save's error, or the pending one's that orbax waited for
      self._unsealed = self._unsealed or [step]
      self._fail(e)
    if started:
      self._unsealed.append(step)
    return started

  def save_now(self, step: int, state, **items) -> None:
    """Saves `state` (and `items`, orbax args by name) at `step`, and waits until it is sealed."""
    self.save(step, ocp.args.Composite(**{STATE: ocp.args.PyTreeSave(state)}, **items), force=True)
    self.wait()

  def poll(self) -> None:
    """Raises a failed save's error now; seals the saves orbax has finished."""
    if not self._unsealed or self.mngr.is_saving_in_progress():
      return
    try:
      self.mngr.check_for_errors()
      self.mngr.wait_until_finished()  # returns at once, raising what the finished save raised
    except Exception as e:  # whatever the storage raised (disk full, permissions, ...)
      self._fail(e)
    if self._sealing is not None:
      self._seals += [self._sealing.submit(self._seal, s) for s in self._unsealed]
    self._unsealed = []

  def _seal(self, step: int) -> None:
    try:
      seal(epath.Path(self.mngr.directory) / str(step))
    except OSError as e:  # e.g. the step was already rotated out by max_to_keep
      logging.warning("checkpoint %d not sealed: %s", step, e)

  def _fail(self, error: Exception):
    directory = epath.Path(self.mngr.directory)
    try:  # the save's other writers may still be at work: let them end before cleaning up
      self.mngr.wait_until_finished()
    except Exception:  # pylint: disable=broad-except  # the same failure, reported below
      pass
    for partial in directory.glob(f"*{_TMP_SUFFIX}*"):
      partial.rmtree()
    failed, self._unsealed = self._unsealed, []
    self.mngr.reload()
    cause = str(error).split(" [tensorstore_spec=")[0]  # (tensorstore appends a screenful of its spec)
    raise CheckpointSaveError(
      f"saving checkpoint {failed or '?'} in {directory} failed ({type(error).__name__}: {cause}); its "
      f"partial files were removed. Intact checkpoints: {self.mngr.all_steps() or 'none'}. Fix the cause "
      "(e.g. free disk space) and rerun the same command to resume from the latest of them."
    ) from error

  def wait(self) -> None:
    """Until the saves started so far are finished and sealed."""
    try:
      self.mngr.wait_until_finished()
    except Exception as e:
      self._fail(e)
    self.poll()
    concurrent.futures.wait(self._seals)
    self._seals = []

  def close(self) -> None:
    self.wait()
    if self._sealing is not None:
      self._sealing.shutdown()
    self.mngr.close()


# --- restore -----------------------------------------------------------------------------------------


def tree_differences(saved_tree, target) -> list[str]:
  """'path: checkpoint …, this run …' for each leaf whose presence, shape or dtype differs from `target`'s."""

  def name(key) -> str:  # orbax stores NamedTuple fields as dict keys: compare by name
    return str(getattr(key, "key", getattr(key, "idx", getattr(key, "name", key))))

  def leaves(tree):
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {"/".join(name(k) for k in path): leaf for path, leaf in flat}

  saved, wanted = leaves(saved_tree), leaves(target)
  describe = lambda x: f"{tuple(x.shape)} {np.dtype(x.dtype).name}"
  out = [f"{k}: not in the checkpoint" for k in wanted if k not in saved]
  out += [f"{k}: in the checkpoint only" for k in saved if k not in wanted]
  out += [
    f"{k}: checkpoint {describe(saved[k])}, this run {describe(wanted[k])}"
    for k in wanted
    if k in saved
    and (tuple(saved[k].shape) != tuple(wanted[k].shape) or np.dtype(saved[k].dtype) != np.dtype(wanted[k].dtype))
  ]
  return sorted(out, key=lambda line: not line.startswith("params/"))  # the model's own leaves first


def move_aside(mngr: ocp.CheckpointManager, step: int, reason: str = "unreadable") -> None:
  """Renames a step folder to <reason>-<step>-<time> (orbax no longer sees it; nothing is deleted)."""
  if jax.process_index() == 0:
    step_dir = epath.Path(mngr.directory) / str(step)
    step_dir.rename(step_dir.parent / f"{reason}-{step}-{int(time.time())}")
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(f"moved aside {step}")
  mngr.reload()


def restore_latest(mngr: ocp.CheckpointManager, abstract_state) -> tuple[dict | None, int]:
  """(state, step) of the latest intact checkpoint, restored into abstract_state's shardings; (None, 0) if none.

  Raises:
    IncompatibleCheckpoint: the latest readable checkpoint does not fit abstract_state (nothing touched).
  """
  for step in sorted(mngr.all_steps(), reverse=True):
    problem = agreed_problem(
      lambda: integrity_problem(epath.Path(mngr.directory) / str(step)), "failed its checksums on process 0"
    )
    state = None
    if problem is None:
      try:
        saved = mngr.item_metadata(step)[STATE].tree
      except Exception as e:  # orbax raises many types for truncated or corrupted files
        problem = f"metadata unreadable ({type(e).__name__}: {str(e)[:300]})"
    if problem is None:
      differences = tree_differences(saved, abstract_state)
      if differences:
        raise IncompatibleCheckpoint(
          f"checkpoint {step} in {mngr.directory} does not fit the state this config builds "
          f"({len(differences)} differences):\n  "
          + "\n  ".join(differences[:20])
          + "\nRerun with the config the checkpoint was made with, or use another --workdir "
          "(nothing was changed in this one)."
        )
      try:
        state = mngr.restore(
          step,
          args=ocp.args.Composite(
            **{
              STATE: ocp.args.PyTreeRestore(
                abstract_state, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract_state)
              )
            }
          ),
        )[STATE]
      except Exception as e:
        problem = f"{type(e).__name__}: {str(e)[:300]}"
    if problem is None and not bool(guards.all_finite(state)):
      problem = "it holds NaN or Inf values"
    if problem is None:
      return state, step
    logging.warning("checkpoint %d is unreadable (%s); moved aside, falling back to the previous one", step, problem)
    move_aside(mngr, step)
  return None, 0


def remove_steps(folder) -> None:
  """Removes a checkpoint folder's steps (what was set aside stays), and the folder if that empties it."""
  folder = epath.Path(folder)
  for path in folder.iterdir():
    if path.name.isdigit():
      path.rmtree()
  if folder.exists() and not any(folder.iterdir()):  # (a bucket has no empty folders)
    folder.rmdir()


def best_run(workdir) -> epath.Path:
  """The best seed's folder of a fine-tuning workdir: results.json's best_run, by name, inside `workdir` itself."""
  results = epath.Path(workdir) / "results.json"
  best = storage.read_json(results).get("best_run")
  if not best:
    raise ValueError(f"{results} names no best_run: not a fine-tuning run with checkpoints")
  run = epath.Path(workdir) / epath.Path(best).name
  if not run.is_dir():
    raise FileNotFoundError(f"{results}: its best run {run.name} is not in {workdir} (copied without it?)")
  return run


def tokenizer_dir(workdir) -> epath.Path:
  return _workdir_of(epath.Path(workdir)) / "tokenizer"


def write_model_info(workdir, encoder: dict, heads, tokenizer=None) -> None:
  """Writes a workdir's model.json (encoder config, heads' names, vocabulary SHA-256) and tokenizer/."""
  workdir = epath.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  info = {"encoder": encoder, "heads": sorted(heads)}
  if tokenizer is not None:
    info["vocab_sha256"] = storage.lines_sha256(tokenizer.vocab)
  storage.write_json(workdir / "model.json", info)
  if tokenizer is not None:
    tokenizer.save(tokenizer_dir(workdir))


def read_model_info(workdir) -> tuple[dict, list[str]]:
  """(the encoder's config fields, the heads' names) of model.json."""
  info = _model_info(workdir)
  return info["encoder"], info["heads"]


def vocab_sha256(workdir) -> str | None:
  """The SHA-256 of the vocabulary, in order, that model.json records (None before wyjax recorded it)."""
  return _model_info(workdir).get("vocab_sha256")


def _model_info(workdir) -> dict:
  info_file = _model_workdir(epath.Path(workdir)) / "model.json"
  if not info_file.exists():
    raise FileNotFoundError(
      f"{workdir} is neither a transformers folder (config.json) nor a wyjax workdir (model.json)"
    )
  return storage.read_json(info_file)


def model_files(path) -> list[epath.Path]:
  """The files a model is restored from, in a workdir or one step's folder.

  model.json, tokenizer/, and the step's checksums.json (its SHA-256s stand for the step's files), else
  the step's files.
  """
  workdir, step_dir = _step_dir(path)
  tokenizer = [p for p in sorted(tokenizer_dir(workdir).glob("*")) if p.is_file()]
  sealed = step_dir / CHECKSUMS
  return [workdir / "model.json", *tokenizer, *([sealed] if sealed.exists() else _files(step_dir))]


def _workdir_of(path: epath.Path) -> epath.Path:
  """workdir from workdir, workdir/checkpoints or workdir/checkpoints/<step>."""
  for candidate in (path, path.parent, path.parent.parent):
    if (candidate / "model.json").exists():
      return candidate
  return path


def _model_workdir(path: epath.Path) -> epath.Path:
  """_workdir_of(path), refusing a fine-tuning workdir (one model per seed) by naming what holds one model."""
  workdir = _workdir_of(path)
  if not (workdir / "model.json").exists() and (path / "results.json").exists():
    raise FileNotFoundError(
      f"{path} is a fine-tuning workdir, which holds one model per seed: name one of its seed runs, "
      f"{best_run(path)} (its best), or its export (python -m wyjax.export --checkpoint={path} --out=DIR, "
      "then that folder)"
    )
  return workdir


def _step_dir(path) -> tuple[epath.Path, epath.Path]:
  """(workdir, the step folder a model is read from): `path` itself if it is a step's folder, else the latest."""
  path = epath.Path(path)
  workdir = _model_workdir(path)
  step = int(path.name) if path.name.isdigit() and path.parent.name == "checkpoints" else None
  with manager(workdir, max_to_keep=None, read_only=True) as mngr:
    if step is None and (step := mngr.latest_step()) is None:
      raise FileNotFoundError(f"{workdir / 'checkpoints'}: no checkpoint")
    if step not in mngr.all_steps():
      raise FileNotFoundError(f"{path}: no such checkpoint; {workdir / 'checkpoints'} holds steps {mngr.all_steps()}")
    return workdir, epath.Path(mngr.directory) / str(step)


def restore_model(path) -> tuple[dict, dict]:
  """(the encoder's config fields, params as numpy) from a workdir (latest step) or one step's folder.

  A step that fails its checksums, or cannot be read, is one line (ValueError) naming its folder, what
  is wrong and an earlier step's folder to name instead.
  """
  config, _ = read_model_info(path)
  workdir, step_dir = _step_dir(path)
  step = int(step_dir.name)
  with manager(workdir, max_to_keep=None, read_only=True) as mngr:
    problem = integrity_problem(step_dir)
    if problem is None:
      try:
        params = _restored_params(mngr, step)
      except Exception as e:  # orbax raises many types for files cut short, damaged or missing
        cause = str(e).split(" [tensorstore_spec=")[0].splitlines()[0][:300]  # (tensorstore appends its spec)
        unsealed = "" if (step_dir / CHECKSUMS).exists() else f", and it has no {CHECKSUMS} to tell which file"
        problem = f"it cannot be read ({type(e).__name__}: {cause}){unsealed}"
    if problem:
      earlier = [s for s in mngr.all_steps() if s < step]
      instead = f"name an earlier step's folder, {step_dir.parent / str(max(earlier))}, or " if earlier else ""
      raise ValueError(f"{step_dir} is corrupt: {problem}; {instead}copy {workdir} again from where it was made")
  return config, params


def _restored_params(mngr: ocp.CheckpointManager, step: int) -> dict:
  """The params (numpy) of step's state."""
  metadata = mngr.item_metadata(step)[STATE]
  if metadata is None:  # (orbax reads a missing _METADATA as no metadata)
    raise FileNotFoundError(f"{STATE}/_METADATA is missing")
  params_meta = {"params": metadata.tree["params"]}
  restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), params_meta)
  restored = mngr.restore(
    step,
    args=ocp.args.Composite(
      state=ocp.args.PyTreeRestore(item=params_meta, restore_args=restore_args, partial_restore=True)
    ),
  )
  return restored[STATE]["params"]

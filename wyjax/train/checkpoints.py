"""The wyjax checkpoint layout, shared by pretraining, fine-tuning and export.

    workdir/
      model.json                   {"encoder": EncoderConfig fields, "heads": [...]}
      tokenizer/                   vocab.txt and the other tokenizer files
      checkpoints/<step>/state     orbax PyTree: the train state; its `params` hold the model
                                   ({"encoder": ..., "mlm_head": ...})

Other items (the data iterator of pretraining) sit beside `state` in each step folder.
"""
import json
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp

from wyjax.models import EncoderConfig

STATE = "state"


def manager(workdir, *, max_to_keep: int | None = 3, extra_handlers=None,
            **options) -> ocp.CheckpointManager:
  """The workdir's CheckpointManager; `extra_handlers` adds items beside `state`."""
  return ocp.CheckpointManager(
      pathlib.Path(workdir).absolute() / "checkpoints",
      options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, **options),
      item_handlers={STATE: ocp.PyTreeCheckpointHandler(), **(extra_handlers or {})})


def tokenizer_dir(workdir) -> pathlib.Path:
  return _workdir_of(pathlib.Path(workdir)) / "tokenizer"


def write_model_info(workdir, config: EncoderConfig, heads, tokenizer=None) -> None:
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  info = {"encoder": config.to_dict(), "heads": sorted(heads)}
  (workdir / "model.json").write_text(json.dumps(info, indent=2))
  if tokenizer is not None:
    tokenizer.save(tokenizer_dir(workdir))


def read_model_info(workdir) -> tuple[EncoderConfig, list[str]]:
  info_file = _workdir_of(pathlib.Path(workdir)) / "model.json"
  if not info_file.exists():
    raise FileNotFoundError(
        f"{workdir} is neither a transformers folder (config.json) nor a wyjax workdir (model.json)")
  info = json.loads(info_file.read_text())
  return EncoderConfig.from_dict(info["encoder"]), info["heads"]


def save_params(workdir, step: int, params, config: EncoderConfig, tokenizer=None) -> None:
  """A checkpoint holding only params (e.g. a converted or randomly initialised model)."""
  write_model_info(workdir, config, [h for h in params if h != "encoder"], tokenizer)
  with manager(workdir) as mngr:
    mngr.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"params": params})))
    mngr.wait_until_finished()


def _workdir_of(path: pathlib.Path) -> pathlib.Path:
  """workdir from workdir, workdir/checkpoints or workdir/checkpoints/<step>."""
  for candidate in (path, path.parent, path.parent.parent):
    if (candidate / "model.json").exists():
      return candidate
  return path


def restore_model(path) -> tuple[EncoderConfig, dict]:
  """(config, params as numpy) from a workdir (latest step) or one step's folder."""
  path = pathlib.Path(path)
  workdir = _workdir_of(path)
  config, _ = read_model_info(workdir)
  step = int(path.name) if path.name.isdigit() and path.parent.name == "checkpoints" else None
  with manager(workdir, max_to_keep=None, read_only=True) as mngr:
    step = mngr.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"{workdir / 'checkpoints'}: no checkpoint")
    metadata = mngr.item_metadata(step)[STATE]
    params_meta = {"params": metadata.tree["params"]}
    restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), params_meta)
    restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        item=params_meta, restore_args=restore_args, partial_restore=True)))
  return config, restored[STATE]["params"]

"""Write a transformers folder: config.json, model.safetensors, tokenizer files, model card."""

import json

from etils import epath
from safetensors.numpy import save

from wyjax.core import checkpoints, locks, run_config, storage
from wyjax.data.tokenizer import Tokenizer
from wyjax.hf import card, configs, weights
from wyjax.hf.loading import VOCAB_KEY, Model
from wyjax.models import EncoderConfig

# Every file `export` writes (the tokenizer's four included): what a Hub upload sends.
FILES = (
  "config.json",
  "model.safetensors",
  "README.md",
  "vocab.txt",
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
)
LEADERBOARD = "leaderboard.json"  # wyjax.tasks.leaderboard.write's scores, beside a checkpoint: the card's results


def check_out(out, overwrite: bool) -> epath.Path:
  """`out` (a folder or gs://…) as a Path.

  Raises FileExistsError when it holds anything (but the lock of the command writing it) and `overwrite`
  is not set.
  """
  out = epath.Path(out)
  entries = [p for p in out.iterdir() if p.name != locks.LOCK] if out.exists() else []
  if entries and not overwrite:
    raise FileExistsError(
      f"{out} is not empty ({len(entries)} entries); choose an empty or new "
      "folder, or pass --overwrite to replace the exported files in it"
    )
  return out


def replaces_own(out, record, flag: str = "--out") -> bool:
  """Whether `out` holds the command's own earlier export, to be replaced; checked before any work.

  For a command that exports into a folder of its own (the demo's DIR/hf) and records what it wrote there
  (`record_files`).

  Returns:
    True where `out` holds only files of the recorded export, unchanged; False where it is empty or new.

  Raises:
    FileExistsError: anything else is there (the user's README.md, a recorded file changed since), as
      wyjax.export refuses a non-empty --out without --overwrite; the message names `flag`.
  """
  out, record = epath.Path(out), epath.Path(record)
  entries = sorted(p.name for p in out.iterdir() if p.name != locks.LOCK) if out.exists() else []
  recorded = storage.read_json(record) if record.exists() else {}
  theirs = [name for name in entries if name not in recorded or recorded[name] != storage.file_sha256(out / name)]
  if theirs:
    raise FileExistsError(
      f"{out} holds {', '.join(theirs)}, which no earlier export of this command wrote there (or "
      f"which changed since); move them, or choose another {flag}"
    )
  return bool(entries)


def record_files(out, record) -> None:
  """Records the SHA-256 of each file in `out` (an export just written) in `record`: replaces_own's."""
  out = epath.Path(out)
  storage.write_json(record, {name: storage.file_sha256(out / name) for name in FILES if (out / name).exists()})


def run_info(path) -> tuple[dict | None, dict | None]:
  """What the card can tell about a checkpoint: (training, results).

  path: a wyjax workdir, its checkpoints/ or one step's folder, or a transformers folder.
  training: {"config": the folder's run_config.json, "step": the step exported}, None without one;
  results: its leaderboard.json, None without one.
  """
  path = epath.Path(path)
  folder = next((p for p in (path, path.parent, path.parent.parent) if (p / run_config.CONFIG).exists()), path)
  training = None
  if (folder / run_config.CONFIG).exists():
    step = int(path.name) if path.name.isdigit() and path.parent.name == "checkpoints" else None
    if step is None:
      with checkpoints.manager(folder, max_to_keep=None, read_only=True) as mngr:
        step = mngr.latest_step()
    training = {"config": storage.read_json(folder / run_config.CONFIG), "step": step}
  leaderboard = folder / LEADERBOARD
  return training, storage.read_json(leaderboard) if leaderboard.exists() else None


def check_tokenizer(tokenizer: Tokenizer | None, config: EncoderConfig) -> None:
  """An export ships the model's own tokenizer: one of its vocabulary's size."""
  if tokenizer is None:
    raise ValueError("export needs the model's tokenizer (vocab.txt beside the checkpoint)")
  if len(tokenizer) != config.vocab_size:
    raise ValueError(f"tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {config.vocab_size}")


def write(
  out, hf_config: dict, params, config: EncoderConfig, tokenizer: Tokenizer, readme: str, *, overwrite: bool = False
) -> epath.Path:
  """Writes `out` (FILES): config.json, the params as model.safetensors, the tokenizer's files and README.md.

  config.json carries the vocabulary's SHA-256 (loading.VOCAB_KEY). A folder that holds files is refused
  unless `overwrite` (then the exported files replace theirs; other files are left alone); without it no
  file is replaced, not even one that appeared meanwhile. All files are written together: a failure (a full
  disk, Ctrl-C) leaves none of them, and no old file beside a new one.
  """
  out = check_out(out, overwrite)
  state_dict = weights.to_hf(params, config, legacy=hf_config.get("legacy", True))
  hf_config = {**hf_config, VOCAB_KEY: storage.lines_sha256(tokenizer.vocab)}
  files = {
    "model.safetensors": save(state_dict, metadata={"format": "pt"}),
    "config.json": json.dumps(hf_config, indent=2, ensure_ascii=False) + "\n",
    **tokenizer.files(),
    "README.md": readme,
  }
  out.mkdir(parents=True, exist_ok=True)
  with storage.written_together([out / name for name in files], "wb", replace=overwrite) as handles:
    for handle, (name, content) in zip(handles, files.items()):
      with storage.named(out / name):
        handle.write(content if isinstance(content, bytes) else content.encode("utf-8"))
  return out


def export(
  model: Model,
  out,
  *,
  legacy: bool | None = None,
  name: str = "wyjax-model",
  license: str = "apache-2.0",
  results: dict | None = None,
  training: dict | None = None,
  base_model: str | None = None,
  task_data: str | None = None,
  overwrite: bool = False,
) -> epath.Path:
  """Writes `out`; the folder loads with transformers.AutoModelForMaskedLM unchanged.

  A replaced-token detector (a discriminator head, 'rtd_head', and no MLM head) of model_type bert or
  electra (the same numerics) is written as ElectraForPreTraining; one of deberta-v2 or roberta as its
  encoder alone, as deberta-v3-base is (DebertaV2Model: what AutoModel and the task classes load).
  The model card (README.md, wyjax.hf.card) says what is known.

  Args:
    results: a leaderboard.json ({"split": "dev", "tasks": {"tlc": {"accuracy": 0.81, ...}, ...},
      "main_metric": {...}}), the model-index.
    training: {"config": the run's run_config.json, "step": the step exported}.
    base_model: the Hub model the run started from.
    task_data: the corpus its tasks were derived from, when not the benchmarks' own data (the demo's).
    overwrite: see `write`.
  """
  check_out(out, overwrite)
  config, task_model, params = model.config.replace(dtype="float32"), "ForMaskedLM", model.params
  if not model.has_mlm and model.has_rtd and config.model_type in ("bert", "electra"):
    config, task_model = config.replace(model_type="electra"), "ForPreTraining"
  elif not model.has_mlm and model.has_rtd:  # as deberta-v3-base: the encoder, no head
    task_model, params = "Model", {"encoder": params["encoder"]}
  elif not model.has_mlm:
    raise ValueError("export writes *ForMaskedLM folders; this model has no MLM head")
  check_tokenizer(model.tokenizer, model.config)
  hf_config = configs.to_hf(config, legacy=legacy, task_model=task_model)
  readme = card.model_card(
    hf_config,
    model.tokenizer,
    name=name,
    license=license,
    results=results,
    training=training,
    base_model=base_model,
    task_data=task_data,
  )
  return write(out, hf_config, params, config, model.tokenizer, readme, overwrite=overwrite)

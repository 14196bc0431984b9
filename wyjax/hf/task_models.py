"""Fine-tuned task models: loading one as a `FineTuned`, and exporting it as a transformers task model.

`load` reads a fine-tuning workdir (its best seed), one seed's folder (wyjax.train.finetuning's layout), or
the folder `export` wrote: transformers' task model for the head (DebertaV2ForTokenClassification, …),
whose config.json names the task and the run's max_length under TASK_KEY and MAX_LENGTH_KEY.
"""

import dataclasses
import logging

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from wyjax.core import checkpoints, run_config, storage
from wyjax.data.normalize import to_simplified
from wyjax.data.tokenizer import Tokenizer
from wyjax.hf import configs, export_folder, loading, task_card, weights
from wyjax.models import EncoderConfig
from wyjax.models.task_heads import HEADS, Head
from wyjax.tasks.registry import TASKS
from wyjax.tasks.task import Task

log = logging.getLogger(__name__)

TASK_KEY, MAX_LENGTH_KEY = "wyjax_task", "wyjax_max_length"  # config.json keys of an exported task model
RESULTS, RUN = "results.json", "run.json"  # a fine-tuning workdir's results, a finished seed's scores
# Texts --verify scores (each one example: one option, one window of a head reading rows).
VERIFY_TEXTS = ("學而時習之，不亦說乎？", "有朋自遠方來")


@dataclasses.dataclass(frozen=True)
class FineTuned:
  """A fine-tuned task model: its task, encoder config, head params, tokenizer and max_length."""

  task: Task  # from wyjax.tasks.registry.TASKS
  model_config: EncoderConfig  # scan_layers=False: params per layer, as transformers' are
  params: dict  # numpy, in the layout of the head module `module()` builds
  tokenizer: Tokenizer
  max_length: int  # the longest input the run featurized (tokens)
  results: dict | None = None  # the run's results.json, when loaded from a run
  run_dir: epath.Path | None = None  # the seed folder the params are from (None: an exported folder)

  @property
  def head(self) -> Head:
    return HEADS[self.task.head]

  def module(self) -> nn.Module:
    return self.head.build(self.model_config, len(self.task.labels))


def _registered(name: str, source) -> Task:
  if name not in TASKS:
    raise ValueError(f"{source}: task {name!r} is not registered (wyjax.tasks.registry.register adds it)")
  return TASKS[name]


def _json(path: epath.Path) -> dict:
  return storage.read_json(path)


def task_of(path) -> Task | None:
  """The task `path` was fine-tuned for, from its JSON files alone (no weights read).

  None when it is no fine-tuned model (a pretraining workdir, an MLM export).
  """
  path = epath.Path(path)
  for folder, file, key in (
    (path, "config.json", TASK_KEY),
    (path, RESULTS, "task"),
    (path, run_config.CONFIG, "task"),
    (path.parent, run_config.CONFIG, "task"),
  ):
    if (folder / file).exists():
      name = _json(folder / file).get(key)
      return _registered(name, folder / file) if name else None
  return None


def check_fine_tuned(path, flag: str, *, generating: str | None = None) -> None:
  """Raises ValueError, from its JSON files alone, where `path` is no fine-tuned task model.

  Refused: a pretrained encoder or an MLM export (predicted or translated nonsense), and, where
  `generating` says which fine-tuning makes one, a model whose head generates no text. A path that does
  not exist is left to the loader, which names what is missing.
  """
  if not epath.Path(path).exists():
    return
  task = task_of(path)
  if task is None:
    raise ValueError(
      f"{flag} {path} is no fine-tuned task model (its files name no task: a pretrained encoder?); "
      f"fine-tune one first ({generating or 'python -m wyjax.finetune'})"
    )
  if generating and not HEADS[task.head].generates:
    raise ValueError(
      f"{flag} {path} was fine-tuned for {task.name}, whose model generates no text; use a model "
      f"fine-tuned with {generating}"
    )


def unexportable(task: Task) -> str | None:
  """Why `task`'s model has no transformers task model (one line), or None."""
  head = HEADS[task.head]
  if head.transformers:
    return None
  return f"{task.column}'s head ({head.no_transformers}) has no transformers model class; use wyjax.predict on the run"


def run_max_length(task: Task, configured: int, model_config: EncoderConfig) -> int:
  """The max_length a run featurized with: its config's (0: the task's), capped at the absolute positions.

  The rule is wyjax.train.task_model.load_task_data's.
  """
  max_length = configured or task.max_length
  if model_config.absolute_positions:
    return min(max_length, model_config.max_tokens)
  return max_length


def seed_dir(path) -> epath.Path:
  """The seed folder of `path`: itself, or a fine-tuning workdir's best run (inside it)."""
  path = epath.Path(path)
  if (path / RESULTS).exists():
    path = checkpoints.best_run(path)
  if not (path / "model.json").exists() or not (path.parent / run_config.CONFIG).exists():
    raise ValueError(
      f"{path}: not a fine-tuned model: no results.json (a fine-tuning workdir), model.json with "
      f"{run_config.CONFIG} in its parent (a seed folder) or config.json (an exported folder)"
    )
  return path


def load(path) -> FineTuned:
  """Loads a fine-tuning workdir (its best run), one of its seed folders, or a folder `export` wrote.

  Weights holding NaN or Inf are refused: they would predict nothing, silently.
  """
  path = epath.Path(path)
  if not path.exists():
    raise FileNotFoundError(f"{path}: no such folder")
  model = _load_export(path) if (path / "config.json").exists() else _load_run(seed_dir(path))
  weights.check_finite(model.params, path)
  return model


def _load_run(seed: epath.Path) -> FineTuned:
  config = _json(seed.parent / run_config.CONFIG)
  if not config.get("task"):
    raise ValueError(f"{seed.parent / run_config.CONFIG} names no task: {seed} is no fine-tuning run's seed")
  task = _registered(config["task"], seed.parent / run_config.CONFIG)
  encoder, params = checkpoints.restore_model(seed)
  model_config = EncoderConfig.from_dict(encoder)
  if model_config.scan_layers:
    model_config, params = model_config.replace(scan_layers=False), loading.per_layer(params)
  tokenizer_dir = checkpoints.tokenizer_dir(seed)
  if not (tokenizer_dir / "vocab.txt").exists():
    raise FileNotFoundError(f"{seed}: no tokenizer (tokenizer/vocab.txt)")
  tokenizer = Tokenizer.load(tokenizer_dir)
  loading.check_parts(
    model_config,
    seed / "model.json",
    loading.param_embedding_shapes(params),
    seed / "checkpoints",
    tokenizer,
    tokenizer_dir / "vocab.txt",
    checkpoints.vocab_sha256(seed),
  )
  results = seed.parent / RESULTS
  return FineTuned(
    task,
    model_config,
    params,
    tokenizer,
    run_max_length(task, config.get("max_length", 0), model_config),
    _json(results) if results.exists() else None,
    seed,
  )


def param_shapes(head: Head, config: EncoderConfig, num_labels: int) -> dict:
  """The head module's params as a tree of shapes."""
  ids = jnp.zeros((1, 1, 8) if head.rows else (1, 8), jnp.int32)
  variables = jax.eval_shape(head.build(config, num_labels).init, jax.random.key(0), ids)
  return jax.tree_util.tree_map(lambda s: s.shape, nn.unbox(variables["params"]))


def _load_export(folder: epath.Path) -> FineTuned:
  hf = _json(folder / "config.json")
  if not hf.get(TASK_KEY):
    raise ValueError(
      f"{folder / 'config.json'} has no {TASK_KEY}: not a fine-tuned model wyjax exported "
      "(wyjax.hf.load reads other transformers folders)"
    )
  task = _registered(hf[TASK_KEY], folder / "config.json")
  model_config = configs.from_hf(hf, source=str(folder / "config.json"))
  state_dict, source = loading.read_state_dict(folder)
  tokenizer = Tokenizer.load(folder)
  loading.check_parts(
    model_config,
    folder / "config.json",
    loading.embedding_shapes(state_dict, model_config),
    source,
    tokenizer,
    folder / "vocab.txt",
    hf.get(loading.VOCAB_KEY),
  )
  max_length = hf.get(MAX_LENGTH_KEY) or run_max_length(task, 0, model_config)
  if model_config.absolute_positions and max_length > model_config.max_position_embeddings:
    raise loading.PartsError(
      f"{folder / 'config.json'}: {MAX_LENGTH_KEY} {max_length} is more than its "
      f"max_position_embeddings {model_config.max_position_embeddings}; positions past them "
      "have no embedding: export the run again"
    )
  shapes = param_shapes(HEADS[task.head], model_config, len(task.labels))
  params, unused = weights.from_hf(state_dict, model_config, shapes, source=source)
  if unused:
    log.warning("%s: %d tensors not used by wyjax: %s", source, len(unused), ", ".join(unused[:10]))
  return FineTuned(task, model_config, params, tokenizer, max_length)


def hf_config(model: FineTuned, legacy: bool | None = None) -> dict:
  """config.json: the task model's class, its labels (id2label) and wyjax's keys."""
  transformers = model.head.transformers
  hf = configs.to_hf(model.model_config, legacy=legacy, task_model=transformers.suffix)
  if transformers.id2label:
    hf["id2label"] = dict(enumerate(model.task.labels))
    hf["label2id"] = {label: i for i, label in enumerate(model.task.labels)}
  return {**hf, TASK_KEY: model.task.name, MAX_LENGTH_KEY: model.max_length}


def export(
  model: FineTuned,
  out,
  *,
  name: str = "wyjax-model",
  license: str = "apache-2.0",
  base_model: str | None = None,
  legacy: bool | None = None,
  overwrite: bool = False,
) -> epath.Path:
  """Writes `out` (export_folder.write): the transformers task model, its tokenizer and its card.

  The card holds the seed's scores (its run.json) and its run's config. base_model: the Hub model the run
  started from (default: the run config's init, when a Hub id). Refuses (ValueError) a head transformers
  has no class for, and (FileExistsError) a non-empty `out` unless `overwrite`.
  """
  if reason := unexportable(model.task):
    raise ValueError(reason)
  export_folder.check_out(out, overwrite)
  export_folder.check_tokenizer(model.tokenizer, model.model_config)
  model = dataclasses.replace(model, model_config=model.model_config.replace(dtype="float32"))
  config = hf_config(model, legacy)
  run = model.run_dir / RUN if model.run_dir else None
  training = _json(model.run_dir.parent / run_config.CONFIG) if model.run_dir else None
  readme = task_card.task_model_card(
    config,
    model.tokenizer,
    model.task,
    pipeline_tag=model.head.transformers.pipeline_tag,
    name=name,
    license=license,
    max_length=model.max_length,
    run=_json(run) if run and run.exists() else None,
    run_config=training,
    base_model=base_model or (storage.hub_id(training.get("init")) if training else None),
  )
  return export_folder.write(
    out, config, model.params, model.model_config, model.tokenizer, readme, overwrite=overwrite
  )


def verify(model: FineTuned, folder) -> float:
  """Max |logit difference| between the head in wyjax and transformers' AutoModel<suffix> of `folder`.

  On a padded batch of real tokens: each text is one example (one option, one window), compared on its
  own tokens (Head.trim). The texts are simplified first when the tokenizer does so (the card's advice).
  """
  import torch
  import transformers

  spec = model.head.transformers
  hf_model = getattr(transformers, f"AutoModel{spec.suffix}").from_pretrained(str(folder)).eval()
  texts = [to_simplified(t) if model.tokenizer.t2s else t for t in VERIFY_TEXTS]
  batch = transformers.AutoTokenizer.from_pretrained(str(folder))(texts, padding=True, return_tensors="np")
  ids, mask = batch["input_ids"], batch["attention_mask"]
  rows = (lambda x: x[:, None]) if model.head.rows else (lambda x: x)
  module = model.head.build(model.model_config.replace(dtype="float32"), len(model.task.labels))
  ours = np.asarray(module.apply({"params": model.params}, rows(ids), rows(mask)))
  hf_inputs = (lambda x: x) if spec.flat_rows else rows
  with torch.no_grad():
    outputs = hf_model(input_ids=torch.tensor(hf_inputs(ids)), attention_mask=torch.tensor(hf_inputs(mask)))
  theirs = np.stack([outputs[field].numpy() for field in spec.outputs], -2).reshape(ours.shape)
  shapes = [(1, n) if model.head.rows else (n,) for n in mask.sum(-1)]  # each example's input_ids
  return max(
    float(np.abs(model.head.trim(o, s) - model.head.trim(t, s)).max()) for o, t, s in zip(ours, theirs, shapes)
  )

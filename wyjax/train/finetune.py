"""Fine-tuning one task: train, evaluate on dev every N steps and at each epoch's end, keep the
best-dev parameters with orbax, stop after `patience` evaluations without improvement, then
restore the best and predict dev and test.

    workdir/
      results.json            per-seed dev/test metrics, mean ± std, the best-dev run
      submission/<task>.<ext> test predictions of the best-dev run (docs/finetuning.md)
      seed_<k>/               one run: model.json, tokenizer/, checkpoints/<best step>/,
                              metrics.jsonl, dev_predictions.<ext>, test predictions
"""
import dataclasses
import json
import logging
import math
import pathlib
import shutil
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
import tqdm

from wyjax.data import tokenizer as tokenizer_lib
from wyjax.hf import loading
from wyjax.models import (CosineMatch, EncoderConfig, MaskedLM, MultipleChoice, SequenceClassifier,
                          SpanPairClassifier, TokenClassifier, prefix_lm)
from wyjax.tasks import batching, datasets
from wyjax.tasks import metrics as metrics_lib
from wyjax.tasks.files import FormatError
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.tasks import TASKS, Task, for_data, fspc_line_examples, majority_baseline
from wyjax.train import checkpoints, metrics, optimizer, partitioning

# The model used when no --config.init is given: the embedded default's architecture.
FRESH_TINY_MODEL = dict(
    model_type="deberta-v2", hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
    max_position_embeddings=128, relative_attention=True, position_buckets=32, pos_att_type="p2c|c2p",
    share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False)


def base_config() -> ml_collections.ConfigDict:
  """The WYWEB paper's Table 15 defaults; configs/<task>.py set the task and its sizes."""
  c = ml_collections.ConfigDict()
  c.task = ""
  c.data_dir = ""  # the task folder, as its benchmark publishes it
  c.init = ""  # transformers folder or wyjax workdir; empty: a fresh tiny model (with a warning)
  c.max_length = 0  # 0: the task's max_seq_len from the paper's scripts
  c.batch_size = 32
  c.eval_batch_size = 64  # sequences: a multiple-choice example counts as its options
  c.num_epochs = 10
  c.num_train_steps = 0  # > 0: train this many steps instead of num_epochs epochs
  c.learning_rate = 2e-5
  c.warmup_fraction = 0.1
  c.weight_decay = 0.01
  c.b1, c.b2, c.eps = 0.9, 0.999, 1e-6
  c.max_grad_norm = 1.0
  c.eval_every = 1000  # steps; the dev set is also evaluated at the end of every epoch
  c.patience = 5  # evaluations without improvement before stopping
  c.seed = 0
  c.seeds = 1  # runs with seeds seed, seed + 1, ...: mean, std and the best-dev run's test score
  c.dtype = "float32"
  c.fspc_line_examples = False  # FSPC: also train (and score) on each verse line
  c.log_every = 50
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.logical_axis_rules = [("vocab", "tensor"), ("embed", "fsdp"), ("heads", "tensor"), ("kv", None),
                          ("mlp", "tensor")]
  return c


def head_model(task: Task, config: EncoderConfig) -> nn.Module:
  if task.head == "sequence":
    return SequenceClassifier(config, len(task.labels))
  if task.head == "token":
    return TokenClassifier(config, len(task.labels))
  if task.head == "choice":
    return MultipleChoice(config)
  if task.head == "prefix_lm":
    return MaskedLM(config)
  if task.head == "match":
    return CosineMatch(config)
  return SpanPairClassifier(config, len(task.labels))


def example_texts(example):
  """Every string in an example (for a fresh vocabulary)."""
  for value in dataclasses.astuple(example):
    stack = [value]
    while stack:
      item = stack.pop()
      if isinstance(item, str):
        yield item
      elif isinstance(item, tuple):
        stack.extend(item)


def load_init(init: str, train_examples, inserted_text: str = "") -> tuple[EncoderConfig, dict,
                                                                          tokenizer_lib.Tokenizer]:
  """(encoder config, pretrained params, tokenizer) from `init`, or a fresh tiny model
  with a vocabulary of the train split's characters and the task's inserted_text (and no
  pretrained params)."""
  if init:
    model = loading.load(init)
    if model.tokenizer is None:
      raise FileNotFoundError(f"{init}: no tokenizer (vocab.txt) beside the model")
    params = model.params.get("scorer", model.params)  # a multiple-choice run keeps its model under 'scorer'
    pretrained = {k: v for k, v in params.items() if k in ("encoder", "pooler", "classifier", "mlm_head")}
    return model.config, pretrained, model.tokenizer
  logging.warning("no --config.init: fine-tuning a FRESH, RANDOMLY INITIALISED tiny model; scores "
                  "will be far below a pretrained model's (pretrain one with python -m wyjax.pretrain)")
  texts = [text for e in train_examples for text in example_texts(e)]
  vocab = tokenizer_lib.build_vocab(texts + [inserted_text] if inserted_text else texts)
  return EncoderConfig(**FRESH_TINY_MODEL, vocab_size=len(vocab)), {}, tokenizer_lib.Tokenizer(vocab)


def featurize(task: Task, examples, tokenizer, max_length: int, path) -> tuple[list[dict], int]:
  """Features of every example and the number of characters truncation cut."""
  out, truncated = [], 0
  for example in examples:
    try:
      features, cut = task.featurize(example, tokenizer, max_length)
    except ValueError as e:
      raise FormatError(path, example.line, str(e)) from e
    out.append(features)
    truncated += cut
  return out, truncated


def graft(params: dict, pretrained: dict, task: Task) -> dict:
  """The model's freshly initialised params with the pretrained parts put in: the encoder
  always, the pooler, classifier and MLM head when the model has them in the same shapes (the
  MLM head: the prefix LM's; pooler and classifier: continuing a run of the same task); a new
  task's head starts fresh."""
  params = jax.tree_util.tree_map(np.asarray, params)
  target = params["scorer"] if task.head == "choice" else params
  for name, tree in pretrained.items():
    if name not in target:  # e.g. the MLM head of a pretrained model, for a classifier
      continue
    if jax.tree_util.tree_map(np.shape, target[name]) == jax.tree_util.tree_map(np.shape, tree):
      target[name] = jax.tree_util.tree_map(np.asarray, tree)
    elif name == "encoder":
      raise ValueError("the pretrained encoder's params do not fit the model's: "
                       f"{jax.tree_util.tree_map(np.shape, tree)} vs {jax.tree_util.tree_map(np.shape, target[name])}")
    else:
      logging.info("init's %s does not fit this task's head: initialised fresh", name)
  return params


def _model_inputs(batch: dict) -> dict:
  return {k: batch[k] for k in ("input_ids", "token_type_ids", "span_mask") if k in batch}


def _labels(batch: dict):
  return batch["labels"] if "labels" in batch else batch["label"]


@dataclasses.dataclass
class Run:
  seed: int
  workdir: pathlib.Path
  best_step: int
  dev: dict
  test: dict | None
  stopped_early: bool
  dev_confusion: list  # [gold][predicted] counts over the head's classes


class Trainer:
  """The jitted train and predict steps of one task and model."""

  def __init__(self, task: Task, model_config: EncoderConfig, tokenizer, config, total_steps: int,
               max_length: int):
    self.task, self.config, self.tokenizer, self.max_length = task, config, tokenizer, max_length
    self.pad_id = tokenizer.pad_id
    self.model = head_model(task, model_config)
    self.tx, self.schedule = optimizer.adamw(
        learning_rate=config.learning_rate, warmup_steps=int(config.warmup_fraction * total_steps),
        total_steps=total_steps, b1=config.b1, b2=config.b2, eps=config.eps,
        weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm)
    self.mesh = partitioning.make_mesh(config.mesh.to_dict())
    shards = self.mesh.shape["data"] * self.mesh.shape["fsdp"]
    if config.batch_size % shards or config.eval_batch_size % shards:
      raise ValueError(f"batch_size {config.batch_size} and eval_batch_size {config.eval_batch_size} must be "
                       f"multiples of the {shards} data shards of the mesh {dict(self.mesh.shape)}")
    self.data_sharding = partitioning.batch_sharding(self.mesh)
    self._train = jax.jit(self._train_step, donate_argnums=(0,))
    self._predict = jax.jit(self._predictions)

  def _logits(self, params, inputs, *, rng=None):
    ids = inputs["input_ids"]
    mask = (ids != self.pad_id).astype(jnp.int32)
    if self.task.head == "prefix_lm":
      mask = prefix_lm.attention_mask(inputs["token_type_ids"], mask)
    kwargs = {"span_mask": inputs["span_mask"]} if "span_mask" in inputs else {}
    return self.model.apply(
        {"params": params}, ids, mask, inputs.get("token_type_ids"),
        deterministic=rng is None, rngs=None if rng is None else {"dropout": rng}, **kwargs)

  def _predictions(self, params, inputs):
    """Logits, or for the prefix LM the argmax token at every position (teacher-forced)."""
    logits = self._logits(params, inputs)
    return jnp.argmax(logits, -1) if self.task.head == "prefix_lm" else logits

  def _train_step(self, state, inputs, labels, rng):
    def loss_fn(params):
      logits = self._logits(params, inputs, rng=rng)
      valid = labels != IGNORE
      losses = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.where(valid, labels, 0))
      return jnp.sum(losses * valid) / jnp.maximum(jnp.sum(valid), 1)

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt_state = self.tx.update(grads, state["opt_state"], state["params"])
    new_state = {"step": state["step"] + 1, "params": optax.apply_updates(state["params"], updates),
                 "opt_state": opt_state}
    return new_state, {"loss": loss, "grad_norm": optax.global_norm(grads),
                       "learning_rate": self.schedule(state["step"])}

  def init_state(self, pretrained: dict, features: list[dict], seed: int) -> dict:
    example = batching.collate(features[:1], batch_size=1, lengths=(features[0]["input_ids"].shape[-1],),
                               pad_id=self.pad_id)
    inputs = {k: jnp.asarray(v) for k, v in _model_inputs(example).items()}
    boxed = self.model.init(jax.random.key(seed), **_init_kwargs(inputs))["params"]
    params = graft(nn.unbox(boxed), pretrained, self.task)
    shardings = partitioning.param_shardings(boxed, self.mesh, partitioning.rules(self.config.logical_axis_rules))
    params = jax.device_put(params, shardings)
    return {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": jax.jit(self.tx.init)(params)}

  def train_step(self, state, batch, rng):
    inputs = jax.device_put(_model_inputs(batch), self.data_sharding)
    return self._train(state, inputs, jax.device_put(_labels(batch), self.data_sharding), rng)

  def predict(self, params, features: list[dict]) -> list[np.ndarray]:
    """Logits of each example (prefix LM: argmax tokens), trimmed to its own length (token and
    prefix-LM tasks)."""
    out = [None] * len(features)
    rows = features[0]["input_ids"].shape[0] if features[0]["input_ids"].ndim == 2 else 1  # options, sentences
    batch_size = max(1, self.config.eval_batch_size // rows)
    for indices, batch in batching.eval_batches(features, batch_size=batch_size,
                                                max_length=self.max_length, pad_id=self.pad_id):
      logits = np.asarray(self._predict(params, jax.device_put(_model_inputs(batch), self.data_sharding)))
      for row, i in enumerate(indices):
        per_token = self.task.head in ("token", "prefix_lm")
        out[i] = logits[row, :features[i]["input_ids"].shape[-1]] if per_token else logits[row]
    return out

  def translate(self, params, examples, beam_size: int) -> list[str]:
    """Generated target text for each example's source (config.decoding). The source alone is
    encoded, never cut to make room for the reference: only one longer than max_length − 4
    (room for one target token) loses its tail, with a warning."""
    room = self.max_length - 4
    sources = [self.tokenizer.encode_chars(e.source)[0] for e in examples]
    cut = sum(max(0, len(s) - room) for s in sources)
    if cut:
      logging.warning("sources longer than %d tokens lose %d characters before decoding", room, cut)
    decoding = self.config.decoding
    targets = prefix_lm.translate(
        self.model, params, self.tokenizer, [s[:room] for s in sources], max_length=self.max_length,
        max_ratio=decoding.max_ratio, max_extra=decoding.max_extra,
        batch_size=max(1, self.config.eval_batch_size // beam_size), beam_size=beam_size,
        length_penalty=decoding.length_penalty)
    return [self.tokenizer.decode(t) for t in targets]


def _init_kwargs(inputs: dict) -> dict:
  ids = inputs["input_ids"]
  kwargs = {"input_ids": ids, "attention_mask": jnp.ones_like(ids), "token_type_ids": inputs.get("token_type_ids")}
  if "span_mask" in inputs:
    kwargs["span_mask"] = inputs["span_mask"]
  return kwargs


def _teacher_forced_scores(tokenizer, features, predicted) -> dict:
  """The WYWEB toolkit's WYWMT score, for comparison with the paper: the argmax at each target
  position given the gold prefix, tokens (with the closing [SEP]) joined by spaces, against
  the gold tokens likewise. Its outputs have the reference's length by construction."""
  as_text = lambda ids: " ".join(tokenizer.vocab[i] for i in ids)
  scored = [f["labels"] != IGNORE for f in features]
  scores = metrics_lib.translation_scores([as_text(p[s]) for p, s in zip(predicted, scored)],
                                          [as_text(f["labels"][s]) for f, s in zip(features, scored)])
  return {f"teacher_forced_{k}": v for k, v in scores.items()}


def _labelled(features) -> bool:
  return any(np.any(np.asarray(_labels(f)) != IGNORE) for f in features)


def evaluate(task: Task, trainer: Trainer, params, examples, features, *,
             beam_size: int = 1) -> tuple[dict | None, list, np.ndarray]:
  """(metrics, predictions, confusion matrix [gold, predicted] over the head's classes);
  metrics None for a split without gold labels.

  The prefix LM's predictions are generated (beam_size 1: greedy) and scored; the toolkit's
  teacher-forced scores join them as teacher_forced_*.
  """
  logits = trainer.predict(params, features)
  if task.head == "prefix_lm":
    texts = trainer.translate(params, examples, beam_size)
    predictions = [task.decode(e, f, t) for e, f, t in zip(examples, features, texts)]
    scores = {**task.score(examples, predictions), **_teacher_forced_scores(trainer.tokenizer, features, logits)}
    return scores, predictions, np.zeros((0, 0), np.int64)
  predictions = [task.decode(e, f, l) for e, f, l in zip(examples, features, logits)]
  if not _labelled(features):
    return None, predictions, np.zeros((0, 0), np.int64)
  confusion = np.zeros((len(task.labels),) * 2, np.int64)
  for f, l in zip(features, logits):
    gold = np.atleast_1d(f["labels"] if "labels" in f else f["label"])
    predicted = np.atleast_1d(np.argmax(l, -1))
    np.add.at(confusion, (gold[gold != IGNORE], predicted[gold != IGNORE]), 1)
  return task.score(examples, predictions), predictions, confusion


def write_predictions(task: Task, path: pathlib.Path, examples, predictions) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  lines = [task.submission_line(e, p) for e, p in zip(examples, predictions)
           if not (task.name == "fspc" and len(e.lines) == 1)]  # FSPC: whole poems only
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def train_one(task: Task, config, data: dict, model_config: EncoderConfig, pretrained: dict, tokenizer,
              seed: int, workdir: pathlib.Path) -> Run:
  """One seed: train with early stopping, restore the best-dev params, predict dev and test."""
  train_features = data["train"][1]
  steps_per_epoch = max(1, len(train_features) // config.batch_size)
  total_steps = config.num_train_steps or steps_per_epoch * config.num_epochs
  trainer = Trainer(task, model_config, tokenizer, config, total_steps, data["max_length"])
  state = trainer.init_state(pretrained, train_features, seed)
  batches = batching.train_batches(train_features, batch_size=config.batch_size, max_length=data["max_length"],
                                   pad_id=tokenizer.pad_id, seed=seed)
  if workdir.exists():
    shutil.rmtree(workdir)  # a run starts from scratch: no stale best checkpoint survives
  checkpoints.write_model_info(workdir, model_config, [k for k in state["params"] if k != "encoder"], tokenizer)
  writer = metrics.MetricWriter(workdir)
  dev_examples, dev_features = data["dev"]
  best, best_step, stale, stopped_early = -math.inf, 0, 0, False
  rng = jax.random.key(seed)
  bar = tqdm.tqdm(total=total_steps, disable=not sys.stderr.isatty(), file=sys.stderr, unit="step")
  last_time = time.perf_counter()
  with checkpoints.manager(workdir, max_to_keep=1) as mngr:
    for step in range(1, total_steps + 1):
      state, step_metrics = trainer.train_step(state, next(batches), jax.random.fold_in(rng, step))
      bar.update()
      if step % config.log_every == 0:
        step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
        step_metrics["step_seconds"] = (time.perf_counter() - last_time) / config.log_every
        writer.write(step, step_metrics)
        bar.set_postfix(loss=f"{step_metrics['loss']:.3f}")
        last_time = time.perf_counter()
      if step % config.eval_every and step % steps_per_epoch and step != total_steps:
        continue
      scores, _, _ = evaluate(task, trainer, state["params"], dev_examples, dev_features)
      writer.write(step, {f"dev_{k}": v for k, v in scores.items()} | {"epoch": step / steps_per_epoch})
      logging.info("seed %d step %d: dev %s", seed, step, scores)
      if scores[task.main_metric] > best:
        best, best_step, stale = scores[task.main_metric], step, 0
        mngr.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"params": state["params"]})))
      else:
        stale += 1
        if stale >= config.patience:
          logging.info("seed %d: no improvement in %d evaluations, stopping at step %d", seed, stale, step)
          stopped_early = True
          break
    mngr.wait_until_finished()
  bar.close()
  writer.close()

  _, params = checkpoints.restore_model(workdir)
  params = jax.tree_util.tree_map(jnp.asarray, params)
  # Checkpoints are chosen on greedy translations; the final ones use the configured beam.
  beam_size = config.decoding.beam_size if task.head == "prefix_lm" else 1
  dev, predictions, confusion = evaluate(task, trainer, params, dev_examples, dev_features, beam_size=beam_size)
  write_predictions(task, workdir / f"dev_predictions.{task.submission_format}", dev_examples, predictions)
  test = None
  if "test" in data:
    test_examples, test_features = data["test"]
    test, predictions, _ = evaluate(task, trainer, params, test_examples, test_features, beam_size=beam_size)
    write_predictions(task, workdir / f"test_predictions.{task.submission_format}", test_examples, predictions)
  return Run(seed, workdir, best_step, dev, test, stopped_early, confusion.tolist())


def load_task_data(task: Task, config, tokenizer, model_config: EncoderConfig, splits: dict) -> dict:
  """{'train'|'dev'|'test': (examples, features), 'max_length': n, 'truncated': {split: chars}}."""
  max_length = config.max_length or task.max_length
  if model_config.absolute_positions and max_length > model_config.max_position_embeddings:
    logging.warning("max_length %d exceeds the model's %d absolute positions; using %d",
                    max_length, model_config.max_position_embeddings, model_config.max_position_embeddings)
    max_length = model_config.max_position_embeddings
  data = {"max_length": max_length, "truncated": {}}
  for split, examples in splits.items():
    path = datasets.file_of(task.data, config.data_dir, split)
    features, truncated = featurize(task, examples, tokenizer, max_length, path)
    if truncated:
      logging.warning("%s: truncation to %d tokens cut %d characters", path, max_length, truncated)
    data[split] = (examples, features)
    data["truncated"][split] = truncated
  return data


def finetune(config: ml_collections.ConfigDict, workdir) -> dict:
  """Fine-tunes config.task for config.seeds seeds; returns (and writes) results.json."""
  if config.task not in TASKS:
    raise ValueError(f"unknown task {config.task!r}; fine-tuning tasks are {sorted(TASKS)}")
  if not config.data_dir:
    raise ValueError("set --config.data_dir to the task folder (its benchmark's files as released)")
  task, workdir = TASKS[config.task], pathlib.Path(workdir)
  splits = datasets.load_splits(task.data, config.data_dir)
  if "dev" not in splits:
    raise FileNotFoundError(f"{config.data_dir}: no dev file; the best checkpoint is chosen on dev")
  task = for_data(task, splits)
  if task.name == "fspc" and config.fspc_line_examples:
    for split in ("train", "dev"):
      splits[split] = splits[split] + [line for e in splits[split] for line in fspc_line_examples(e)]
  model_config, pretrained, tokenizer = load_init(config.init, splits["train"], task.inserted_text)
  model_config = model_config.replace(dtype=config.dtype)
  data = load_task_data(task, config, tokenizer, model_config, splits)
  runs = [train_one(task, config, data, model_config, pretrained, tokenizer, config.seed + k,
                    workdir / f"seed_{config.seed + k}") for k in range(config.seeds)]
  best_run = max(runs, key=lambda r: r.dev[task.main_metric])
  dev_scores = np.array([r.dev[task.main_metric] for r in runs])
  results = {
      "task": task.name, "main_metric": task.main_metric, "init": config.init or "fresh tiny model",
      "dev_mean": float(dev_scores.mean()), "dev_std": float(dev_scores.std()),
      "best_seed": best_run.seed, "best_run": str(best_run.workdir), "dev": best_run.dev, "test": best_run.test,
      "labels": list(task.labels), "dev_confusion": best_run.dev_confusion,
      "majority_baseline": majority_baseline(task, splits["train"], splits["dev"]),
      "truncated_characters": data["truncated"],
      "runs": [{"seed": r.seed, "best_step": r.best_step, "stopped_early": r.stopped_early, "dev": r.dev,
                "test": r.test} for r in runs],
      "config": config.to_dict(),
  }
  if "test" in data:
    submission = workdir / "submission" / f"{task.name}.{task.submission_format}"
    submission.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(best_run.workdir / f"test_predictions.{task.submission_format}", submission)
    results["submission"] = str(submission)
  (workdir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
  return results

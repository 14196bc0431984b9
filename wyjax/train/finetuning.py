"""Fine-tuning one task: train, evaluate on dev every N steps and at each epoch's end, keep the
best-dev parameters with orbax, stop after `patience` evaluations without improvement, then
restore the best and predict dev and test.

    workdir/
      run_config.json         the config the runs were made with (a rerun must match it)
      results.json            per-seed dev/test metrics, mean ± std, the best-dev run
      submission/<task>.<ext> test predictions of the best-dev run (docs/finetuning.md)
      seed_<k>/               one run: model.json, tokenizer/, checkpoints/<best step>/,
                              run_metrics.jsonl, dev_predictions.<ext>, test predictions,
                              run.json once finished; resume/<step>/ while unfinished

A rerun keeps finished seeds (run.json) as they are and continues an unfinished one from its
resume/ checkpoint (saved at every evaluation and on SIGTERM/SIGINT, exactly: the batch
iterator's position and the early-stopping counters are in it); resume/ is removed once the
seed has finished.
"""
import dataclasses
import json
import logging
import sys
import time

import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
import tqdm
from etils import epath

from wyjax.data import tokenizer as tokenizer_lib
from wyjax.hf import loading
from wyjax.models import (CosineMatch, EncoderConfig, MaskedLM, MultipleChoice, SequenceClassifier, SpanExtractor,
                          SpanPairClassifier, TokenClassifier, prefix_lm, stack_layers)
from wyjax.tasks import batching, datasets, wyweb
from wyjax.tasks import metrics as metrics_lib
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS, majority_baseline
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task
from wyjax.core import aot, checkpoints, distributed, guards, optimizer, partitioning, run_config, run_metrics

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
  c.remat = "none"  # per layer: "none", "full" or "dots" (wyjax.models.EncoderConfig.remat)
  c.attention = "auto"  # "xla", "pallas" (fused kernels) or "auto": pallas on TPU (wyjax.models.attention)
  c.scan_layers = False  # nn.scan over the layers, params stacked (wyjax.models.EncoderConfig.scan_layers)
  c.log_every = 50
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.logical_axis_rules = partitioning.LOGICAL_AXIS_RULES  # params' and activations' logical axes → mesh
  c.max_nonfinite_steps = 10  # non-finite steps in a row (each skipped) before the run stops
  c.stop_check_every = 10  # steps between the processes' agreement on a stop signal (multi-host)
  return c


# Keys a rerun may change: they do not change what a seed trains (more seeds add runs).
RESUMABLE_CHANGES = ("seeds", "log_every", "eval_batch_size", "mesh", "logical_axis_rules", "max_nonfinite_steps",
                     "stop_check_every", "remat", "attention")


def head_model(task: Task, config: EncoderConfig) -> nn.Module:
  if task.head == "sequence":
    return SequenceClassifier(config, len(task.labels))
  if task.head == "token":
    return TokenClassifier(config, len(task.labels))
  if task.head == "choice":
    return MultipleChoice(config)
  if task.head == "binary_choice":
    return MultipleChoice(config, labels_per_choice=2)
  if task.head == "prefix_lm":
    return MaskedLM(config)
  if task.head in ("match", "match_shared"):
    return CosineMatch(config, two_encoders=task.head == "match")
  if task.head == "span":
    return SpanExtractor(config)
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
  always (a second encoder, CCPM Match's candidate_encoder, starts from it too), the pooler,
  classifier and MLM head when the model has them in the same shapes (the MLM head: the
  prefix LM's; pooler and classifier: continuing a run of the same task); a new task's head
  starts fresh. The pretrained encoder is per layer (wyjax.hf.Model's), stacked for a
  scan_layers model."""
  params = jax.tree_util.tree_map(np.asarray, params)
  target = params["scorer"] if "scorer" in params else params
  if "candidate_encoder" in target and "encoder" in pretrained:
    pretrained = {**pretrained, "candidate_encoder": pretrained["encoder"]}
  for name, tree in pretrained.items():
    if name not in target:  # e.g. the MLM head of a pretrained model, for a classifier
      continue
    if name.endswith("encoder") and "layers" in target[name]:
      tree = stack_layers(tree)
    if jax.tree_util.tree_map(np.shape, target[name]) == jax.tree_util.tree_map(np.shape, tree):
      target[name] = jax.tree_util.tree_map(np.asarray, tree)
    elif name.endswith("encoder"):
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
  workdir: epath.Path
  best_step: int
  dev: dict
  test: dict | None
  stopped_early: bool
  dev_confusion: list  # [gold][predicted] counts over the head's classes


def make_steps(model: nn.Module, tx: optax.GradientTransformation, schedule, task: Task, pad_id: int):
  """The pure train step (state, inputs, labels, rng) → (state, metrics) and the prediction
  step (params, inputs) → logits (the prefix LM: the argmax token at every position)."""

  def logits_of(params, inputs, rng=None):
    ids = inputs["input_ids"]
    mask = (ids != pad_id).astype(jnp.int32)
    if task.head == "prefix_lm":
      mask = prefix_lm.attention_mask(inputs["token_type_ids"], mask)
    kwargs = {"span_mask": inputs["span_mask"]} if "span_mask" in inputs else {}
    return model.apply({"params": params}, ids, mask, inputs.get("token_type_ids"), deterministic=rng is None,
                       rngs=None if rng is None else {"dropout": rng}, **kwargs)

  def train_step(state, inputs, labels, rng):
    def loss_fn(params):
      valid = labels != IGNORE
      losses = optax.softmax_cross_entropy_with_integer_labels(logits_of(params, inputs, rng),
                                                               jnp.where(valid, labels, 0))
      return jnp.sum(losses * valid) / jnp.maximum(jnp.sum(valid), 1)

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    new_state = {"step": state["step"] + 1, "params": optax.apply_updates(state["params"], updates),
                 "opt_state": opt_state}
    new_state, finite = guards.skip_if_not_finite(state, new_state, loss, grads)
    return new_state, {"loss": loss, "grad_norm": optax.tree.norm(grads),
                       "learning_rate": schedule(state["step"]), "finite": finite}

  def predict_step(params, inputs):
    logits = logits_of(params, inputs)
    return jnp.argmax(logits, -1) if task.head == "prefix_lm" else logits

  return train_step, predict_step


class Trainer:
  """The jitted train and predict steps of one task and model over the mesh, with explicit
  shardings: built once per task, so every seed reuses the compiled steps. Batches are global:
  on several processes each one puts its own rows on its devices."""

  def __init__(self, task: Task, model_config: EncoderConfig, tokenizer, config, total_steps: int,
               max_length: int, example: dict, devices=None):
    """example: one featurized example, for the shapes of the params (the head's included)."""
    self.task, self.config, self.tokenizer, self.max_length = task, config, tokenizer, max_length
    self.pad_id = tokenizer.pad_id
    self.model_config = model_config
    self.model = head_model(task, model_config)
    self.tx, schedule = optimizer.adamw(
        learning_rate=config.learning_rate, warmup_steps=int(config.warmup_fraction * total_steps),
        total_steps=total_steps, b1=config.b1, b2=config.b2, eps=config.eps,
        weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm)
    self.mesh = partitioning.make_mesh(config.mesh.to_dict(), devices)
    shards = self.mesh.shape["data"] * self.mesh.shape["fsdp"]
    if config.batch_size % shards or config.eval_batch_size % shards:
      raise ValueError(f"batch_size {config.batch_size} and eval_batch_size {config.eval_batch_size} must be "
                       f"multiples of the {shards} data shards of the mesh {dict(self.mesh.shape)}")
    self.data_sharding = partitioning.batch_sharding(self.mesh)
    replicated = partitioning.replicated(self.mesh)

    batch = batching.collate([example], batch_size=1, lengths=(example["input_ids"].shape[-1],), pad_id=self.pad_id)
    self._init_inputs = _init_kwargs({k: jnp.asarray(v) for k, v in _model_inputs(batch).items()})
    boxed = jax.eval_shape(lambda: self.model.init(jax.random.key(0), **self._init_inputs)["params"])
    logical_rules = partitioning.rules(config.logical_axis_rules)
    self.params_sharding = partitioning.param_shardings(boxed, self.mesh, logical_rules)
    abstract = jax.eval_shape(lambda p: {"step": jnp.zeros((), jnp.int32), "params": p, "opt_state": self.tx.init(p)},
                              nn.unbox(boxed))
    self.state_sharding = partitioning.state_shardings(abstract, self.params_sharding, self.tx, self.mesh)
    self.abstract_state = jax.tree_util.tree_map(
        lambda a, sharding: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), abstract, self.state_sharding)

    train_step, predict_step = (partitioning.with_activation_constraints(step, self.mesh, logical_rules)
                                for step in make_steps(self.model, self.tx, schedule, task, self.pad_id))
    self.jit_train = jax.jit(train_step, in_shardings=(self.state_sharding, self.data_sharding, self.data_sharding,
                                                       replicated),
                             out_shardings=(self.state_sharding, replicated), donate_argnums=(0,))
    self._predict = jax.jit(predict_step, in_shardings=(self.params_sharding, self.data_sharding),
                            out_shardings=replicated)
    self._init_opt = jax.jit(self.tx.init, out_shardings=self.state_sharding["opt_state"])

  def init_state(self, pretrained: dict, seed: int) -> dict:
    """Fresh head params for `seed` with the pretrained ones grafted in, placed on the mesh."""
    params = graft(nn.unbox(self.model.init(jax.random.key(seed), **self._init_inputs)["params"]), pretrained,
                   self.task)
    params = jax.device_put(params, self.params_sharding)
    return {"step": jax.device_put(jnp.zeros((), jnp.int32), self.state_sharding["step"]), "params": params,
            "opt_state": self._init_opt(params)}

  def global_batch(self, batch: dict) -> dict:
    """Global arrays from a batch every process holds whole: each puts its own rows."""
    count, index = jax.process_count(), jax.process_index()

    def put(x):
      rows = x.shape[0] // count
      return jax.make_array_from_process_local_data(self.data_sharding, x[index * rows:(index + 1) * rows], x.shape)

    return jax.tree_util.tree_map(put, batch)

  def train_step(self, state, batch, rng):
    return self.jit_train(state, self.global_batch(_model_inputs(batch)), self.global_batch(_labels(batch)), rng)

  def predict(self, params, features: list[dict]) -> list[np.ndarray]:
    """Logits of each example (prefix LM: argmax tokens), trimmed to its own length (token and
    prefix-LM tasks) and windows (span tasks)."""
    out = [None] * len(features)
    rows = features[0]["input_ids"].shape[0] if features[0]["input_ids"].ndim == 2 else 1  # options, sentences
    batch_size = max(1, self.config.eval_batch_size // rows)
    for indices, batch in batching.eval_batches(features, batch_size=batch_size,
                                                max_length=self.max_length, pad_id=self.pad_id):
      logits = np.asarray(self._predict(params, self.global_batch(_model_inputs(batch))))
      for row, i in enumerate(indices):
        shape = features[i]["input_ids"].shape
        if self.task.head == "span":  # [windows, 2, length]: its own windows and tokens
          out[i] = logits[row, :shape[0], :, :shape[-1]]
        elif self.task.head in ("token", "prefix_lm"):
          out[i] = logits[row, :shape[-1]]
        else:
          out[i] = logits[row]
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
                                          [as_text(f["labels"][s]) for f, s in zip(features, scored)], tokenized=True)
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
  if not task.labels:  # extractive answers: no classes to confuse
    return task.score(examples, predictions), predictions, np.zeros((0, 0), np.int64)
  confusion = np.zeros((len(task.labels),) * 2, np.int64)
  for f, l in zip(features, logits):
    gold = np.atleast_1d(f["labels"] if "labels" in f else f["label"])
    predicted = np.atleast_1d(np.argmax(l, -1))
    np.add.at(confusion, (gold[gold != IGNORE], predicted[gold != IGNORE]), 1)
  return task.score(examples, predictions), predictions, confusion


def write_predictions(task: Task, path: epath.Path, examples, predictions) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(line + "\n" for line in task.submission(examples, predictions)), encoding="utf-8")


RUN_FILE = "run.json"  # a finished seed's Run
PROGRESS, BATCHES = "progress", "batches"  # items of a resume/ checkpoint beside the state


def total_steps(config, data: dict) -> int:
  """config.num_train_steps, or num_epochs over the train split."""
  return config.num_train_steps or max(1, len(data["train"][1]) // config.batch_size) * config.num_epochs


def train_one(task: Task, config, data: dict, trainer: Trainer, pretrained: dict, seed: int,
              workdir: epath.Path, stop: guards.StopRequest) -> Run:
  """One seed: train with early stopping, restore the best-dev params, predict dev and test.

  A finished seed (its run.json) is returned as it is; an unfinished one continues from its
  resume/ checkpoint. On a stop signal the seed checkpoints and raises guards.Interrupted.
  """
  if (workdir / RUN_FILE).exists():
    logging.info("seed %d finished earlier: kept as it is (%s)", seed, workdir)
    return Run(**{**json.loads((workdir / RUN_FILE).read_text()), "workdir": workdir})
  train_features = data["train"][1]
  steps_per_epoch = max(1, len(train_features) // config.batch_size)
  last_step = total_steps(config, data)
  state = trainer.init_state(pretrained, seed)
  batches = batching.train_batches(train_features, batch_size=config.batch_size, max_length=data["max_length"],
                                   pad_id=trainer.pad_id, seed=seed)
  best_checkpoints = checkpoints.Writer(checkpoints.manager(workdir, max_to_keep=1))
  resume_checkpoints = checkpoints.Writer(checkpoints.manager(
      workdir, folder="resume", max_to_keep=1,
      extra_handlers={PROGRESS: ocp.JsonCheckpointHandler(), BATCHES: grain.checkpoint.CheckpointHandler()}))

  def save(writer, step, state, **items):  # synchronous: fine-tuning saves only at evaluations and stops
    writer.save(step, ocp.args.Composite(**{checkpoints.STATE: ocp.args.PyTreeSave(state)}, **items), force=True)
    writer.wait()

  def save_resume(step):
    save(resume_checkpoints, step, state, **{PROGRESS: ocp.args.JsonSave(progress),
                                             BATCHES: grain.checkpoint.CheckpointSave(batches)})

  progress = {"best": None, "best_step": 0, "stale": 0, "stopped_early": False}
  restored, start_step = checkpoints.restore_latest(resume_checkpoints.mngr, trainer.abstract_state)
  if restored is not None:
    state = restored
    items = resume_checkpoints.mngr.restore(start_step, args=ocp.args.Composite(**{
        PROGRESS: ocp.args.JsonRestore(), BATCHES: grain.checkpoint.CheckpointRestore(batches)}))
    progress = items[PROGRESS]
    if progress["best_step"] == start_step and best_checkpoints.mngr.latest_step() != start_step:
      # Stopped between the two saves of an improving evaluation: this state is the best.
      save(best_checkpoints, start_step, {"params": state["params"]})
    logging.info("seed %d: resumed from step %d", seed, start_step)
  else:  # best checkpoints of an attempt that never reached a resume point: set aside
    for step in best_checkpoints.mngr.all_steps():
      checkpoints.move_aside(best_checkpoints.mngr, step, "abandoned")
  is_main = jax.process_index() == 0  # every process trains; one writes the files beside the checkpoints
  if is_main:
    checkpoints.write_model_info(workdir, trainer.model_config.replace(remat="none", attention="auto").to_dict(),
                                 [k for k in state["params"] if k != "encoder"], trainer.tokenizer)
    run_config.trim_metrics(workdir, start_step)
  writer = run_metrics.MetricWriter(workdir, enabled=is_main)
  nonfinite = guards.NonFiniteSteps(config.max_nonfinite_steps)
  dev_examples, dev_features = data["dev"]
  rng = jax.random.key(seed)
  bar = tqdm.tqdm(total=last_step, initial=start_step, disable=not sys.stderr.isatty(), file=sys.stderr,
                  unit="step")
  last_time = time.perf_counter()
  try:
    for step in range(start_step + 1, last_step + 1):
      if progress["stopped_early"]:
        break
      state, step_metrics = trainer.train_step(state, next(batches), jax.random.fold_in(rng, step))
      nonfinite.push(step, step_metrics.pop("finite"))
      bar.update()
      if step % config.log_every == 0:
        nonfinite.flush()
        step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
        step_metrics["step_seconds"] = (time.perf_counter() - last_time) / config.log_every
        step_metrics["nonfinite_steps"] = nonfinite.take_skipped()
        writer.write(step, step_metrics)
        bar.set_postfix(loss=f"{step_metrics['loss']:.3f}")
        last_time = time.perf_counter()
      nonfinite.check()
      evaluation = step % config.eval_every == 0 or step % steps_per_epoch == 0 or step == last_step
      if evaluation:
        scores, _, _ = evaluate(task, trainer, state["params"], dev_examples, dev_features)
        writer.write(step, {f"dev_{k}": v for k, v in scores.items()} | {"epoch": step / steps_per_epoch})
        logging.info("seed %d step %d: dev %s", seed, step, run_metrics.brief(scores))
        improved = progress["best"] is None or scores[task.main_metric] > progress["best"]
        if improved:
          progress.update(best=scores[task.main_metric], best_step=step, stale=0)
        else:
          progress["stale"] += 1
          if progress["stale"] >= config.patience:
            logging.info("seed %d: no improvement in %d evaluations, stopping at step %d", seed, progress["stale"],
                         step)
            progress["stopped_early"] = True
        save_resume(step)  # first: an improving step's resume point can re-save its best (above)
        if improved:
          save(best_checkpoints, step, {"params": state["params"]})
      if signum := stop.signal_at(step):
        if not evaluation:
          save_resume(step)
        raise guards.Interrupted(signum, step)
  finally:
    bar.close()
    writer.close()
    best_checkpoints.close()
    resume_checkpoints.close()

  _, params = checkpoints.restore_model(workdir)
  params = jax.device_put(params, trainer.params_sharding)
  # Checkpoints are chosen on greedy translations; the final ones use the configured beam.
  beam_size = config.decoding.beam_size if task.head == "prefix_lm" else 1
  dev, predictions, confusion = evaluate(task, trainer, params, dev_examples, dev_features, beam_size=beam_size)
  if is_main:
    write_predictions(task, workdir / f"dev_predictions.{task.submission_format}", dev_examples, predictions)
  test = None
  if "test" in data:
    test_examples, test_features = data["test"]
    test, predictions, _ = evaluate(task, trainer, params, test_examples, test_features, beam_size=beam_size)
    if is_main:
      write_predictions(task, workdir / f"test_predictions.{task.submission_format}", test_examples, predictions)
  run = Run(seed, workdir, progress["best_step"], dev, test, progress["stopped_early"], confusion.tolist())
  if not is_main:
    return run
  (workdir / RUN_FILE).write_text(json.dumps({**dataclasses.asdict(run), "workdir": str(workdir)}, indent=2,
                                             ensure_ascii=False))
  resume_dir = workdir / "resume"  # the seed is finished: its resume point is no longer needed
  for path in resume_dir.iterdir():
    if path.name.isdigit():  # (anything set aside there as unreadable stays)
      path.rmtree()
  if resume_dir.exists() and not any(resume_dir.iterdir()):  # (a bucket has no empty folders)
    resume_dir.rmdir()
  return run


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


def given_predicates(splits: dict, run) -> dict:
  """C-CLUE's pipeline: the dev and test records with the predicates a cclue_re run (its
  workdir) predicted for them, the labeller's input (train keeps the gold ones)."""
  best_run = epath.Path(json.loads((epath.Path(run) / "results.json").read_text())["best_run"])
  out = dict(splits)
  for split in ("dev", "test"):
    if split not in splits:
      continue
    path = best_run / f"{split}_predictions.txt"
    predicted = path.read_text(encoding="utf-8").splitlines()
    if len(predicted) != len(splits[split]):
      raise ValueError(f"{path}: {len(predicted)} predicates for the {len(splits[split])} records of the {split} "
                       "split: the cclue_re run was made on other files")
    out[split] = [dataclasses.replace(e, given_predicate=p) for e, p in zip(splits[split], predicted)]
  return out


def _splits(data: dict) -> dict:
  """{split: (examples, features)} of load_task_data's result."""
  return {split: data[split] for split in ("train", "dev", "test") if split in data}


def _prepare(config, devices=None):
  """(task, splits, featurized data, trainer, pretrained params) of config.task."""
  if config.task not in TASKS:
    raise ValueError(f"unknown task {config.task!r}; fine-tuning tasks are {sorted(TASKS)}")
  if not config.data_dir:
    raise ValueError("set --config.data_dir to the task folder (its benchmark's files as released)")
  task = TASKS[config.task]
  splits = datasets.load_splits(task.data, config.data_dir)
  if "dev" not in splits:
    raise FileNotFoundError(f"{config.data_dir}: no dev file; the best checkpoint is chosen on dev")
  if task.name == "fspc":  # the toolkit scores poems and their lines; trains on both unless told not to
    for split in splits:
      if split != "train" or config.train_on_lines:
        splits[split] = wyweb.fspc_scoring_set(splits[split])
  if task.name == "punc" and config.score_chars:
    task = wyweb.punc_task(config.score_chars)
  if task.name == "cclue_spo" and config.predicates_from:
    splits = given_predicates(splits, config.predicates_from)
  model_config, pretrained, tokenizer = load_init(config.init, splits["train"], task.inserted_text)
  model_config = model_config.replace(dtype=config.dtype, remat=config.remat, scan_layers=config.scan_layers,
                                      attention=config.attention)
  data = load_task_data(task, config, tokenizer, model_config, splits)
  trainer = Trainer(task, model_config, tokenizer, config, total_steps(config, data), data["max_length"],
                    data["train"][1][0], devices)
  return task, splits, data, trainer, pretrained


def compile_only(config: ml_collections.ConfigDict, topology: str) -> dict:
  """Compiles the task's train step for `topology` (see wyjax.core.aot) at config.batch_size
  × the task's longest batch, without running it; returns aot.report's figures."""
  devices = aot.devices(topology)
  task, _, data, trainer, _ = _prepare(config, devices)
  features = data["train"][1]
  batch = batching.collate([features[i % len(features)] for i in range(config.batch_size)],
                           batch_size=config.batch_size, lengths=(data["max_length"],), pad_id=trainer.pad_id)
  abstract = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=trainer.data_sharding)
  inputs = jax.tree_util.tree_map(abstract, _model_inputs(batch))
  labels = abstract(np.asarray(_labels(batch)))
  rng = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=partitioning.replicated(trainer.mesh))
  compiled = aot.compile_step(trainer.jit_train, trainer.abstract_state, inputs, labels, rng, topology=topology)
  tokens = int(np.prod(batch["input_ids"].shape))
  lm_fraction = 1.0 if task.head == "prefix_lm" else 0.0  # other heads are small beside the encoder
  flops = 3 * trainer.model_config.forward_flops_per_token(data["max_length"], lm_fraction) * tokens
  result = aot.report(compiled, topology=topology, devs=devices, mesh=trainer.mesh,
                      abstract_state=trainer.abstract_state, analytic_flops_per_step=flops, tokens_per_step=tokens)
  aot.check_fits(result)
  return result


def finetune(config: ml_collections.ConfigDict, workdir, *, accept_config_change: bool = False) -> dict:
  """Fine-tunes config.task for config.seeds seeds; returns (and writes) results.json.

  Rerunning on the same workdir keeps finished seeds and continues unfinished ones (see the
  module docstring); a changed config is refused unless accept_config_change.
  """
  distributed.initialize()
  workdir = epath.Path(workdir)
  changes = run_config.check_config(workdir, config, ignore=RESUMABLE_CHANGES, defaults=base_config(),
                                accept=accept_config_change) \
      if any(workdir.glob("seed_*")) else {}
  task, splits, data, trainer, pretrained = _prepare(config)
  if jax.process_index() == 0:
    run_config.store_config(workdir, config, changes)
  with guards.stop_signals(config.stop_check_every) as stop:
    runs = [train_one(task, config, data, trainer, pretrained, config.seed + k, workdir / f"seed_{config.seed + k}",
                      stop) for k in range(config.seeds)]
  best_run = max(runs, key=lambda r: r.dev[task.main_metric])
  dev_scores = np.array([r.dev[task.main_metric] for r in runs])
  results = {
      "task": task.name, "main_metric": task.main_metric, "init": config.init or "fresh tiny model",
      "dev_mean": float(dev_scores.mean()), "dev_std": float(dev_scores.std()),
      "best_seed": best_run.seed, "best_run": str(best_run.workdir), "dev": best_run.dev, "test": best_run.test,
      "labels": list(task.labels), "dev_confusion": best_run.dev_confusion,
      "majority_baseline": majority_baseline(task, splits["train"], splits["dev"]),
      "truncated_characters": data["truncated"],
      "notes": {split: notes for split, (examples, _) in _splits(data).items() if (notes := task.notes(examples))},
      "runs": [{"seed": r.seed, "best_step": r.best_step, "stopped_early": r.stopped_early, "dev": r.dev,
                "test": r.test} for r in runs],
      "config": config.to_dict(),
  }
  submission = workdir / "submission" / task.submission_file
  if "test" in data:
    results["submission"] = str(submission)
  if jax.process_index() == 0:
    if "test" in data:
      submission.parent.mkdir(parents=True, exist_ok=True)
      (best_run.workdir / f"test_predictions.{task.submission_format}").copy(submission, overwrite=True)
    (workdir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
  return results

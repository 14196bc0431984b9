"""A task's model over the mesh, and what the fine-tuning loops do with it.

The init (a pretrained model or a fresh tiny one), the featurized splits, the jitted train and
predict steps (built once per task: every seed reuses them), evaluation and translation. Batches
are global: on several processes each one puts its own rows on its devices.
"""

import dataclasses
import logging

import flax.linen as nn
import jax
import numpy as np

from wyjax.core import guards, host_memory
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.hf import loading
from wyjax.models import EncoderConfig, stack_layers
from wyjax.models.task_heads import HEADS
from wyjax.tasks import batching, datasets
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task
from wyjax.train import config_values, learning_rates, program, task_steps, translation

# The model used when no --config.init is given: the embedded default's architecture.
FRESH_TINY_MODEL = dict(
  model_type="deberta-v2",
  hidden_size=128,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=256,
  max_position_embeddings=128,
  relative_attention=True,
  position_buckets=32,
  pos_att_type="p2c|c2p",
  share_att_key=True,
  norm_rel_ebd="layer_norm",
  position_biased_input=False,
)


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


def load_init(
  init: str, train_examples, inserted_text: str = ""
) -> tuple[EncoderConfig, dict, tokenizer_lib.Tokenizer]:
  """(encoder config, pretrained params, tokenizer) of `init`, or of a fresh tiny model.

  A fresh model has no pretrained params and a vocabulary of the train split's and inserted_text's characters.
  """
  if init:
    model = loading.read(init)  # on the host: the params are grafted into the task model
    if model.tokenizer is None:
      raise FileNotFoundError(f"{init}: no tokenizer (vocab.txt) beside the model")
    params = model.params.get("scorer", model.params)  # a multiple-choice run keeps its model under 'scorer'
    pretrained = {k: v for k, v in params.items() if k in ("encoder", "pooler", "classifier", "mlm_head")}
    return model.config, pretrained, model.tokenizer
  logging.warning(
    "no --config.init: fine-tuning a FRESH, RANDOMLY INITIALISED tiny model; scores "
    "will be far below a pretrained model's (pretrain one with python -m wyjax.pretrain)"
  )
  texts = [text for e in train_examples for text in example_texts(e)]
  vocab = tokenizer_lib.build_vocab(texts + [inserted_text] if inserted_text else texts)
  return EncoderConfig(**FRESH_TINY_MODEL, vocab_size=len(vocab)), {}, tokenizer_lib.Tokenizer(vocab)


def load_task_data(task: Task, config, tokenizer, model_config: EncoderConfig, splits: dict) -> dict:
  """{'train'|'dev'|'test': (examples, features), 'max_length': n, 'truncated': {split: chars}}."""
  max_length = config.max_length or task.max_length
  if model_config.absolute_positions and max_length > model_config.max_tokens:
    logging.warning(
      "max_length %d exceeds the %d tokens the model's absolute positions hold; using %d",
      max_length,
      model_config.max_tokens,
      model_config.max_tokens,
    )
    max_length = model_config.max_tokens
  data = {"max_length": max_length, "truncated": {}}
  for split, examples in splits.items():
    path = datasets.file_of(task.files, config.data_dir, split)
    features, truncated = task.featurize_all(examples, tokenizer, max_length, path)
    if truncated:
      logging.warning("%s: truncation to %d tokens cut %d characters", path, max_length, truncated)
    data[split] = (examples, features)
    data["truncated"][split] = truncated
  return data


def graft(params: dict, pretrained: dict) -> dict:
  """The model's params with the pretrained parts put in.

  The encoder always goes in (a second encoder, CCPM Match's candidate_encoder, starts from it
  too); the pooler, classifier and MLM head (the prefix LM's) when the model has them in the same
  shapes; a new task's head stays fresh.

  Args:
    params: the model's shapes (jax.ShapeDtypeStruct); those left fresh stay so.
    pretrained: per layer (wyjax.hf.Model's); stacked here for a scan_layers model.

  Raises:
    ValueError: the pretrained encoder does not fit the model's.
  """
  params = jax.tree_util.tree_map(lambda leaf: leaf, params)  # a copy to graft into
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
      raise ValueError(
        "the pretrained encoder's params do not fit the model's: "
        f"{jax.tree_util.tree_map(np.shape, tree)} vs {jax.tree_util.tree_map(np.shape, target[name])}"
      )
    else:
      logging.info("init's %s does not fit this task's head: initialised fresh", name)
  return params


def model_inputs(batch: dict) -> dict:
  return {k: batch[k] for k in ("input_ids", "token_type_ids", "span_mask") if k in batch}


def labels_of(batch: dict):
  return batch["labels"] if "labels" in batch else batch["label"]


def _init_inputs(inputs: dict) -> dict:
  ids = inputs["input_ids"]
  return {
    "input_ids": ids,
    "attention_mask": np.ones_like(ids),
    "token_type_ids": inputs.get("token_type_ids"),
    **({"span_mask": inputs["span_mask"]} if "span_mask" in inputs else {}),
  }


class TaskModel:
  """The jitted train and predict steps of one task and model over the mesh."""

  def __init__(
    self,
    task: Task,
    model_config: EncoderConfig,
    tokenizer,
    config,
    total_steps: int,
    max_length: int,
    example: dict,
    devices=None,
  ):
    """example: one featurized example, for the shapes of the params (the head's included)."""
    self.task, self.config, self.tokenizer, self.max_length = task, config, tokenizer, max_length
    self.pad_id = tokenizer.pad_id
    self.model_config = model_config
    self.head = HEADS[task.head]
    batch = batching.collate([example], batch_size=1, lengths=(example["input_ids"].shape[-1],), pad_id=self.pad_id)
    self.module = self.head.build(model_config, len(task.labels))
    self._init_inputs = _init_inputs(model_inputs(batch))  # numpy: shapes for the init, no program
    self.program = program.build(
      self._boxed_params,
      config,
      warmup_steps=int(config.warmup_fraction * total_steps),
      total_steps=total_steps,
      devices=devices,
    )
    self.shards = shards = self.program.mesh.shape["data"] * self.program.mesh.shape["fsdp"]
    if config.batch_size % shards or config.eval_batch_size % shards:
      raise ValueError(
        f"batch_size {config.batch_size} and eval_batch_size {config.eval_batch_size} must be "
        f"multiples of the {shards} data shards of the mesh {dict(self.program.mesh.shape)}"
      )
    self.bucket_count = bucket_count(config, self.program.mesh.devices.flat[0].platform)
    train_step, predict_step = task_steps.make_steps(self.program, self.module, self.head, self.pad_id)
    data = self.program.data_sharding
    self.jit_train = self.program.jit_train(train_step, data, data, self.program.replicated)
    self.jit_eval = self.program.jit_eval(predict_step, data)
    self._init_fresh = jax.jit(self._fresh_params, static_argnums=1)  # one program, not one per op
    self._key = jax.jit(jax.random.key, out_shardings=self.program.replicated)

  def _boxed_params(self, key) -> dict:
    return self.module.init(key, **self._init_inputs)["params"]

  def _fresh_params(self, key, fresh: tuple[bool, ...]) -> list:
    """The initialised params that `fresh` marks, in leaf order: XLA drops the other initializers."""
    params = jax.tree_util.tree_leaves(nn.unbox(self._boxed_params(key)))
    return [leaf for leaf, is_fresh in zip(params, fresh) if is_fresh]

  def init_params(self, pretrained: dict, seed: int) -> dict:
    """Fresh head params for `seed` with the pretrained ones grafted in, placed on the mesh."""
    params, treedef = jax.tree_util.tree_flatten(graft(self.program.abstract_state["params"], pretrained))
    fresh = tuple(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in params)  # only these are drawn
    drawn = iter(self._init_fresh(self.seed_key(seed), fresh))
    params = [next(drawn) if is_fresh else leaf for leaf, is_fresh in zip(params, fresh)]
    return jax.device_put(jax.tree_util.tree_unflatten(treedef, params), self.program.params_sharding)

  def init_state(self, pretrained: dict, seed: int) -> dict:
    return self.program.place(self.init_params(pretrained, seed))

  def global_batch(self, batch: dict) -> dict:
    """Global arrays from a batch every process holds whole: each puts its own rows.

    The one transfer a step makes, allowed under the loop's guard (on several processes jax counts
    it as implicit).
    """
    count, index = jax.process_count(), jax.process_index()

    def put(x):
      rows = x.shape[0] // count
      return jax.make_array_from_process_local_data(
        self.program.data_sharding, x[index * rows : (index + 1) * rows], x.shape
      )

    with jax.transfer_guard_host_to_device("allow"):
      return jax.tree_util.tree_map(put, batch)

  def seed_key(self, seed: int) -> jax.Array:
    """The seed's key on the mesh: the init draws the head from it, each train step its dropout.

    Made there by one program (every process makes the same); no step moves it.
    """
    return self._key(np.uint32(seed))

  def train_step(self, state, batch, rng):
    """One step on a host batch; rng: the seed's key (seed_key)."""
    return self.jit_train(state, self.global_batch(model_inputs(batch)), self.global_batch(labels_of(batch)), rng)

  def fit(self, pretrained: dict, features: list[dict], *, steps: int, seed: int) -> dict:
    """Params after `steps` steps on features from the pretrained ones (no evaluation)."""
    state = self.init_state(pretrained, seed)
    batches = batching.train_batches(
      features,
      batch_size=self.config.batch_size,
      max_length=self.max_length,
      pad_id=self.pad_id,
      seed=seed,
      sort_window=self.config.sort_window,
      bucket_count=self.bucket_count,
    )
    rng = self.seed_key(seed)
    for _ in range(steps):
      state, _ = self.train_step(state, next(batches), rng)
    return state["params"]

  def eval_batch_size(self, features: list[dict]) -> int:
    """Examples per evaluation batch: config.eval_batch_size sequences, within what `features` fill.

    An example counts as the most rows (options, windows) of any; a batch holds no more than the
    power of two per shard that `features` fill, so a huge eval_batch_size makes no huge program.
    """
    rows = max(f["input_ids"].shape[0] if f["input_ids"].ndim == 2 else 1 for f in features)
    per_shard = -(-len(features) // self.shards)
    return max(1, min(self.config.eval_batch_size // rows, self.shards << (per_shard - 1).bit_length()))

  def predict(self, params, features: list[dict]) -> list[np.ndarray]:
    """Logits of each example (a generating head's: argmax tokens), cut by its head to its own rows and tokens."""
    out = [None] * len(features)

    def fetch(indices, logits):
      logits = jax.device_get(logits)
      for row, i in enumerate(indices):
        out[i] = self.head.trim(logits[row], features[i]["input_ids"].shape)

    pending = None
    for count, (indices, batch) in enumerate(
      batching.eval_batches(
        features,
        batch_size=self.eval_batch_size(features),
        max_length=self.max_length,
        pad_id=self.pad_id,
        bucket_count=self.bucket_count,
      )
    ):
      guards.honour_stop(count)
      # dispatched, not awaited: a batch's logits come to the host while the next batch computes
      logits = self.jit_eval(params, self.global_batch(model_inputs(batch)))
      if pending:
        fetch(*pending)
      pending = indices, logits
    fetch(*pending)
    return out

  def largest_programs(self, data: dict) -> list[host_memory.Program]:
    """The train and predict steps compiled at the largest batches this run can draw (batching.largest_batch).

    Compiled before the first step, their memory is known before any runs; jit's cache serves them
    to the steps that draw those shapes.
    """
    config, prog = self.config, self.program
    spec = lambda x, sharding=prog.data_sharding: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
    train = data["train"][1]
    lengths = batching.train_lengths(
      train,
      batch_size=config.batch_size,
      max_length=self.max_length,
      seed=config.seed,
      sort_window=config.sort_window,
      bucket_count=self.bucket_count,
    )
    batch = batching.largest_batch(train, batch_size=config.batch_size, lengths=lengths, pad_id=self.pad_id)
    key = jax.ShapeDtypeStruct((), jax.eval_shape(jax.random.key, 0).dtype, sharding=prog.replicated)
    train_step = self.jit_train.lower(
      prog.abstract_state, jax.tree_util.tree_map(spec, model_inputs(batch)), spec(np.asarray(labels_of(batch))), key
    ).compile()
    programs = [
      host_memory.Program(
        f"the training step at {_shape(batch)} tokens",
        train_step,
        lambda fits: _smaller(fits, "batch_size", config.batch_size, self.max_length),
      )
    ]
    evaluated = [data[split][1] for split in ("dev", "test") if split in data]
    if evaluated:
      batch = max(map(self._largest_eval_batch, evaluated), key=lambda b: b["input_ids"].size)
      predict_step = self.jit_eval.lower(
        prog.abstract_state["params"], jax.tree_util.tree_map(spec, model_inputs(batch))
      ).compile()
      programs.append(
        host_memory.Program(
          f"the evaluation step at {_shape(batch)} tokens",
          predict_step,
          lambda fits: _smaller(fits, "eval_batch_size", config.eval_batch_size, self.max_length),
        )
      )
    return programs

  def _largest_eval_batch(self, features: list[dict]) -> dict:
    size = self.eval_batch_size(features)
    lengths = batching.eval_lengths(
      features, batch_size=size, max_length=self.max_length, bucket_count=self.bucket_count
    )
    return batching.largest_batch(features, batch_size=size, lengths=lengths, pad_id=self.pad_id)

  def evaluate(self, params, examples, features, *, beam_size: int = 1) -> tuple[dict | None, list, np.ndarray]:
    """(metrics, predictions, confusion matrix [gold, predicted] over the head's classes) of a split.

    metrics is None for a split without gold labels. A generating head's predictions are generated
    (beam_size 1: greedy) and scored; the task's forced_scores of its argmax tokens join them.
    """
    task = self.task
    logits = self.predict(params, features)
    no_classes = np.zeros((0, 0), np.int64)
    if self.head.generates:
      texts = translation.translate(self, params, examples, beam_size)
      predictions = [task.decode(e, f, t) for e, f, t in zip(examples, features, texts)]
      scores = task.score(examples, predictions)
      if task.forced_scores:
        scores |= task.forced_scores(self.tokenizer, features, logits)
      return scores, predictions, no_classes
    predictions = task.predictions(examples, features, logits)
    if not any(np.any(np.asarray(labels_of(f)) != IGNORE) for f in features):
      return None, predictions, no_classes
    if not task.labels:  # extractive answers: no classes to confuse
      return task.score(examples, predictions), predictions, no_classes
    confusion = np.zeros((len(task.labels),) * 2, np.int64)
    for feature, example_logits in zip(features, logits):
      gold = np.atleast_1d(labels_of(feature))
      predicted = np.atleast_1d(np.argmax(example_logits, -1))
      np.add.at(confusion, (gold[gold != IGNORE], predicted[gold != IGNORE]), 1)
    return task.score(examples, predictions), predictions, confusion


def _shape(batch: dict) -> str:
  return " × ".join(map(str, batch["input_ids"].shape))


def _smaller(fits: float, batch_key: str, batch_size: int, max_length: int) -> str:
  """What makes a step `fits` of its size: its batch about as much smaller, or shorter sequences."""
  smaller_batch = int(batch_size * fits)
  return (
    f"set --config.{batch_key}={smaller_batch} or lower (now {batch_size}), or " if smaller_batch else ""
  ) + f"a lower --config.max_length (now {max_length})"


def bucket_count(config, platform: str) -> int | None:
  """How many padded lengths, each a compiled program, a run's train and eval batches take.

  config.length_buckets, else by platform: on the CPU as many as pay (None: each pads
  batching.MIN_SAVING fewer tokens), on a GPU or TPU one.
  """
  if config.length_buckets:
    return config.length_buckets
  # A compile takes seconds on the CPU, a padded token real time; on a GPU or TPU a program compiles
  # and autotunes for seconds to a minute, while a padded token costs little.
  return None if platform == "cpu" else 1


def total_steps(config, data: dict) -> int:
  """config.num_train_steps, or num_epochs over the train split."""
  return config.num_train_steps or max(1, len(data["train"][1]) // config.batch_size) * config.num_epochs


def setup(task: Task, config, init: str, splits: dict, devices=None):
  """(TaskModel, pretrained params, load_task_data's data) of `init` on the task's splits.

  The model's config (TaskModel.config) has its learning rate resolved for the model's size
  (wyjax.train.learning_rates). For a run on this machine (no `devices`), its largest steps are
  compiled first and admitted (host_memory.admit): one that cannot fit is refused before any runs.
  """
  model_config, pretrained, tokenizer = load_init(init, splits["train"], task.inserted_text)
  if config.init_weights == "random":  # the unpretrained twin: init's architecture and vocabulary only
    if not init:
      raise ValueError("config.init_weights='random' takes the architecture and vocabulary of --config.init: set it")
    pretrained = {}
  model_config = model_config.replace(
    dtype=config.dtype,
    remat=config.remat,
    scan_layers=config.scan_layers,
    scan_unroll=config.scan_unroll,
    attention=config.attention,
  )
  config = learning_rates.resolved(config, model_config)
  data = load_task_data(task, config, tokenizer, model_config, splits)
  longest = max((f["input_ids"].shape[-1] for split in splits for f in data[split][1]), default=0)
  config_values.check_data(config, train_examples=len(data["train"][1]), longest=longest, max_length=data["max_length"])
  model = TaskModel(
    task, model_config, tokenizer, config, total_steps(config, data), data["max_length"], data["train"][1][0], devices
  )
  if devices is None:  # a run on this machine: refused here if its largest steps cannot fit
    host_memory.admit(model.largest_programs(data))
  return model, pretrained, data

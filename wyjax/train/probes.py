"""Linear probes of a frozen encoder on fine-tuning tasks: an evaluation of a pretraining run or any checkpoint.

- `--config.probes=tlc:DIR,punc:DIR` probes a pretraining run at step 0 and at each evaluation;
  `python -m wyjax.probe` probes any checkpoint (`probe_model`).
- Any registered task whose head has a probe is probed: a ridge regression onto one-hot labels,
  fitted in closed form on the encoder's features (`fit_and_score`), its dev split scored by the task.
- A probe is a pure function of the encoder's parameters: the same checkpoint scores the same in
  its run and from the command.
"""

import concurrent.futures
import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from jax.sharding import Mesh

from wyjax.core import partitioning
from wyjax.hf import loading
from wyjax.models import EncoderConfig, encoder_class
from wyjax.models.task_heads import HEADS, PER_TOKEN
from wyjax.tasks import datasets
from wyjax.tasks.registry import TASKS
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task
from wyjax.train import task_model

SEED = 0  # draws the training examples a probe fits: the same in every run and command
HELD_OUT = 5  # every 5th drawn training example chooses the ridge strength and balance
# Ridge strengths, strongest first (a tie goes to the stronger), as multiples of the mean
# eigenvalue of the centred features' Gram matrix: from a heavy shrinkage to almost none.
STRENGTHS = 10.0 ** np.arange(1, -6, -1)
# Each row weighted by its label's frequency to the power −balance: none, partial, full (a tie goes
# to less). Unweighted, PUNC's probe predicted little but the last mark of a text (precision 0.97-0.99,
# recall 0.12 from step 250 of the demo's pretraining to its end): the marks inside were outvoted by O.
BALANCES = (0.0, 0.5, 1.0)
# Rows of a packed batch by platform, rounded up to the mesh's data shards. On the CPU 16: the
# demo's tiny model encoded 16 rows of 128 tokens at 131,000 tokens a second on 2 cores, 8 rows at
# 125,000, 32 and 64 at 116,000 and 94,000 (larger batches outgrow the caches).
ROWS = {"cpu": 16}
ACCELERATOR_ROWS = 64
# The ridge's algebra (Gram matrices, an eigendecomposition) on one BLAS thread: on 2 busy cores
# OpenBLAS's two threads made a 128 × 128 eigh take 0.45 s instead of 1.6 ms, and PUNC's
# 50,000 × 128 Gram matrix 1-2 s instead of 0.04.
BLAS_THREADS = 1


def metric_key(task: str, metric: str) -> str:
  """The name a probe's score has in metrics.jsonl, TensorBoard and the progress line."""
  return f"probe/{task}/{metric}"


def parse(spec: str, flag: str = "--config.probes") -> list[tuple[str, str]]:
  """'tlc:DIR,punc:DIR' as [(task, folder)], checked before any work.

  Raises:
    ValueError: naming `flag`, for a task unknown, without a probe or named twice.
    FileNotFoundError: naming `flag`, for a folder missing.
  """
  out = []
  for entry in filter(None, (e.strip() for e in spec.split(","))):
    name, colon, folder = entry.partition(":")
    if not colon or not folder:
      raise ValueError(f"{flag}: {entry!r} is not TASK:FOLDER (e.g. tlc:WYWEB/tlc)")
    if name not in TASKS:
      raise ValueError(f"{flag}: unknown task {name!r}; probes: {', '.join(probed_tasks())}")
    check_probed(TASKS[name], flag)
    if name in dict(out):
      raise ValueError(f"{flag}: {name} named twice")
    if not pathlib.Path(folder).is_dir():
      raise FileNotFoundError(f"{flag}: {folder}: no such task folder (for {name})")
    out.append((name, folder))
  return out


def probed_tasks() -> list[str]:
  return [name for name, task in TASKS.items() if HEADS[task.head].probe]


def check_probed(task: Task, flag: str) -> None:
  if not HEADS[task.head].probe:
    raise ValueError(
      f"{flag}: {task.name} has no linear probe: its head ({task.head}) predicts neither one label "
      f"per example nor one per token; probes: {', '.join(probed_tasks())}"
    )


@dataclasses.dataclass(frozen=True)
class TaskProbe:
  """One task's examples and features, read once: parts {fit, held_out, dev}, each (examples, features).

  fit and held_out are drawn training examples.
  """

  task: Task
  per_token: bool
  parts: dict[str, tuple[list, list[dict]]]


def load(config, tokenizer, model_config: EncoderConfig, examples: int) -> TaskProbe:
  """The probe of the task config `config` (a task with a probe: check_probed) for a model of `model_config`.

  The config's task, data_dir, max_length and options are read as fine-tuning reads them; up to
  `examples` training examples (drawn with SEED) and the dev split are featurized.
  """
  task = TASKS[config.task]
  splits = datasets.load_splits(task.files, config.data_dir)
  task, splits = task.prepare(task, splits, config)
  if "dev" not in splits:
    raise FileNotFoundError(f"{config.data_dir}: no dev split for {task.name}'s probe to score")
  train = splits["train"]
  drawn = np.sort(np.random.default_rng(SEED).permutation(len(train))[:examples])
  sample = [train[i] for i in drawn]
  data = task_model.load_task_data(task, config, tokenizer, model_config, {"train": sample, "dev": splits["dev"]})
  (sample, features), dev = data["train"], data["dev"]
  held = np.arange(len(sample)) % HELD_OUT == 0
  pick = lambda mask: ([e for e, m in zip(sample, mask) if m], [f for f, m in zip(features, mask) if m])
  parts = {"fit": pick(~held), "held_out": pick(held), "dev": dev}
  if not parts["fit"][0]:
    raise ValueError(
      f"{config.data_dir}: {len(sample)} training example(s): a probe needs at least 2 (one to fit, "
      "one to choose the ridge strength)"
    )
  return TaskProbe(task, HEADS[task.head].probe == PER_TOKEN, parts)


@dataclasses.dataclass(frozen=True)
class Encoder:
  """The encoder's features as one jitted program over a mesh, deterministic (no dropout).

  (encoder params, a `packed_batches` batch) → the last hidden state [rows, length, hidden] in
  float32, replicated for the host; each token's from the tokens of its own example alone.
  """

  mesh: Mesh
  params_sharding: dict
  features: Callable
  pad_id: int

  @classmethod
  def build(cls, model_config: EncoderConfig, mesh: Mesh, logical_rules, encoder_sharding, pad_id: int) -> "Encoder":
    encoder = encoder_class(model_config)(model_config)

    def features(params, batch):
      segments = batch["segments"]
      own_example = segments[:, :, None] == segments[:, None, :]  # [rows, query, key]; padding sees padding
      hidden = encoder.apply(
        {"params": params},
        batch["input_ids"],
        own_example,
        batch["token_type_ids"],
        batch["positions"] + model_config.first_position,
        deterministic=True,
      )
      return hidden.astype(jnp.float32)

    jitted = jax.jit(
      partitioning.with_activation_constraints(features, mesh, logical_rules),
      in_shardings=(encoder_sharding, partitioning.batch_sharding(mesh)),
      out_shardings=partitioning.replicated(mesh),
    )
    return cls(mesh, encoder_sharding, jitted, pad_id)

  @classmethod
  def of_params(cls, model_config: EncoderConfig, mesh: Mesh, logical_rules, pad_id: int) -> "Encoder":
    """The program for a model of its own (wyjax.probe): its params placed by their logical axes."""
    encoder = encoder_class(model_config)(model_config)
    boxed = jax.eval_shape(lambda: encoder.init(jax.random.key(0), jnp.zeros((1, 8), jnp.int32))["params"])
    return cls.build(
      model_config, mesh, logical_rules, partitioning.param_shardings(boxed, mesh, logical_rules), pad_id
    )

  @property
  def rows(self) -> int:
    """Rows of a packed batch on its platform (ROWS), rounded up to the mesh's data shards."""
    shards = self.mesh.shape["data"] * self.mesh.shape["fsdp"]
    return -(-ROWS.get(self.mesh.devices.flat[0].platform, ACCELERATOR_ROWS) // shards) * shards


def pack(lengths: list[int], row_length: int) -> list[list[int]]:
  """The examples of these token counts in rows of row_length tokens, by best-fit decreasing.

  Each, longest first, goes into the row it fills most tightly; ties by index, so a packing is fixed.
  """
  rows, by_room = [], [[] for _ in range(row_length + 1)]  # by_room[r]: the rows with r tokens free
  for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
    room = next((r for r in range(lengths[i], row_length + 1) if by_room[r]), None)
    if room is None:
      row, room = len(rows), row_length
      rows.append([])
    else:
      row = by_room[room].pop()
    rows[row].append(i)
    by_room[room - lengths[i]].append(row)
  return rows


def packed_batches(features: list[dict], *, rows: int, row_length: int, pad_id: int) -> list[tuple[list, dict]]:
  """[(placements, batch)]: the features `pack`ed, `rows` rows a batch.

  A placement is (feature index, its row, its first token's column). A batch holds input_ids,
  token_type_ids, positions (from 0 at each example's first token) and segments (1, 2, … for a
  row's examples, 0 padding), each [rows, row_length] int32.
  """
  # Packed, not padded: each example attends to itself alone from its own positions, so it encodes as
  # it would alone (to float rounding), and one program serves every task and evaluation.
  lengths = [f["input_ids"].shape[-1] for f in features]
  packed = pack(lengths, row_length)
  out = []
  for first in range(0, len(packed), rows):
    batch = {
      key: np.zeros((rows, row_length), np.int32) for key in ("input_ids", "token_type_ids", "positions", "segments")
    }
    batch["input_ids"][:] = pad_id
    placements = []
    for row, examples in enumerate(packed[first : first + rows]):
      start = 0
      for segment, i in enumerate(examples, 1):
        span = slice(start, start + lengths[i])
        batch["input_ids"][row, span] = features[i]["input_ids"]
        batch["token_type_ids"][row, span] = features[i].get("token_type_ids", 0)
        batch["positions"][row, span] = np.arange(lengths[i])
        batch["segments"][row, span] = segment
        placements.append((i, row, start))
        start += lengths[i]
    out.append((placements, batch))
  return out


class Probes:
  """A run's probes, scored by `evaluate`.

  Their batches are packed and placed on the mesh once; their program compiles in the background
  from here to the first evaluation.
  """

  def __init__(self, probes: list[TaskProbe], encoder: Encoder, encoder_params):
    """encoder_params: the parameters the program will take, or their ShapeDtypeStructs."""
    self.probes, self.encoder = probes, encoder
    sharding = partitioning.batch_sharding(encoder.mesh)
    every = [[f for _, part in probe.parts.values() for f in part] for probe in probes]  # fit, held_out, dev
    row_length = max((f["input_ids"].shape[-1] for features in every for f in features), default=1)
    self._batches = []  # per probe: [(placements of its examples, in `every`'s order; batch)]
    self._lengths = []  # per probe: each example's tokens
    for features in every:
      self._lengths.append([f["input_ids"].shape[-1] for f in features])
      batches = packed_batches(features, rows=encoder.rows, row_length=row_length, pad_id=encoder.pad_id)
      self._batches.append(
        [(placements, {k: _global(sharding, v) for k, v in batch.items()}) for placements, batch in batches]
      )
    if probes:  # traced here, compiled by a thread (XLA's compile lets go of the GIL)
      lowered = encoder.features.lower(encoder_params, self._batches[0][0][1])
      compiling = concurrent.futures.ThreadPoolExecutor(1)
      self._program = compiling.submit(lowered.compile)
      compiling.shutdown(wait=False)

  def __bool__(self) -> bool:
    return bool(self.probes)

  def evaluate(self, encoder_params, signal_at: Callable[[int], int] = lambda count: 0) -> tuple[dict | None, int]:
    """The probes' scores for `encoder_params`, or the signal that stopped them.

    Returns:
      ({probe/<task>/<metric>: score, probe_seconds: the time they took}, 0), ({}, 0) without probes,
      or (None, the signal) when signal_at(count), asked before each batch (count: the batches so
      far), says to stop.
    """
    if not self.probes:
      return {}, 0
    start, scores, count = time.perf_counter(), {}, 0
    for probe, batches, lengths in zip(self.probes, self._batches, self._lengths):
      features, pending = [None] * len(lengths), None
      for placements, batch in batches:
        if signum := signal_at(count):
          return None, signum
        count += 1
        out = self._program.result()(encoder_params, batch)  # dispatched, not awaited
        if pending:
          _store(features, lengths, probe.per_token, *pending)
        pending = placements, out
      _store(features, lengths, probe.per_token, *pending)
      with threadpoolctl.threadpool_limits(BLAS_THREADS, "blas"):
        scores |= {metric_key(probe.task.name, k): v for k, v in fit_and_score(probe, features).items()}
    return {**scores, "probe_seconds": time.perf_counter() - start}, 0


def _global(sharding, array: np.ndarray) -> jax.Array:
  """A global array from one every process holds whole: each puts its own rows."""
  rows = array.shape[0] // jax.process_count()
  local = array[jax.process_index() * rows : (jax.process_index() + 1) * rows]
  return jax.make_array_from_process_local_data(sharding, local, array.shape)


def _store(features: list, lengths: list[int], per_token: bool, placements, out) -> None:
  """Each example's features from its batch's: its tokens' ([its length, hidden]), or their mean."""
  out = jax.device_get(out)
  for i, row, start in placements:
    tokens = out[row, start : start + lengths[i]]
    features[i] = tokens if per_token else tokens.mean(0)


def fit_and_score(probe: TaskProbe, features: list[np.ndarray]) -> dict:
  """The task's dev metrics of a ridge probe on `features` (one per example of probe.parts, in order).

  Fitted on the fit part at each balance and strength; the pair whose held_out predictions score
  best by the task's main metric (ties: the first), refitted on fit and held_out together, predicts dev.
  """
  task, classes = probe.task, len(probe.task.labels)
  (fit_e, fit_f), (held_e, held_f), (dev_e, dev_f) = probe.parts.values()
  fit_x, held_x, dev_x = (
    features[: len(fit_f)],
    features[len(fit_f) : len(fit_f) + len(held_f)],
    features[len(fit_f) + len(held_f) :],
  )

  def moments(x, f):
    """class_moments of the labelled rows: examples, or their tokens."""
    labels = [np.asarray(task_model.labels_of(fi)) for fi in f]
    x, y = (np.concatenate(x), np.concatenate(labels)) if probe.per_token else (np.stack(x), np.stack(labels))
    return class_moments(x[y != IGNORE], y[y != IGNORE], classes)

  def scorer(x, examples, f):
    """solution → the task's metrics of a part's predictions from the probe's logits."""
    rows = np.concatenate(x) if probe.per_token else np.stack(x)
    ends = np.cumsum([len(xi) for xi in x])[:-1] if probe.per_token else None  # each example's own tokens

    def scores(solution):
      weights, bias = solution
      logits = rows @ weights + bias
      return task.score(examples, task.predictions(examples, f, logits if ends is None else np.split(logits, ends)))

    return scores

  fit, held_scorer = moments(fit_x, fit_f), scorer(held_x, held_e, held_f)
  choices = [
    (balance, strength, solution) for balance in BALANCES for strength, solution in zip(STRENGTHS, ridge(fit, balance))
  ]
  held_scores = [held_scorer(solution)[task.main_metric] for *_, solution in choices]
  balance, strength, _ = choices[int(np.argmax(held_scores))]
  both = tuple(a + b for a, b in zip(fit, moments(held_x, held_f)))
  (solution,) = ridge(both, balance, strengths=(strength,))
  return scorer(dev_x, dev_e, dev_f)(solution)


def class_moments(x: np.ndarray, y: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Each label's rows [classes], sum of x [classes, features] and XᵀX [classes, features, features].

  In float64: all that ridge needs at any balance, and summable over parts.
  """
  counts = np.bincount(y, minlength=classes).astype(np.float64)
  sums, grams = np.zeros((classes, x.shape[1])), np.zeros((classes, x.shape[1], x.shape[1]))
  for label in np.flatnonzero(counts):
    rows = x[y == label].astype(np.float64)
    sums[label], grams[label] = rows.sum(0), rows.T @ rows
  return counts, sums, grams


def ridge(moments: tuple, balance: float = 0.0, strengths=STRENGTHS) -> list[tuple[np.ndarray, np.ndarray]]:
  """(weights [features, classes], bias [classes]) of ridge regression at each strength, from class_moments.

  Rows x regress onto their labels one-hot, each row weighted by its label's frequency to the power
  −balance; a strength is × the mean eigenvalue of the weighted, centred XᵀX; the bias is
  unpenalized. One eigendecomposition serves every strength.
  """
  counts, sums, grams = moments
  label_weights = np.zeros_like(counts)  # a label without rows weighs nothing
  label_weights[counts > 0] = (counts[counts > 0] / counts.sum()) ** -balance
  total = label_weights @ counts
  x_mean, y_mean = label_weights @ sums / total, label_weights * counts / total
  gram = np.einsum("c,cij->ij", label_weights, grams) - total * np.outer(x_mean, x_mean)
  cross = (label_weights[:, None] * sums).T - total * np.outer(x_mean, y_mean)
  eigenvalues, vectors = np.linalg.eigh(gram)
  projected = vectors.T @ cross
  scale = max(float(eigenvalues.mean()), np.finfo(np.float64).tiny)
  out = []
  for strength in strengths:
    weights = vectors @ (projected / (eigenvalues + strength * scale)[:, None])
    out.append((weights, y_mean - x_mean @ weights))
  return out


def task_scores(scores: dict, task: str) -> dict:
  """{metric: score} of one task's probe among Probes.evaluate's scores."""
  prefix = metric_key(task, "")
  return {k.removeprefix(prefix): v for k, v in scores.items() if k.startswith(prefix)}


def probe_model(path, configs: list, examples: int) -> dict:
  """{task: its dev metrics} of probing the model at `path` on each task config, over the first config's mesh.

  path: what wyjax.hf.load reads (a transformers folder, a wyjax workdir, export or checkpoint step).
  """
  model = loading.load(path)
  if model.tokenizer is None:
    raise FileNotFoundError(f"{path}: no tokenizer (vocab.txt) beside the model")
  first = configs[0]
  model_config = model.config.replace(dtype=first.dtype, attention=first.attention)
  mesh = partitioning.make_mesh(first.mesh.to_dict())
  encoder = Encoder.of_params(model_config, mesh, partitioning.rules(first.logical_axis_rules), model.tokenizer.pad_id)
  params = jax.device_put(model.params.get("scorer", model.params)["encoder"], encoder.params_sharding)
  task_probes = [load(config, model.tokenizer, model_config, examples) for config in configs]
  scores, _ = Probes(task_probes, encoder, params).evaluate(params)
  return {probe.task.name: task_scores(scores, probe.task.name) for probe in task_probes}


def read(config, tokenizer, model_config: EncoderConfig) -> list[TaskProbe]:
  """The probes of the tasks config.probes names, at their packaged configs with config.probe_examples examples.

  No jax: pretraining reads them while its steps compile.
  """
  names = parse(config.probes)
  if not names:
    return []
  from wyjax.train import suite  # pylint: disable=import-outside-toplevel  (fine-tuning's configs, only when probing)

  probes = []
  for name, folder in names:
    probes.append(load(suite.task_config(name, data_dir=folder), tokenizer, model_config, config.probe_examples))
    logging.info("probe %s: %s", name, ", ".join(f"{len(p[0])} {k}" for k, p in probes[-1].parts.items()))
  return probes


def for_pretraining(run, task_probes: list[TaskProbe], pad_id: int) -> Probes:
  """The probes of the pretraining `run` (its mesh, its params' shardings): none without task_probes."""
  prog = run.program
  sharding = run.objective.encoder_layout(prog.params_sharding)
  encoder = Encoder.build(run.model_config, prog.mesh, prog.logical_rules, sharding, pad_id)
  return Probes(task_probes, encoder, run.objective.encoder_layout(prog.abstract_state["params"]))

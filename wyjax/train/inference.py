"""A fine-tuned model applied to a user's raw input lines (`wyjax.predict`), its outputs in input order.

Lines are read in chunks, featurized by their task and predicted in batches sorted by length, by
the same jitted step as evaluation (TaskModel's). A character-tagging task (`Task.long_text`) takes
texts of any length, cut into overlapping windows (tasks/long_texts.py); other inputs longer than
the model's length are cut as the task's featurize cuts them, and the characters cut are counted.
"""

import dataclasses
import itertools
import json
import sys
from collections.abc import Iterable, Iterator

import jax
import numpy as np

from wyjax.core import host_memory
from wyjax.tasks import long_texts, user_inputs
from wyjax.tasks.files import FormatError
from wyjax.train import finetuning, translation
from wyjax.train.task_model import TaskModel

CHUNK_CHARACTERS = 1 << 20  # characters read before a chunk is predicted, and tokens predicted at once


@dataclasses.dataclass
class Counts:
  lines: int = 0
  bad: int = 0  # bad lines reported and left empty (skip_bad_lines)
  truncated: int = 0  # characters cut from inputs longer than the model's length


def _groups(features: Iterable[dict], tokens: int) -> Iterator[list[dict]]:
  """`features` in consecutive groups of at least `tokens` tokens each (the last may have fewer)."""
  group, size = [], 0
  for f in features:
    group.append(f)
    size += f["input_ids"].size
    if size >= tokens:
      yield group
      group, size = [], 0
  if group:
    yield group


class Predictor:
  """Outputs of a fine-tuned model (wyjax.hf.task_models.FineTuned) for input lines."""

  def __init__(
    self,
    fine_tuned,
    *,
    batch_size: int = 32,
    beam_size: int = 4,
    keep_marks: bool = False,
    skip_bad_lines: bool = False,
  ):
    self.task, self.tokenizer = fine_tuned.task, fine_tuned.tokenizer
    user_inputs.check_predictable(self.task)
    self.fine_tuned = fine_tuned
    self.max_length = fine_tuned.max_length
    self.batch_size, self.beam_size = batch_size, beam_size
    self.keep_marks, self.skip_bad_lines = keep_marks, skip_bad_lines
    self.counts = Counts()
    self._model = self._params = None

  def _build(self, example_features: dict) -> None:
    """The task's model and params on all devices, built for the first featurized input."""
    config = finetuning.base_config(self.task.name)
    config.batch_size = config.eval_batch_size = self.batch_size
    config.dtype = self.fine_tuned.model_config.dtype
    self._model = TaskModel(
      self.task,
      self.fine_tuned.model_config,
      self.tokenizer,
      config,
      total_steps=1,
      max_length=self.max_length,
      example=example_features,
    )
    self._params = jax.device_put(self.fine_tuned.params, self._model.program.params_sharding)
    # The steps' scratch goes back to the system after each step: the host's work between steps
    # (featurizing, batching, stitching) fragments an arena that keeps everything, and a predict grew
    # by about half a step's scratch per batch.
    host_memory.give_back_large_blocks()

  def _featurized(self, text: str, path, line: int):
    """(example, features) of one input line; a long text's features: (the whole text's, its windows' starts)."""
    example = user_inputs.example(self.task, text, path, line)
    if self.task.unmarked and not self.keep_marks:
      field = self.task.inputs[0]
      example = dataclasses.replace(example, **{field: self.task.unmarked(getattr(example, field))})
    try:
      if not self.task.long_text:
        features, cut = self.task.featurize(example, self.tokenizer, self.max_length)
        self.counts.truncated += cut
        return example, features
      tokens = len(self.tokenizer.encode_chars(getattr(example, self.task.inputs[0]))[0])
      features, _ = self.task.featurize(example, self.tokenizer, tokens + 2)
    except ValueError as e:
      raise FormatError(path, line, str(e)) from None
    return example, (features, long_texts.window_starts(tokens, self.max_length - 2))

  def _logits(self, features: Iterable[dict]) -> Iterator[np.ndarray]:
    """The logits of each of `features` (a generator: read CHUNK_CHARACTERS tokens at a time)."""
    for group in _groups(features, CHUNK_CHARACTERS):
      if self._model is None:
        self._build(group[0])
      yield from self._model.predict(self._params, group)

  def _predict(self, featurized: list) -> list:
    """(prediction, features, logits) of each (example, features) of _featurized."""
    examples = [example for example, _ in featurized]
    if not self.task.long_text:
      features = [f for _, f in featurized]
      logits = list(self._logits(features))
      if self._model.head.generates:
        texts = translation.translate(self._model, self._params, examples, self.beam_size)
        return [(self.task.decode(e, f, t), f, lg) for e, f, lg, t in zip(examples, features, logits, texts)]
      return [(self.task.decode(e, f, lg), f, lg) for e, f, lg in zip(examples, features, logits)]
    room = self.max_length - 2
    # A chunk's worth of windows at a time, stitched into each text's logits as they come: a long text
    # holds its characters' features and logits (about 70 bytes a character), never all its windows'.
    windows = self._logits(
      long_texts.cut(features, start, room) for _, (features, starts) in featurized for start in starts
    )
    out = []
    for example, (features, starts) in featurized:
      tokens = features["input_ids"].shape[-1] - 2
      logits = long_texts.stitch(itertools.islice(windows, len(starts)), starts, room, tokens)
      out.append((self.task.decode(example, features, logits), features, logits))
    return out

  def _show(self, example, prediction, features, logits) -> str:
    shown = self.task.show(example, prediction, features, logits)
    if isinstance(shown, str):
      return shown
    if np.ndim(logits) == 1 and len(logits) == len(self.task.labels):
      probabilities = np.exp(logits - np.max(logits))
      probabilities /= probabilities.sum()
      shown["probabilities"] = {label: round(float(p), 6) for label, p in zip(self.task.labels, probabilities)}
    return json.dumps(shown, ensure_ascii=False)

  def _chunk(self, chunk: list[tuple[int, str | bytes]], path) -> list[str]:
    featurized, out = {}, [""] * len(chunk)
    for i, (line, text) in enumerate(chunk):
      try:
        text = user_inputs.decoded(text, path, line)
        if self.task.long_text and not text.strip():  # a blank line of a book stays as it was
          out[i] = text if self.task.unmarked else ""
          continue
        featurized[i] = self._featurized(text, path, line)
      except FormatError as e:
        if not self.skip_bad_lines:
          raise
        print(e, file=sys.stderr)
        self.counts.bad += 1
    if featurized:
      for i, (prediction, features, logits) in zip(featurized, self._predict(list(featurized.values()))):
        out[i] = self._show(featurized[i][0], prediction, features, logits)
    return out

  def outputs(self, lines: Iterable[str | bytes], path="stdin") -> Iterator[str]:
    """One output line per input line (without line endings; bytes are decoded as UTF-8), in order."""
    chunk, characters = [], 0
    for line, text in enumerate(lines, 1):
      chunk.append((line, text))
      characters += len(text)
      self.counts.lines += 1
      if characters >= CHUNK_CHARACTERS:
        yield from self._chunk(chunk, path)
        chunk, characters = [], 0
    if chunk:
      yield from self._chunk(chunk, path)

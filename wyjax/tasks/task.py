"""A fine-tuning task: everything wyjax knows about one task, in one place.

- A Task names its files, head kind, labels and config options; how an example becomes model inputs and its
  logits a prediction; its metrics, majority baseline and submission in the benchmark's own format
  (docs/finetuning.md); and its place on the leaderboard and the Hub.
- Nothing outside tasks/ names a task: the training loops, the leaderboard, the suite and the model card read
  these fields.
- Texts are encoded one token per visible character (`Tokenizer.encode_chars`), so spans and tags stay aligned.
  A split without gold labels gets label IGNORE: it is predicted, never scored.
"""

import dataclasses
import json
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics
from wyjax.tasks.files import FormatError
from wyjax.tasks.tagging import IGNORE

Features = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Files:
  """A benchmark folder's format, shared by the tasks that read it (CCPM's four models read one)."""

  name: str  # the folder's name under wyjax.benchmark's --data_root, and its TFDS config
  example_type: type  # a dataclass: its fields are what the reader keeps of a record
  split_files: Callable[[pathlib.Path, str], list[pathlib.Path]]  # (folder, split) → its files; none: absent
  read_split: Callable[[pathlib.Path, str], list | None]  # (folder, split) → examples; None: absent
  train_files: str  # how the train split is named in the folder, for errors


def default_show(example, prediction, features, logits) -> dict:
  return {"prediction": prediction}


def _unchanged(task, splits: dict, config) -> tuple["Task", dict]:
  return task, splits


@dataclasses.dataclass(frozen=True, kw_only=True)
class Task:
  name: str
  files: Files
  head: str  # the head kind: a key of wyjax.models.task_heads.HEADS
  labels: tuple[str, ...]  # the head's output classes (choice: the option indices)
  max_length: int  # the benchmark's max_seq_len
  # (example, tokenizer, max_length) → (features, characters cut by truncation)
  featurize: Callable[..., tuple[Features, int]]
  # (example, features, logits of that example) → prediction; a generating head's: its text
  decode: Callable
  # (examples, their logits) → predictions decided together when a split is evaluated (ChID:
  # the blanks of a record take distinct idioms); None: decode, one example at a time
  decode_together: Callable | None = None
  # (examples, predictions) → metrics; `main_metric` among them selects checkpoints
  score: Callable[[Sequence, Sequence], dict]
  main_metric: str
  # (train examples, dev examples) → the majority-class baseline's dev predictions
  baseline: Callable[[Sequence, Sequence], list]
  # (examples, predictions) → the lines of the submission file
  submission: Callable[[Sequence, Sequence], list[str]]
  submission_format: str  # the submission's extension: "tsv", "jsonl", "json" or "txt"
  submission_name: str = ""  # the file name the benchmark asks for, when not <name>.<format>
  inserted_text: str = ""  # characters featurize adds to the text: a fresh vocabulary needs them
  # (examples of a split) → what a run's results should say about that data (records kept
  # although unusual)
  notes: Callable[[Sequence], list[str]] = lambda examples: []
  # Config keys the task reads beyond wyjax.train.finetuning.base_config's, with their defaults.
  options: dict = dataclasses.field(default_factory=dict)
  path_options: tuple[str, ...] = ()  # those of the options that name a path a run reads (never written)
  # (task, {split: examples}, config) → (task, splits) to train and score on: the options at work
  prepare: Callable = _unchanged
  # (tokenizer, features, argmax tokens) → metrics of a generating head's forced predictions
  # beside its generated text's (WYWMT: the toolkit's teacher-forced scores)
  forced_scores: Callable | None = None
  # A task that is not trained seed by seed runs itself (AC-EVAL's protocols):
  # run(config, workdir, setup) → results.json, setup(init, splits) from wyjax.train.task_model.
  run: Callable | None = None
  # (the suite's earlier [(task, results)], its output folder) → config values this task takes
  # from them (C-CLUE's triples: the predicate run); such a task runs after the others.
  from_other_runs: Callable | None = None
  config: str = ""  # its packaged config (wyjax.core.config_files), when not configs/<name>.py
  # The leaderboard: the board (a table; also a --tasks group) and its column.
  board: str = ""
  heading: str = ""  # its column's heading, when not NAME
  averaged: bool = True  # whether it counts in its board's average (WYWEB's leaves WYWMT out)
  board_note: Callable[[dict], str] | None = None  # (results.json) → what its note adds
  board_tables: Callable[[dict], str] | None = None  # (results.json) → tables of its own
  # The Hub: model-index task type, benchmark, and (name, type) of its dataset.
  hub_task_type: str = "other"
  benchmark: str = ""
  hub_dataset: tuple[str, str] = ("", "")
  # wyjax.predict (tasks/user_inputs.py): the example fields a user's input gives (none: the
  # task takes no raw input); with one field, a plain text line is that field.
  inputs: tuple[str, ...] = ()
  long_text: bool = False  # character tagging of a text of any length: cut into overlapping windows
  unmarked: Callable[[str], str] | None = None  # the text without the marks the task predicts (PUNC's)
  # (example, prediction, features, logits) → its output: a JSON-able value, or a line of text
  show: Callable = default_show

  @property
  def submission_file(self) -> str:
    return self.submission_name or f"{self.name}.{self.submission_format}"

  @property
  def column(self) -> str:
    return self.heading or self.name.upper()

  @property
  def config_name(self) -> str:
    return self.config or self.name

  def featurize_all(self, examples, tokenizer, max_length: int, path) -> tuple[list[Features], int]:
    """Features of every example of the file at `path`, and the characters truncation cut.

    An example featurize refuses is an error naming its file and line.
    """
    out, truncated = [], 0
    for example in examples:
      try:
        features, cut = self.featurize(example, tokenizer, max_length)
      except ValueError as e:
        raise FormatError(path, example.line, str(e)) from e
      out.append(features)
      truncated += cut
    return out, truncated

  def predictions(self, examples, features, logits) -> list:
    """Each example's prediction from its logits (its head's, cut to the example).

    decode_together, where the task has it, decides a split's predictions together.
    """
    if self.decode_together:
      return self.decode_together(examples, logits)
    return [self.decode(e, f, scores) for e, f, scores in zip(examples, features, logits)]

  def write_predictions(self, path, examples, predictions) -> None:
    """The submission's lines of (examples, predictions) into path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in self.submission(examples, predictions)), encoding="utf-8")


def percent(value) -> str:
  """A score in [0, 1] as the leaderboards show it: ×100, two decimals ("–": absent)."""
  return "–" if value is None else f"{100 * value:.2f}"


def per_example(line: Callable) -> Callable[[Sequence, Sequence], list[str]]:
  """A submission of one line per example: line(example, prediction)."""
  return lambda examples, predictions: [line(e, p) for e, p in zip(examples, predictions, strict=True)]


def with_specials(tokenizer: Tokenizer, ids: np.ndarray) -> np.ndarray:
  return np.concatenate([[tokenizer.cls_id], ids, [tokenizer.sep_id]]).astype(np.int32)


def single(tokenizer: Tokenizer, text: str, max_length: int) -> tuple[Features, int]:
  """[CLS] text [SEP], the text's end cut to fit."""
  ids = tokenizer.encode_chars(text)[0]
  room = max_length - 2
  return {"input_ids": with_specials(tokenizer, ids[:room])}, max(0, len(ids) - room)


def pair(tokenizer: Tokenizer, a: str, b: str, max_length: int) -> tuple[Features, int]:
  """[CLS] a [SEP] b [SEP] (token types 0 | 1), and the characters cut to fit.

  The longer text loses characters from its end, one at a time, until the pair fits (BERT's rule).
  """
  ids_a, ids_b = (tokenizer.encode_chars(t)[0] for t in (a, b))
  keep_a, keep_b = len(ids_a), len(ids_b)
  while keep_a + keep_b > max_length - 3:
    if keep_a > keep_b:
      keep_a -= 1
    else:
      keep_b -= 1
  first = with_specials(tokenizer, ids_a[:keep_a])
  input_ids = np.concatenate([first, ids_b[:keep_b], [tokenizer.sep_id]]).astype(np.int32)
  token_type_ids = (np.arange(len(input_ids)) >= len(first)).astype(np.int32)
  return {"input_ids": input_ids, "token_type_ids": token_type_ids}, len(ids_a) - keep_a + len(ids_b) - keep_b


def rows(sequences: list[np.ndarray], pad_id: int, second_segment_from: int | None = None) -> Features:
  """Sequences as one [rows, longest] block of input_ids (and token types, with second_segment_from).

  With second_segment_from, token types are 1 from that position to each row's end.
  """
  width = max(len(r) for r in sequences)
  input_ids = np.full((len(sequences), width), pad_id, np.int32)
  token_types = np.zeros((len(sequences), width), np.int32)
  for i, row in enumerate(sequences):
    input_ids[i, : len(row)] = row
    if second_segment_from is not None:
      token_types[i, second_segment_from : len(row)] = 1
  if second_segment_from is None:
    return {"input_ids": input_ids}
  return {"input_ids": input_ids, "token_type_ids": token_types}


def label_or_ignore(index: int | None) -> np.int32:
  return np.int32(IGNORE if index is None else index)


def label_in(labels: Sequence[str], value: str) -> np.int32:
  """The index of a gold label, IGNORE for none ("": an unlabelled input)."""
  return label_or_ignore(labels.index(value) if value else None)


def argmax(logits) -> int:
  return int(np.argmax(logits))


def as_json(record) -> str:
  return json.dumps(record, ensure_ascii=False)


def most_common(values):
  """The most frequent value (the first seen among equals)."""
  values = list(values)
  return max(dict.fromkeys(values), key=values.count)


def constant_baseline(label_of: Callable) -> Callable:
  """A baseline predicting the train split's most frequent label for every dev example."""
  return lambda train, dev: [most_common(label_of(e) for e in train)] * len(dev)


def classification_scores(predictions, gold, labels: Sequence) -> dict:
  """Accuracy and macro-F1 over the classes `labels` of predicted and gold values of them."""
  ids = lambda values: [labels.index(v) for v in values]
  predicted, expected = ids(predictions), ids(gold)
  return {
    "accuracy": metrics.accuracy(predicted, expected),
    "macro_f1": metrics.macro_f1(predicted, expected, len(labels)),
  }


def choice_accuracy(examples, predictions, answer: Callable = lambda e: e.label) -> dict:
  return {"accuracy": metrics.accuracy(predictions, [answer(e) for e in examples])}


OPTIONS = ("0", "1", "2", "3")  # the four-option tasks' classes


def choice_rows(
  tokenizer: Tokenizer, context: str, question: str, options: Sequence[str], max_length: int, cut: str
) -> tuple[Features, int]:
  """One row per option: [CLS] context [SEP] question [SEP] option [SEP], and the characters cut.

  Token types are 0 | 1. Truncation (WYWEB's rule): the `cut` part ("context" or "question") keeps its beginning
  and gets what the longest option, the other part and the four specials leave of max_length, the same for every
  option.
  """
  context, question = (tokenizer.encode_chars(t)[0] for t in (context, question))
  options = [tokenizer.encode_chars(o)[0] for o in options]
  longest = max(len(o) for o in options)
  kept = context if cut == "context" else question
  budget = max(0, max_length - 4 - longest - len(question if cut == "context" else context))
  truncated = max(0, len(kept) - budget)
  if cut == "context":
    context = context[:budget]
  else:
    question = question[:budget]
  first = with_specials(tokenizer, context)
  sequences = [
    np.concatenate([first, question, [tokenizer.sep_id], o, [tokenizer.sep_id]])[:max_length] for o in options
  ]
  truncated += sum(len(first) + len(question) + len(o) + 2 - len(r) for o, r in zip(options, sequences))
  return rows(sequences, tokenizer.pad_id, len(first)), truncated

"""CCPM (THUNLP-AIPoet/CCPM): pick the verse line, of four, that a modern-Chinese description translates.

JSON Lines {"translation", "choices": [4 lines], "answer": 0-3} in train.jsonl, valid.jsonl and test_public.jsonl
(no "answer"); the submission is CCPM.jsonl, that file with "answer" filled in. Scored by accuracy. Four models
(docs/finetuning.md compares them):

- `ccpm` (the report's Cls): each [CLS] translation [SEP] line [SEP] classified match or not; the most probable
  match wins;
- `ccpm_match` (the report's Match): translation and lines encoded by two encoders; the highest cosine wins;
- `ccpm_softmax`: Cls's pairs scored by one logit each, a softmax over the four;
- `ccpm_match_shared`: Match with one encoder.
"""

import dataclasses
import pathlib

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import files
from wyjax.tasks.files import FormatError
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import (
  OPTIONS,
  Files,
  Task,
  argmax,
  as_json,
  choice_accuracy,
  constant_baseline,
  label_or_ignore,
  per_example,
  rows,
  single,
  with_specials,
)

SPLIT_FILES = {
  "train": ("train.jsonl",),
  "dev": ("valid.jsonl", "dev.jsonl"),
  "test": ("test_public.jsonl", "test.jsonl"),
}


@dataclasses.dataclass(frozen=True)
class CcpmExample:
  line: int
  translation: str
  choices: tuple[str, ...]
  answer: int | None  # None where the file has no answer (the test split)


def read_ccpm(path) -> list[CcpmExample]:
  """Every record of a CCPM file; "answer" may be absent only from every record at once.

  An unlabelled record may have an empty translation (the released test file has one): it is predicted from the
  lines alone and counted in the run's notes.
  """
  out = []
  for line, record in files.json_records(path):
    translation = files.field(path, line, record, "translation", str)
    choices = files.field(path, line, record, "choices", list)
    if len(choices) != 4 or not all(isinstance(c, str) and c.strip() for c in choices):
      raise FormatError(path, line, f"'choices' should be 4 non-empty strings, found {choices!r}")
    answer = None
    if "answer" in record:
      answer = files.field(path, line, record, "answer", int)
      if not 0 <= answer < 4:
        raise FormatError(path, line, f"answer {answer} is not in 0..3")
    if out and (answer is None) != (out[0].answer is None):
      raise FormatError(path, line, "some records have an 'answer' and others do not")
    if answer is not None and not translation.strip():
      raise FormatError(path, line, "empty translation")
    out.append(CcpmExample(line, translation, tuple(choices), answer))
  return out


def split_files(data_dir, split: str) -> list[pathlib.Path]:
  path = files.first_present(data_dir, SPLIT_FILES[split])
  return [] if path is None else [path]


def read_split(data_dir, split: str) -> list[CcpmExample] | None:
  """The split's examples, or None when absent; train and dev need their answers."""
  paths = split_files(data_dir, split)
  if not paths:
    return None
  examples = read_ccpm(paths[0])
  if split != "test" and examples and examples[0].answer is None:
    raise FormatError(paths[0], examples[0].line, f"missing field 'answer' (needed in the {split} split)")
  return examples


def _cls_rows(example: CcpmExample, tokenizer: Tokenizer, max_length: int):
  """One row per line, [CLS] translation [SEP] line [SEP] (token types 0 | 1).

  The translation loses its tail when the longest line would not fit.
  """
  translation = tokenizer.encode_chars(example.translation)[0]
  full = [tokenizer.encode_chars(c)[0] for c in example.choices]
  lines = [line[: max_length - 4] for line in full]
  room = max_length - 3 - max(len(line) for line in lines)
  first = with_specials(tokenizer, translation[:room])
  sequences = [np.concatenate([first, line, [tokenizer.sep_id]]) for line in lines]
  cut = max(0, len(translation) - room) + sum(len(f) - len(line) for f, line in zip(full, lines))
  return rows(sequences, tokenizer.pad_id, len(first)), cut


def _softmax_featurize(example: CcpmExample, tokenizer: Tokenizer, max_length: int):
  features, cut = _cls_rows(example, tokenizer, max_length)
  return {**features, "label": label_or_ignore(example.answer)}, cut


def _pair_featurize(example: CcpmExample, tokenizer: Tokenizer, max_length: int):
  """Cls's rows with one label per pair: 1 for the answer's line, 0 for the others."""
  features, cut = _cls_rows(example, tokenizer, max_length)
  labels = np.full(len(example.choices), IGNORE if example.answer is None else 0, np.int32)
  if example.answer is not None:
    labels[example.answer] = 1
  return {**features, "label": labels}, cut


def _most_probable_match(example, features, logits) -> int:
  """The line whose pair has the highest match probability (softmax over match / no match)."""
  logits = np.asarray(logits, np.float64)
  return argmax(logits[:, 1] - np.logaddexp(logits[:, 0], logits[:, 1]))


def _match_featurize(example: CcpmExample, tokenizer: Tokenizer, max_length: int):
  """The translation (row 0) and each line (rows 1-4) alone."""
  sequences, cut = [], 0
  for text in (example.translation, *example.choices):
    features, lost = single(tokenizer, text, max_length)
    sequences.append(features["input_ids"])
    cut += lost
  return {**rows(sequences, tokenizer.pad_id), "label": label_or_ignore(example.answer)}, cut


def _notes(examples) -> list[str]:
  empty = [e.line for e in examples if not e.translation.strip()]
  if not empty:
    return []
  return [f"{len(empty)} record(s) with an empty translation (lines {empty}), predicted from the lines alone"]


FILES = Files(
  name="ccpm", example_type=CcpmExample, split_files=split_files, read_split=read_split, train_files="train.jsonl"
)


def _task(
  name: str, head: str, featurize, heading: str, decode=lambda e, f, logits: argmax(logits), labels=OPTIONS
) -> Task:
  return Task(
    name=name,
    files=FILES,
    head=head,
    labels=labels,
    max_length=128,
    featurize=featurize,
    decode=decode,
    score=lambda examples, predictions: choice_accuracy(examples, predictions, lambda e: e.answer),
    main_metric="accuracy",
    baseline=constant_baseline(lambda e: e.answer),
    submission_format="jsonl",
    submission=per_example(
      lambda e, p: as_json({"translation": e.translation, "choices": list(e.choices), "answer": p})
    ),
    submission_name="CCPM.jsonl",
    notes=_notes,
    board="classical",
    heading=heading,
    benchmark="CCPM",
    hub_task_type="multiple-choice",
    hub_dataset=("CCPM", "ccpm"),
    config=name.replace("ccpm_", "ccpm:"),
    inputs=("translation", "choices"),
    show=lambda e, p, f, logits: {"answer": p, "line": e.choices[p]},
  )


CLS = _task("ccpm", "binary_choice", _pair_featurize, "CCPM (Cls)", _most_probable_match, labels=("no match", "match"))
MATCH = _task("ccpm_match", "match", _match_featurize, "CCPM (Match)")
SOFTMAX = _task("ccpm_softmax", "choice", _softmax_featurize, "CCPM (softmax)")
MATCH_SHARED = _task("ccpm_match_shared", "match_shared", _match_featurize, "CCPM (Match, one encoder)")
TASKS = (CLS, MATCH, SOFTMAX, MATCH_SHARED)

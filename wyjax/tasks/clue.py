"""CLUE's classification tasks (accuracy), and the helpers its reading-comprehension tasks share.

Each task's JSON Lines (`FORMATS`): TNEWS, IFLYTEK, AFQMC, CMNLI, OCNLI, CSL, CLUEWSC2020. Labels and ids may be
integers or strings; a record without "id" gets its 0-based position in the file. A test file has no labels: its
predictions are the submission, `{"id": …, "label": …}` per line, named as CLUE 1.1 asks (tnews11_predict.json, …).
The reading-comprehension tasks are in clue_reading.py.
"""

import dataclasses
import functools
import pathlib

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import files
from wyjax.tasks.files import FormatError
from wyjax.tasks.task import (
  Files,
  Task,
  argmax,
  as_json,
  classification_scores,
  label_or_ignore,
  most_common,
  pair,
  per_example,
  single,
)

SPLIT_FILES = {split: (f"{split}.json",) for split in ("train", "dev", "test")}
# OCNLI releases its training set in four sizes (train.50k/30k/10k/3k.json); CLUE's board
# (ocnli_50k_predict.json) trains on the 50k one, also read as train.json.
OCNLI_TRAIN = "train.50k.json"
TNEWS_LABELS = tuple(str(code) for code in range(100, 117) if code not in (105, 111))
IFLYTEK_LABELS = tuple(str(i) for i in range(119))
NLI_LABELS = ("contradiction", "entailment", "neutral")
NO_MAJORITY = "-"  # an NLI record whose annotators did not agree
WSC_MARKS = "_[]"  # inserted around the noun phrase (_…_) and the pronoun ([…])


@dataclasses.dataclass(frozen=True)
class ClueExample:
  line: int
  id: int
  text_a: str
  text_b: str  # "" for the single-sentence tasks
  label: int | None  # index into the task's labels; None: unlabelled (a test file, NLI's "-")


def _text(path, line, record, key) -> str:
  value = files.field(path, line, record, key, str)
  if not value.strip():
    raise FormatError(path, line, f"empty {key!r}")
  return value


def _label(path, line, record, labels: tuple[str, ...], *, unlabelled=()) -> int | None:
  """The record's label as an index into labels; None when it has none (or one of unlabelled)."""
  if "label" not in record:
    return None
  value = files.field(path, line, record, "label", (str, int))
  value = str(value) if not isinstance(value, bool) else str(value).lower()
  if value in unlabelled:
    return None
  if value not in labels:
    shown = labels if len(labels) <= 15 else f"{labels[0]}..{labels[-1]}"
    raise FormatError(path, line, f"label {value!r} is not one of {shown}")
  return labels.index(value)


def record_id(path, line, record, position: int, key: str = "id") -> int:
  """The record's id (an integer, or a string of digits), or its position when it has none."""
  if key not in record:
    return position
  value = files.field(path, line, record, key, (int, str))
  if isinstance(value, str) and not (value.isascii() and value.isdigit()):  # "²" and "３" are digits to isdigit
    raise FormatError(path, line, f"{key} {value!r} is not a number (digits 0-9)")
  return int(value)


def check_unique_ids(path, examples) -> list:
  """examples, when no two share an id: ids name the submission's lines or keys.

  Raises:
    FormatError: at the second example of a repeated id.
  """
  first = {}
  for example in examples:
    if example.id in first:
      raise FormatError(
        path,
        example.line,
        f"id {example.id!r} repeats the one at line {first[example.id]} (each id names one prediction)",
      )
    first[example.id] = example.line
  return examples


def _sentence(labels):
  def read(path, line, record, position):
    return ClueExample(
      line,
      record_id(path, line, record, position),
      _text(path, line, record, "sentence"),
      "",
      _label(path, line, record, labels),
    )

  return read


def _pair(labels, unlabelled=()):
  def read(path, line, record, position):
    sentences = (_text(path, line, record, "sentence1"), _text(path, line, record, "sentence2"))
    return ClueExample(
      line,
      record_id(path, line, record, position),
      *sentences,
      _label(path, line, record, labels, unlabelled=unlabelled),
    )

  return read


def _csl(path, line, record, position) -> ClueExample:
  keywords = files.field(path, line, record, "keyword", list)
  if not keywords or not all(isinstance(k, str) and k.strip() for k in keywords):
    raise FormatError(path, line, f"'keyword' should be a list of non-empty strings, found {keywords!r}")
  # The keywords first, joined by a space, then the abstract: CLUE's CslProcessor.
  return ClueExample(
    line,
    record_id(path, line, record, position),
    " ".join(keywords),
    _text(path, line, record, "abst"),
    _label(path, line, record, ("0", "1")),
  )


def mark_wsc_spans(text: str, span1: tuple[int, str], span2: tuple[int, str]) -> str:
  """The text with the noun phrase marked _…_ and the pronoun […] (CLUE's WSC baseline)."""
  marks = sorted([(span1[0], span1[0] + len(span1[1]), "_", "_"), (span2[0], span2[0] + len(span2[1]), "[", "]")])
  (s1, e1, open1, close1), (s2, e2, open2, close2) = marks
  if e1 > s2:
    raise ValueError(f"the spans {span1} and {span2} overlap")
  return text[:s1] + open1 + text[s1:e1] + close1 + text[e1:s2] + open2 + text[s2:e2] + close2 + text[e2:]


def _wsc(path, line, record, position) -> ClueExample:
  text = _text(path, line, record, "text")
  target = files.field(path, line, record, "target", dict)
  spans = []
  for k in (1, 2):
    span = files.field(path, line, target, f"span{k}_text", str)
    start = files.field(path, line, target, f"span{k}_index", int)
    if not 0 <= start < len(text):
      raise FormatError(path, line, f"span{k}_index {start} is not a position in the text (0 to {len(text) - 1})")
    if not span or text[start : start + len(span)] != span:
      raise FormatError(
        path,
        line,
        f"span{k}_text {span!r} is not at span{k}_index {start} of the text "
        f"(found {text[start : start + len(span)]!r})",
      )
    spans.append((start, span))
  try:
    marked = mark_wsc_spans(text, *spans)
  except ValueError as e:
    raise FormatError(path, line, str(e)) from e
  return ClueExample(
    line, record_id(path, line, record, position, "idx"), marked, "", _label(path, line, record, ("false", "true"))
  )


@dataclasses.dataclass(frozen=True)
class _Format:
  labels: tuple[str, ...]
  read_record: object  # (path, line, record, position in the file) → ClueExample
  inputs: tuple[str, ...] = ("text_a", "text_b")  # what wyjax.predict's input gives


# The tasks' records:
# - TNEWS: news title → one of 15 category codes (100–116); {"sentence", "label", "label_desc", "keywords", "id"}.
# - IFLYTEK: app description → one of 119 categories (0–118); {"sentence", "label", "label_des", "id"}.
# - AFQMC: are two questions the same? {"sentence1", "sentence2", "label": "0"|"1"}.
# - CMNLI, OCNLI: inference, {"sentence1", "sentence2", "label"}; "-" (no majority) is kept unlabelled.
# - CSL: do the keywords belong to the abstract? {"abst", "keyword": [...], "label": "0"|"1"}.
# - CLUEWSC2020: does the pronoun refer to the noun phrase? {"text", "target": {"span1_text", "span1_index",
#   "span2_text", "span2_index"}, "label": "true"|"false", "idx"}.
FORMATS = {
  "tnews": _Format(TNEWS_LABELS, _sentence(TNEWS_LABELS), ("text_a",)),
  "iflytek": _Format(IFLYTEK_LABELS, _sentence(IFLYTEK_LABELS), ("text_a",)),
  "afqmc": _Format(("0", "1"), _pair(("0", "1"))),
  "cmnli": _Format(NLI_LABELS, _pair(NLI_LABELS, unlabelled=(NO_MAJORITY,))),
  "ocnli": _Format(NLI_LABELS, _pair(NLI_LABELS, unlabelled=(NO_MAJORITY,))),
  "csl": _Format(("0", "1"), _csl),
  "cluewsc2020": _Format(("false", "true"), _wsc, ("text_a",)),  # the text with its two spans marked
}


def read_clue(task: str, path) -> list[ClueExample]:
  """Every record of one of the task's files, each id once.

  A file is labelled throughout or not at all (but for NLI's "-" records).
  """
  out, labelled = [], None
  for position, (line, record) in enumerate(files.json_records(path)):
    example = FORMATS[task].read_record(path, line, record, position)
    has_label = "label" in record
    if labelled is not None and has_label != labelled:
      raise FormatError(path, line, "some records have a 'label' and others do not")
    labelled = has_label
    out.append(example)
  return check_unique_ids(path, out)


def _featurize(example: ClueExample, tokenizer: Tokenizer, max_length: int):
  if example.text_b:
    features, cut = pair(tokenizer, example.text_a, example.text_b, max_length)
  else:
    features, cut = single(tokenizer, example.text_a, max_length)
  return {**features, "label": label_or_ignore(example.label)}, cut


def _score(labels):
  def score(examples, predictions) -> dict:
    scored = [(p, labels[e.label]) for e, p in zip(examples, predictions, strict=True) if e.label is not None]
    return classification_scores([p for p, _ in scored], [g for _, g in scored], labels)

  return score


def _baseline(labels):
  def baseline(train, dev) -> list[str]:
    return [labels[most_common(e.label for e in train if e.label is not None)]] * len(dev)

  return baseline


def _notes(examples) -> list[str]:
  unlabelled = sum(e.label is None for e in examples)
  if not unlabelled or unlabelled == len(examples):  # a test file has no labels at all
    return []
  return [f"{unlabelled} record(s) labelled {NO_MAJORITY!r} (no majority label): not trained on, not scored"]


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  """The split's one file (none: the split is absent)."""
  names = (OCNLI_TRAIN, *SPLIT_FILES[split]) if (task, split) == ("ocnli", "train") else SPLIT_FILES[split]
  path = files.first_present(data_dir, names)
  return [] if path is None else [path]


def read_split(task: str, data_dir, split: str) -> list | None:
  """The split's examples, or None when absent; train and dev need their labels."""
  paths = split_files(task, data_dir, split)
  if not paths:
    return None
  examples = read_clue(task, paths[0])
  if split != "test" and examples and all(e.label is None for e in examples):
    raise FormatError(paths[0], examples[0].line, f"no labels (needed in the {split} split)")
  return examples


def clue_task(
  name: str, example_type, train_files: str, hub_task_type: str, *, split_files, read_split, **fields
) -> Task:
  """A CLUE task: its folder's format, and its place on the CLUE board and on the Hub.

  split_files and read_split take the task's name first; on the Hub, each task is a config of the `clue` dataset.
  """
  files = Files(
    name=name,
    example_type=example_type,
    split_files=functools.partial(split_files, name),
    read_split=functools.partial(read_split, name),
    train_files=train_files,
  )
  return Task(
    name=name,
    files=files,
    board="clue",
    benchmark="CLUE",
    hub_task_type=hub_task_type,
    hub_dataset=(f"CLUE {name.upper()}", "clue"),
    config=f"clue/{name}",
    **fields,
  )


def _task(name: str, max_length: int, submission_name: str, heading: str = "") -> Task:
  labels = FORMATS[name].labels
  return clue_task(
    name,
    ClueExample,
    f"{OCNLI_TRAIN} or train.json" if name == "ocnli" else "train.json",
    "text-classification",
    split_files=split_files,
    read_split=read_split,
    heading=heading,
    head="sequence",
    labels=labels,
    max_length=max_length,
    featurize=_featurize,
    decode=lambda e, f, logits: labels[argmax(logits)],
    score=_score(labels),
    main_metric="accuracy",
    baseline=_baseline(labels),
    submission_format="json",
    submission_name=submission_name,
    submission=per_example(lambda e, p: as_json({"id": e.id, "label": p})),
    inserted_text=WSC_MARKS if name == "cluewsc2020" else "",
    notes=_notes,
    inputs=FORMATS[name].inputs,
  )


# The CLUE paper's max_seq_length per task; CLUE 1.1's submission file names.
CLASSIFICATION = (
  _task("afqmc", 128, "afqmc_predict.json"),
  _task("tnews", 128, "tnews11_predict.json"),
  _task("iflytek", 128, "iflytek_predict.json"),
  _task("cmnli", 128, "cmnli_predict.json"),
  _task("ocnli", 128, "ocnli_50k_predict.json"),
  _task("cluewsc2020", 128, "cluewsc11_predict.json", heading="WSC"),
  _task("csl", 256, "csl_predict.json"),
)


TASKS = CLASSIFICATION

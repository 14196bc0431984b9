"""C-CLUE's file formats (jizijing/C-CLUE: entities and relations in the dynastic histories), read and checked.

- NER: a text file of sentences, one a line, characters separated by single spaces (an empty token between two
  separators is a whitespace character), and a label file of one BIO tag per character, kept as written (an I-X
  after O or another type begins an entity, as seqeval reads it). Token and tag counts that differ are an error
  listing every such line: tags are never realigned. The test split may come without labels.
- Relations: JSON Lines {"text", "spo_list": {"predicate", "subject", "subject_type", "object", "object_type"}},
  one triple per record in every split (C-CLUE's scripts read one and write one line per record).

The tasks are in cclue.py.
"""

import dataclasses
import pathlib

from wyjax.tasks import files, metrics
from wyjax.tasks.files import FormatError

NER_TYPES = ("PER", "LOC", "ORG", "JOB", "BOO", "WAR")
NER_LABELS = ("O",) + tuple(f"{p}-{t}" for t in NER_TYPES for p in ("B", "I"))
# (text file, label files in order of preference) per split: C-CLUE's data_ner/ names first. One naming per
# split: files of both, or a label file without its text, are an error.
NER_FILES = {
  "train": (("source.txt", ("target.txt",)), ("train.txt", ("train-label.txt",))),
  "dev": (("dev.txt", ("dev-lable.txt", "dev-label.txt")),),
  "test": (("test1.txt", ("test_tgt.txt",)), ("test.txt", ("test-label.txt",))),
}
# run_NER.py's labels scored by its macro P/R/F1 (ids 1-6 of its label list).
SCORED_NER_LABELS = ("B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER")
RELATION_FILES = {"train": "train_data.json", "dev": "dev_data.json", "test": "test_data.json"}
# run_predicate_classification.py's predicates, in its order.
PREDICATES = (
  "任职",
  "隶属于",
  "子",
  "同名于",
  "号",
  "作战",
  "位于",
  "依附",
  "名",
  "讨伐",
  "去往",
  "升迁",
  "杀",
  "管理",
  "弟",
  "出生地",
  "葬于",
  "属于",
  "父",
  "归属",
  "朋友",
  "兄",
  "作",
  "姓",
  "字",
)


@dataclasses.dataclass(frozen=True)
class NerExample:
  line: int
  text: str
  # the label file's tags, one per character, as written: run_NER.py's gold; () for a
  # sentence without a label file (the test split)
  tags: tuple[str, ...]

  @property
  def tagged(self) -> bool:
    return bool(self.tags)

  @property
  def spans(self) -> tuple[tuple[int, int, str], ...]:
    """(start, end exclusive, type) of each entity by seqeval's rules.

    An I-X after O or after another type begins one.
    """
    return tuple(sorted((start, end + 1, kind) for kind, start, end in metrics.chunks(self.tags)))


@dataclasses.dataclass(frozen=True)
class RelationExample:
  line: int
  text: str
  subject: str
  subject_type: str
  object: str
  object_type: str
  predicate: str  # "" where the file gives none (the test split)
  # cclue_spo: the predicate a cclue_re run predicted for this record, the labeller's input
  # ("": the gold one); never read from a file
  given_predicate: str = ""


def _lines(path) -> list[str]:
  lines = files.task_text(path).split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [line.removesuffix("\r") for line in lines]


def _characters(path, line: int, sentence: str) -> str:
  if not sentence.strip():
    raise FormatError(path, line, "empty sentence")
  tokens = sentence.split(" ")
  long = next((t for t in tokens if len(t) > 1), None)
  if long is not None:
    raise FormatError(path, line, f"token {long!r} is not one character (characters are separated by single spaces)")
  return "".join(t or " " for t in tokens)


def read_ner(text_path, label_path=None) -> list[NerExample]:
  sentences = _lines(text_path)
  texts = [_characters(text_path, i, s) for i, s in enumerate(sentences, 1)]
  if label_path is None:
    return [NerExample(i, text, ()) for i, text in enumerate(texts, 1)]
  tag_lines = [line.split() for line in _lines(label_path)]
  if len(tag_lines) != len(texts):
    counts = f"{len(tag_lines)} tag lines for the {len(texts)} sentences"
    if len(tag_lines) > len(texts):
      raise FormatError(label_path, len(texts) + 1, f"{counts} of {text_path}")
    raise FormatError(text_path, len(tag_lines) + 1, f"{counts} of this file in {label_path}: this one has none")
  differ = [
    (i, len(text), len(tags)) for i, (text, tags) in enumerate(zip(texts, tag_lines), 1) if len(text) != len(tags)
  ]
  if differ:
    listed = ", ".join(f"line {i} ({n} characters, {m} tags)" for i, n, m in differ[:20])
    more = f" and {len(differ) - 20} more" if len(differ) > 20 else ""
    raise FormatError(
      label_path,
      differ[0][0],
      f"{len(differ)} lines have token and tag counts that differ from {text_path}: {listed}{more}",
    )
  out = []
  for i, (text, tags) in enumerate(zip(texts, tag_lines), 1):
    for position, tag in enumerate(tags, 1):
      prefix, _, kind = tag.partition("-")
      if tag != "O" and (prefix not in ("B", "I") or kind not in NER_TYPES):
        raise FormatError(label_path, i, f"tag {position} {tag!r} is not O or B-/I- of {NER_TYPES}")
    out.append(NerExample(i, text, tuple(tags)))
  return out


def read_relations(path) -> list[RelationExample]:
  """One example per record, of its one triple.

  A list holding one triple is read as that triple; an empty list, or several triples, is an error: dropped or
  split, the record would lose its line in predicate_predict.txt.
  """
  out = []
  for line, record in files.json_records(path):
    text = files.field(path, line, record, "text", str)
    triples = files.field(path, line, record, "spo_list", (dict, list))
    if isinstance(triples, list) and len(triples) != 1:
      raise FormatError(
        path,
        line,
        f"spo_list holds {len(triples)} triples, expected one per record (C-CLUE's "
        "scripts read one, and predicate_predict.txt has one line per record)",
      )
    triple = triples if isinstance(triples, dict) else triples[0]
    if not isinstance(triple, dict):
      raise FormatError(path, line, f"spo_list entry {triple!r} is not an object")
    values = {
      key: files.field(path, line, triple, key, str) for key in ("subject", "subject_type", "object", "object_type")
    }
    for role in ("subject", "object"):
      if not values[role] or values[role] not in text:
        raise FormatError(path, line, f"{role} {values[role]!r} does not occur in the text")
    predicate = triple.get("predicate", "")
    if not isinstance(predicate, str):
      raise FormatError(path, line, f"predicate should be str, found {type(predicate).__name__}")
    out.append(RelationExample(line, text, predicate=predicate, **values))
  if any(e.predicate for e in out) and not all(e.predicate for e in out):
    raise FormatError(path, next(e.line for e in out if not e.predicate), "empty or missing predicate")
  return out


def _ner_files(data_dir, split: str) -> list[pathlib.Path]:
  """[text file] or [text file, label file] of the split's naming present; none when absent.

  Files of two namings, or a label file without its text file, are an error, not a choice.
  """
  folder = pathlib.Path(data_dir)
  found = [
    (folder / text, files.present(folder / text), files.first_present(folder, labels))
    for text, labels in NER_FILES[split]
  ]
  found = [(text, labels) for text, has_text, labels in found if has_text or labels]
  if len(found) > 1:
    names = [" + ".join(p.name for p in (text, labels) if p and p.exists()) for text, labels in found]
    raise ValueError(f"{folder}: {names[0]} and {names[1]} hold the {split} split under two namings; keep one")
  if not found:
    return []
  ((text, labels),) = found
  if not text.exists():
    raise FileNotFoundError(f"{labels}: no {text.name} beside it")
  return [text] if labels is None else [text, labels]


def split_files(dataset: str, data_dir, split: str) -> list[pathlib.Path]:
  if dataset == "cclue_re":
    path = pathlib.Path(data_dir) / RELATION_FILES[split]
    return [path] if files.present(path) else []
  return _ner_files(data_dir, split)


def read_split(dataset: str, data_dir, split: str):
  paths = split_files(dataset, data_dir, split)
  if not paths:
    return None
  if dataset == "cclue_re":
    examples = read_relations(paths[0])
    if split != "test" and examples and not examples[0].predicate:
      raise FormatError(paths[0], examples[0].line, f"missing predicate (needed in the {split} split)")
    return examples
  if split != "test" and len(paths) == 1:
    names = " or ".join(name for text, labels in NER_FILES[split] if text == paths[0].name for name in labels)
    raise FileNotFoundError(f"{paths[0]}: no {names} beside it")
  return read_ner(*paths)

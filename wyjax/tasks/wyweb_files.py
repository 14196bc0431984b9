"""WYWEB's file formats, as the WYWEB toolkit reads them (wyweb_toolkit_spec.md), and their label sets.

Every example keeps the line it came from. Nothing is dropped: a malformed record is a FormatError naming the
file and line. The tasks are in wyweb.py.
"""

import dataclasses
import pathlib

from wyjax.tasks import files
from wyjax.tasks.files import FormatError

TLC_PERIODS = ("远古", "中古", "近古")
TLC_DYNASTIES = ("先秦", "两汉", "魏晋南北朝", "唐", "宋", "元明", "清")
TLC_PERIOD_OF = {
  "先秦": "远古",
  "两汉": "远古",
  "魏晋南北朝": "中古",
  "唐": "中古",
  "宋": "中古",
  "元明": "近古",
  "清": "近古",
}
GJC_COLLECTIONS = ("儒藏", "诗藏", "佛藏", "易藏", "医藏", "艺藏", "子藏", "集藏", "道藏", "史藏")
PUNC_MARKS = ("。", "？", "！", "，", "、", "；", "：", "|")
PUNC_LABELS = ("O",) + tuple(f"S-{m}" for m in PUNC_MARKS)
GLNER_TYPES = ("noun_other", "noun_bookname")
GLNER_LABELS = ("O",) + tuple(f"{p}-{t}" for t in GLNER_TYPES for p in ("B", "I"))
FSPC_SENTIMENTS = ("negative", "implicit negative", "neutral", "implicit positive", "positive")

# Accepted file names per task, in order of preference.
EXTENSIONS = {
  "tlc": ("tsv", "txt"),
  "gjc": ("tsv", "txt"),
  "punc": ("tsv", "txt"),
  "glner": ("jsonl", "json"),
  "fspc": ("json", "jsonl"),
  "xuci": ("tsv", "txt"),
  "irc": ("json", "jsonl"),
  "wywrc": ("json", "jsonl"),
  "wywmt": ("tsv", "txt"),
}


@dataclasses.dataclass(frozen=True)
class TlcExample:
  line: int
  text: str
  period: str
  dynasty: str


@dataclasses.dataclass(frozen=True)
class GjcExample:
  line: int
  text: str
  collection: str


@dataclasses.dataclass(frozen=True)
class PuncExample:
  line: int
  text: str
  # One label per character of text: "O" or "S-<mark that follows the character>".
  labels: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class GlnerExample:
  line: int
  text: str
  # (start, end exclusive, type), character offsets into text.
  spans: tuple[tuple[int, int, str], ...]


@dataclasses.dataclass(frozen=True)
class FspcExample:
  line: int
  lines: tuple[str, ...]  # the four verse lines
  holistic: str
  line_sentiments: tuple[str, ...]
  title: str
  poet: str
  dynasty: str


@dataclasses.dataclass(frozen=True)
class XuciExample:
  line: int
  text_a: str
  text_b: str
  span_a: tuple[int, int]  # inclusive character indices
  span_b: tuple[int, int]
  same_usage: bool


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
  """IRC (context = idiom, question = origin) and WYWRC (context = article)."""

  line: int
  context: str
  question: str
  options: tuple[str, ...]
  label: int
  kind: int | None = None  # WYWRC question type, 0..9 (None: the record gives none)


@dataclasses.dataclass(frozen=True)
class MtExample:
  line: int
  source: str
  target: str


def _check(condition: bool, path, line: int, message: str):
  if not condition:
    raise FormatError(path, line, message)


def _nonempty(path, line, value: str, what: str) -> str:
  _check(bool(value.strip()), path, line, f"empty {what}")
  return value


def read_tlc(path) -> list[TlcExample]:
  out = []
  for line, (period, dynasty, text) in files.tsv_rows(path, 3):
    _check(dynasty in TLC_PERIOD_OF, path, line, f"unknown dynasty {dynasty!r}; expected one of {TLC_DYNASTIES}")
    _check(
      TLC_PERIOD_OF[dynasty] == period,
      path,
      line,
      f"period {period!r} does not contain dynasty {dynasty!r} (expected {TLC_PERIOD_OF[dynasty]!r})",
    )
    out.append(TlcExample(line, _nonempty(path, line, text, "text"), period, dynasty))
  return out


def read_gjc(path) -> list[GjcExample]:
  out = []
  for line, (collection, text) in files.tsv_rows(path, 2):
    _check(
      collection in GJC_COLLECTIONS, path, line, f"unknown collection {collection!r}; expected one of {GJC_COLLECTIONS}"
    )
    out.append(GjcExample(line, _nonempty(path, line, text, "text"), collection))
  return out


def read_punc(path) -> list[PuncExample]:
  out = []
  for line, (text, tags) in files.tsv_rows(path, 2):
    _check(len(text) == len(tags), path, line, f"text has {len(text)} characters but the tag string {len(tags)}")
    bad = sorted({t for t in tags if t != "O" and t not in PUNC_MARKS})
    _check(not bad, path, line, f"unknown tags {bad}; expected O or one of {PUNC_MARKS}")
    out.append(
      PuncExample(line, _nonempty(path, line, text, "text"), tuple("O" if t == "O" else f"S-{t}" for t in tags))
    )
  return out


def read_glner(path) -> list[GlnerExample]:
  out = []
  for line, record in files.json_records(path):
    text = files.field(path, line, record, "text", str)
    spans = []
    previous_end = 0
    for item in files.field(path, line, record, "label", list):
      _check(isinstance(item, list) and len(item) == 3, path, line, f"label entry {item!r} is not [start, end, type]")
      start, end, kind = item
      _check(
        all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)),
        path,
        line,
        f"span offsets {start!r}, {end!r} are not integers",
      )
      _check(
        0 <= start < end <= len(text),
        path,
        line,
        f"span [{start}, {end}) is outside the text of {len(text)} characters or empty",
      )
      _check(kind in GLNER_TYPES, path, line, f"unknown entity type {kind!r}; expected one of {GLNER_TYPES}")
      _check(start >= previous_end, path, line, f"span [{start}, {end}) overlaps or precedes the previous one")
      previous_end = end
      spans.append((start, end, kind))
    out.append(GlnerExample(line, text, tuple(spans)))
  return out


def read_fspc(path) -> list[FspcExample]:
  out = []
  for line, record in files.json_records(path):
    poem = files.field(path, line, record, "poem", str)
    verses = tuple(poem.split("|"))
    _check(
      len(verses) == 4 and all(v.strip() for v in verses),
      path,
      line,
      f"poem should be four '|'-separated lines, found {len(verses)}",
    )
    sentiments = files.field(path, line, record, "sentiments", dict)
    keys = ("holistic", "line1", "line2", "line3", "line4")
    values = []
    for key in keys:
      value = files.field(path, line, sentiments, key, str)
      _check(value in FSPC_SENTIMENTS, path, line, f"sentiment {key}={value!r}; expected one of {FSPC_SENTIMENTS}")
      values.append(value)
    title, poet, dynasty = (
      files.field(path, line, record, key, str) if key in record else "" for key in ("title", "poet", "dynasty")
    )  # copied to the submission
    out.append(FspcExample(line, verses, values[0], tuple(values[1:]), title, poet, dynasty))
  return out


def _span(path, line, value: str, text: str, which: str) -> tuple[int, int]:
  try:
    start, end = (int(x) for x in value.split(","))
  except ValueError:
    raise FormatError(path, line, f"position {which} {value!r} is not 'start, end'") from None
  _check(
    0 <= start <= end < len(text),
    path,
    line,
    f"position {which} {value!r} is outside sentence {which} of {len(text)} characters",
  )
  return start, end


def read_xuci(path) -> list[XuciExample]:
  out = []
  for line, (a, b, pos_a, pos_b, label) in files.tsv_rows(path, 5):
    _check(label in ("t", "f"), path, line, f"label {label!r}; expected 't' or 'f'")
    out.append(
      XuciExample(line, a, b, _span(path, line, pos_a, a, "A"), _span(path, line, pos_b, b, "B"), label == "t")
    )
  return out


def _options(path, line, options) -> tuple[str, ...]:
  _check(
    isinstance(options, list) and len(options) == 4 and all(isinstance(o, str) for o in options),
    path,
    line,
    "expected 4 option strings",
  )
  return tuple(options)


def read_irc(path) -> list[ChoiceExample]:
  out = []
  for line, record in files.json_records(path):
    options = _options(path, line, files.field(path, line, record, "options", list))
    label = files.field(path, line, record, "label", int)
    _check(0 <= label < 4, path, line, f"label {label} is not in 0..3")
    out.append(
      ChoiceExample(
        line,
        files.field(path, line, record, "idiom", str),
        files.field(path, line, record, "origin", str),
        options,
        label,
      )
    )
  return out


def read_wywrc(path) -> list[ChoiceExample]:
  out = []
  for line, record in files.json_records(path):
    options = _options(path, line, [record.get(f"option{i}") for i in range(4)])
    answer = files.field(path, line, record, "answer", str)
    _check(answer in ("0", "1", "2", "3"), path, line, f"answer {answer!r} is not '0'..'3'")
    kind = files.field(path, line, record, "type", int) if "type" in record else None
    _check(kind is None or 0 <= kind <= 9, path, line, f"type {kind} is not a question type, 0..9")
    out.append(
      ChoiceExample(
        line,
        files.field(path, line, record, "article", str),
        files.field(path, line, record, "question", str),
        options,
        int(answer),
        kind,
      )
    )
  return out


def read_wywmt(path) -> list[MtExample]:
  out = []
  for line, (source, target) in files.tsv_rows(path, 2):
    out.append(MtExample(line, _nonempty(path, line, source, "source"), _nonempty(path, line, target, "target")))
  return out


READERS = {
  "tlc": read_tlc,
  "gjc": read_gjc,
  "punc": read_punc,
  "glner": read_glner,
  "fspc": read_fspc,
  "xuci": read_xuci,
  "irc": read_irc,
  "wywrc": read_wywrc,
  "wywmt": read_wywmt,
}


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  path = files.find_split(data_dir, split, EXTENSIONS[task])
  return [] if path is None else [path]


def read_split(task: str, data_dir, split: str):
  """Examples of data_dir/<split>.<ext> in the task's original format, or None when absent.

  A missing test file is normal: then there are no test predictions.
  """
  path = files.find_split(data_dir, split, EXTENSIONS[task])
  return None if path is None else READERS[task](pathlib.Path(path))

"""CCPM (Chinese Classical Poetry Matching, THUNLP-AIPoet/CCPM): pick the verse line, of four,
that a modern-Chinese description translates.

JSON Lines, one object per line: {"translation": str, "choices": [4 str], "answer": 0-3}; the
released splits are train.jsonl, valid.jsonl and test_public.jsonl, whose records have no
"answer" (the submission is that file with "answer" filled in).
"""
import dataclasses
import pathlib

from wyjax.tasks import files
from wyjax.tasks.files import FormatError

SPLIT_FILES = {"train": ("train.jsonl",), "dev": ("valid.jsonl", "dev.jsonl"),
               "test": ("test_public.jsonl", "test.jsonl")}


@dataclasses.dataclass(frozen=True)
class CcpmExample:
  line: int
  translation: str
  choices: tuple[str, ...]
  answer: int | None  # None where the file has no answer (the test split)


def read_ccpm(path) -> list[CcpmExample]:
  """Every record of a CCPM file; "answer" may be absent only from every record at once."""
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
    if not translation.strip():
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

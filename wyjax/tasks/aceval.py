"""AC-EVAL (yuting-wei/AC-EVAL): four-option questions on ancient Chinese in 13 subjects.

A data folder holds dev/<subject>.csv (5 questions per subject, header
`,Question,A,B,C,D,Answer,Explanation`) and test/<subject>.csv (`,Question,A,B,C,D`), the
first column being the row id the submission is keyed by. Fields may be quoted (commas,
quotes and line breaks inside); the released questions write line breaks as a literal
backslash-n, read here as a line break. The dev questions are the few-shot training set, so
the `train` and `dev` splits are both the dev folder (wyjax/train/aceval.py keeps them apart by
cross-validation).
"""
import csv
import dataclasses
import io
import pathlib

from wyjax.data.corpus import read_text
from wyjax.tasks.files import FormatError

CATEGORIES = {
    "General Historical Knowledge": ("historical_facts", "geography", "social_customs",
                                     "art_and_cultural_heritage", "philosophy_and_religion"),
    "Short Text Understanding": ("lexical_pragmatics_analysis", "allusions_and_idioms", "word_sense_disambiguation",
                                 "translation", "event_extraction"),
    "Long Text Understanding": ("sentence_pauses", "summarization_and_analysis", "poetry_appreciation"),
}
SUBJECTS = tuple(s for subjects in CATEGORIES.values() for s in subjects)
CATEGORY_OF = {s: category for category, subjects in CATEGORIES.items() for s in subjects}
LETTERS = ("A", "B", "C", "D")
_QUESTION_HEADER = ["", "Question", *LETTERS]
_FOLDERS = {"train": "dev", "dev": "dev", "test": "test"}


@dataclasses.dataclass(frozen=True)
class Question:
  line: int  # where the row starts in its subject's file
  subject: str
  row_id: str
  question: str
  options: tuple[str, ...]
  answer: str  # "A".."D"; "" in a file without answers (the test split)
  explanation: str


def read_subject(path, subject: str) -> list[Question]:
  """Every row of one subject's file; the header says whether it has answers. A field may be
  as long as the file (csv's default limit, 128 KiB, is lifted); what csv itself rejects is
  reported with the line it reached."""
  csv.field_size_limit(2**31 - 1)
  reader = csv.reader(io.StringIO(read_text(path), newline=""), strict=True)
  try:
    return _questions(path, subject, reader)
  except csv.Error as e:
    raise FormatError(path, reader.line_num, f"malformed CSV ({e})") from e


def _questions(path, subject: str, reader) -> list[Question]:
  header = next(reader, None)
  if header not in (_QUESTION_HEADER, _QUESTION_HEADER + ["Answer", "Explanation"]):
    raise FormatError(path, 1, f"header {header!r} is not ',Question,A,B,C,D[,Answer,Explanation]'")
  out, ids, start = [], set(), reader.line_num + 1
  for row in reader:
    if len(row) != len(header):
      raise FormatError(path, start, f"expected {len(header)} comma-separated fields, found {len(row)}")
    row_id, question, *options = (field.replace("\\n", "\n") for field in row[:6])
    answer, explanation = row[6:] if len(header) == 8 else ("", "")
    if not row_id.strip() or row_id in ids:
      raise FormatError(path, start, f"row id {row_id!r} is empty or repeated")
    if not question.strip() or not all(o.strip() for o in options):
      raise FormatError(path, start, "empty question or option")
    if len(header) == 8 and answer not in LETTERS:
      raise FormatError(path, start, f"answer {answer!r} is not one of {LETTERS}")
    ids.add(row_id)
    out.append(Question(start, subject, row_id, question, tuple(options), answer, explanation))
    start = reader.line_num + 1
  return out


def split_files(data_dir, split: str) -> list[pathlib.Path]:
  """The split's subject files, in the order of SUBJECTS; another .csv there is an error."""
  folder = pathlib.Path(data_dir) / _FOLDERS[split]
  present = sorted(folder.glob("*.csv")) if folder.is_dir() else []
  unknown = [p.name for p in present if p.stem not in SUBJECTS]
  if unknown:
    raise FileNotFoundError(f"{folder}: {unknown} are not AC-EVAL subjects ({', '.join(SUBJECTS)})")
  return [folder / f"{s}.csv" for s in SUBJECTS if (folder / f"{s}.csv").exists()]


def read_split(data_dir, split: str) -> list[Question] | None:
  paths = split_files(data_dir, split)
  if not paths:
    return None
  questions = [q for path in paths for q in read_subject(path, path.stem)]
  if split != "test" and any(not q.answer for q in questions):
    first = next(q for q in questions if not q.answer)
    raise FormatError(pathlib.Path(data_dir) / _FOLDERS[split] / f"{first.subject}.csv", first.line,
                      "dev questions need the Answer column")
  return questions

"""AC-EVAL (yuting-wei/AC-EVAL): four-option questions on ancient Chinese in 13 subjects;
accuracy per subject and per category, and their average.

A data folder holds dev/<subject>.csv (5 questions per subject, header
`,Question,A,B,C,D,Answer,Explanation`) and test/<subject>.csv (`,Question,A,B,C,D`), the
first column being the row id the submission is keyed by. Fields may be quoted (commas,
quotes and line breaks inside); the released questions write some line breaks as a literal
backslash-n, kept as it is (the model reads the CSV's text). The test answers are not public:
the submission file ({subject: {row id: letter}}) is the test result, scored by AC-EVAL's
authors. The dev questions are the only labelled ones, so the `train` and `dev` splits are
both the dev folder (wyjax/train/aceval.py keeps them apart by cross-validation).

AC-EVAL's paper evaluates LLMs by in-context prompting (zero-shot, and few-shot with k = 5
examples, 3 for sentence_pauses, translation and poetry_appreciation, 1 for
summarization_and_analysis). Encoders cannot be prompted; wyjax's two protocols are named for
what they are (wyjax/train/aceval.py) and are not comparable with the paper's numbers.
"""
import csv
import dataclasses
import io
import pathlib

import numpy as np

from wyjax.core.storage import read_text
from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics
from wyjax.tasks.files import FormatError
from wyjax.tasks.task import Task, argmax, as_json, label_or_ignore, most_common, per_example, rows, with_specials

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
    row_id, question, *options = row[:6]
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


QUESTION_TAIL = 64  # tokens a cut question keeps from its end, where the question proper stands


def _featurize(example: Question, tokenizer: Tokenizer, max_length: int):
  """One row per option: [CLS] question [SEP] option [SEP] (token types 0 | 1).

  Truncation keeps the question and the options: an option keeps at most half of the
  max_length − 3 content tokens (its end is cut); the question gets what the longest option
  leaves and, when longer, keeps its first part and its last QUESTION_TAIL tokens (at most half
  of its room), losing the middle of the passage it quotes: the question follows the passage.
  """
  whole_question = question = tokenizer.encode_chars(example.question)[0]
  full = [tokenizer.encode_chars(o)[0] for o in example.options]
  options = [o[:(max_length - 3) // 2] for o in full]
  room = max_length - 3 - max(len(o) for o in options)
  if len(question) > room:
    tail = min(QUESTION_TAIL, room // 2)
    question = np.concatenate([question[:room - tail], question[len(question) - tail:]])
  first = with_specials(tokenizer, question)
  sequences = [np.concatenate([first, o, [tokenizer.sep_id]]) for o in options]
  cut = len(whole_question) - len(question) + sum(len(f) - len(o) for f, o in zip(full, options))
  label = LETTERS.index(example.answer) if example.answer else None
  return {**rows(sequences, tokenizer.pad_id, len(first)), "label": label_or_ignore(label)}, cut


def scores(examples, predictions) -> dict:
  """Accuracy per subject and per category (the mean of its subjects present), `average` the
  mean of the categories (the AC-EVAL paper's Average), `accuracy` over all questions."""
  correct = {}
  for e, p in zip(examples, predictions, strict=True):
    correct.setdefault(e.subject, []).append(e.answer == p)
  subjects = {s: float(np.mean(c)) for s, c in correct.items()}
  categories = {}
  for category, members in CATEGORIES.items():
    present = [subjects[s] for s in members if s in subjects]
    if present:
      categories[category] = float(np.mean(present))
  accuracy = metrics.accuracy([LETTERS.index(p) for p in predictions], [LETTERS.index(e.answer) for e in examples])
  return {"accuracy": accuracy,
          "average": float(np.mean(list(categories.values()))),
          **{f"category/{c}": v for c, v in categories.items()}, **{f"subject/{s}": v for s, v in subjects.items()}}


def chance(dev) -> dict:
  """The scores of answering at random, in expectation: 1/4 everywhere."""
  return {k: 0.25 for k in scores(dev, [e.answer for e in dev])}


TASK = Task(
    name="aceval", head="choice", labels=LETTERS, max_length=512, featurize=_featurize,
    decode=lambda e, f, logits: LETTERS[argmax(logits)], score=scores, main_metric="average",
    baseline=lambda train, dev: [most_common(e.answer for e in train)] * len(dev), submission_format="jsonl",
    submission=per_example(lambda e, p: as_json({"subject": e.subject, "id": e.row_id, "answer": p})))

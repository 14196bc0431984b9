"""CLUE's reading-comprehension files (CMRC 2018, ChID, C3), read and checked.

The tasks that use them are in clue_reading.py. A labelled split (train, dev) needs every answer; test may lack them.
A malformed record is a FormatError naming the file and line.
"""

import dataclasses
import pathlib
import re
from collections.abc import Callable

from wyjax.tasks import files
from wyjax.tasks.clue import check_unique_ids, record_id
from wyjax.tasks.files import FormatError, expect, located_json, objects_of


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  """The files of one split of a task; none when the split is absent.

  C3: its dialogue and mixed-genre files (or, for test, one file of both); ChID: its file and, in CLUE's layout,
  its answers; CMRC 2018: one file.
  """
  if task == "c3":
    return _c3_files(data_dir, split)
  names = {"cmrc2018": CMRC_FILES, "chid": CHID_FILES}[task][split]
  path = files.first_present(data_dir, names)
  if path is None:
    return []
  answers = pathlib.Path(data_dir) / f"{split}_answer.json"
  return [path, answers] if task == "chid" and answers.exists() else [path]


def read_split(task: str, data_dir, split: str) -> list | None:
  """The split's examples, or None when it is absent."""
  paths = split_files(task, data_dir, split)
  if not paths:
    return None
  labelled = split != "test"
  if task == "c3":
    examples = []
    for path in paths:  # ids continue from the dialogue file into the mixed-genre one
      examples += read_c3(path, first_id=len(examples), labelled=labelled)
    return examples
  if task == "chid":
    return read_chid(*paths, labelled=labelled)
  return read_cmrc(paths[0], labelled=labelled)


# --- CMRC 2018: extractive reading comprehension (SQuAD v1.1 JSON) ------------------------------------------

# ymcui/cmrc2018's names and CLUE's; CLUE's test script reads its 2k-question test as cmrc2018_test_2k.json.
CMRC_FILES = {split: (f"cmrc2018_{split}.json", f"{split}.json") for split in ("train", "dev")}
CMRC_FILES["test"] = ("cmrc2018_test.json", "test.json", "cmrc2018_test_2k.json")
NO_SPAN = (-1, -1)  # a question without a reference in the context


@dataclasses.dataclass(frozen=True)
class CmrcExample:
  line: int  # where the question's id is in the file
  id: str
  context: str
  question: str
  answers: tuple[str, ...]  # every reference answer, all scored (dev and test files have up to three)
  answer: tuple[int, int] = NO_SPAN  # [start, end) characters of the first reference found in the context
  start_moved: bool = False  # that reference's answer_start missed its text: its nearest occurrence is used
  unlocated: int = 0  # references not in the context (variant characters, paraphrases): scored, not trained on


def read_cmrc(path, *, labelled: bool) -> list[CmrcExample]:
  """Every question of a SQuAD v1.1 file, each id once, with all its references.

  - Every reference is scored by its text (cmrc2018_evaluate.py never reads answer_start).
  - Training takes the first reference found in the context. An answer_start that misses its text, or is -1
    (no position), is moved to the text's nearest occurrence; a question with no reference in the context is not
    trained on (as BERT's run_squad).

  Raises:
    FormatError: a malformed record, or an answer_start outside the context other than -1.
  """
  squad, line_of = located_json(path)
  articles = files.field(path, 1, expect(path, 1, squad, dict, "the file"), "data", list)
  out = []
  for article, article_line in objects_of(path, articles, line_of, "article"):
    paragraphs = files.field(path, article_line, article, "paragraphs", list)
    for paragraph, line in objects_of(path, paragraphs, line_of, "paragraph"):
      context = files.field(path, line, paragraph, "context", str)
      if not context.strip():
        raise FormatError(path, line, "empty 'context'")
      questions = files.field(path, line, paragraph, "qas", list)
      for qa, line in objects_of(path, questions, line_of, "question"):
        out.append(_cmrc_question(path, line, line_of, qa, context, labelled))
  return check_unique_ids(path, out)


def _cmrc_question(path, line: int, line_of, qa: dict, context: str, labelled: bool) -> CmrcExample:
  qid = files.field(path, line, qa, "id", str)
  if not qid.strip():
    raise FormatError(path, line, "empty 'id'")
  line = line_of(qa, "id")
  question = files.field(path, line, qa, "question", str)
  answers = files.field(path, line, qa, "answers", list) if "answers" in qa else []
  if labelled and not answers:
    raise FormatError(path, line, f"{qid}: no 'answers' (a labelled split needs them)")
  found = [_cmrc_answer(path, line, qid, answer, context) for answer, _ in objects_of(path, answers, line_of, "answer")]
  located = [(span, moved) for _, span, moved in found if span is not None]
  span, moved = located[0] if located else (NO_SPAN, False)
  return CmrcExample(
    line, qid, context, question, tuple(text for text, _, _ in found), span, moved, unlocated=len(found) - len(located)
  )


def _cmrc_answer(path, line: int, qid: str, answer: dict, context: str) -> tuple[str, tuple[int, int] | None, bool]:
  """The answer's text, its [start, end) characters (None: not in the context), and whether its start moved.

  An answer_start that misses the text (or is -1) is moved to the text's nearest occurrence.
  """
  text = files.field(path, line, answer, "text", str)
  start = files.field(path, line, answer, "answer_start", int)
  if not text:
    raise FormatError(path, line, f"{qid}: empty answer text")
  if not -1 <= start < len(context):
    raise FormatError(
      path,
      line,
      f"{qid}: answer_start {start} is outside the context (0 to {len(context) - 1}) and not -1 (no position)",
    )
  if start >= 0 and context[start : start + len(text)] == text:
    return text, (start, start + len(text)), False
  found = [i for i in range(len(context)) if context.startswith(text, i)]
  if not found:
    return text, None, False
  start = min(found, key=lambda i: abs(i - start))
  return text, (start, start + len(text)), True


# --- C3: multiple-choice reading comprehension (dialogue d- and mixed-genre m- files) -----------------------

C3_FILES = {
  split: tuple(f"{prefix}{kind}-{split}.json" for kind in "dm" for prefix in ("", "c3-"))
  for split in ("train", "dev", "test")
}
# CLUE releases C3's test as one file of both kinds, its questions with ids: test1.1.json for
# the 1.1 board (c311_predict.json; CLUE's run_mrc_c3.sh reads it), test.json in other copies.
C3_MIXED_TEST = ("test1.1.json", "test.json")


def _c3_files(data_dir, split: str) -> list[pathlib.Path]:
  found = [
    path
    for kind in "dm"
    if (
      path := files.first_present(data_dir, [name for name in C3_FILES[split] if name.endswith(f"{kind}-{split}.json")])
    )
  ]
  mixed = files.first_present(data_dir, C3_MIXED_TEST) if split == "test" else None
  if mixed and found:
    raise ValueError(
      f"{data_dir}: {mixed.name} and {' and '.join(p.name for p in found)} are the test split under two names; keep one"
    )
  return [mixed] if mixed else found


@dataclasses.dataclass(frozen=True)
class C3Example:
  line: int  # where the question starts in its file
  id: int  # the question's "id" (CLUE's test file), else its position among the split's questions
  context: str  # the document's sentences, one per line
  question: str
  options: tuple[str, ...]  # 2 to 4
  label: int | None  # the answer's index among the options; None in a test file


def read_c3(path, first_id: int = 0, *, labelled: bool) -> list[C3Example]:
  """Every question of a C3 file: [[sentences], [{"question", "choice", "answer"}...], doc id]."""
  documents, line_of = located_json(path)
  out = []
  for index, document in enumerate(expect(path, 1, documents, list, "the file")):
    line = line_of(documents, index)
    if not (
      isinstance(document, list)
      and len(document) == 3
      and isinstance(document[0], list)
      and isinstance(document[1], list)
    ):
      raise FormatError(path, line, "expected [[sentences], [questions], document id]")
    sentences, questions, _ = document
    for k, sentence in enumerate(sentences):
      expect(path, line_of(sentences, k), sentence, str, f"sentence {k}")
    for qa, line in objects_of(path, questions, line_of, "question"):
      qid = record_id(path, line, qa, first_id + len(out))
      out.append(
        C3Example(
          line,
          qid,
          "\n".join(sentences),
          files.field(path, line, qa, "question", str),
          *_c3_choice(path, line, qa, labelled),
        )
      )
  return check_unique_ids(path, out)


def _c3_choice(path, line: int, qa: dict, labelled: bool) -> tuple[tuple[str, ...], int | None]:
  """The question's options and its answer's index among them (None: no answer, in a test file)."""
  options = files.field(path, line, qa, "choice", list)
  if not 2 <= len(options) <= 4 or not all(isinstance(o, str) and o.strip() for o in options):
    raise FormatError(path, line, f"'choice' should be 2 to 4 non-empty strings, found {options!r}")
  if "answer" not in qa:
    if labelled:
      raise FormatError(path, line, "the question has no 'answer' (a labelled split needs one)")
    return tuple(options), None
  answer = files.field(path, line, qa, "answer", str)
  if answer not in options:
    raise FormatError(path, line, f"answer {answer!r} is not one of the choices {options}")
  return tuple(options), options.index(answer)


# --- ChID: the idiom that fills a blank, among candidates ---------------------------------------------------

CHID_CANDIDATES = {"FewCLUE": 7, "CLUE": 10}  # candidates per blank in each layout
# CLUE 1.1's test is test1.1.json (chid11_predict.json); test1.0.json, the retired 1.0 board's, is not read.
CHID_FILES = {"train": ("train.json",), "dev": ("dev.json",), "test": ("test1.1.json", "test.json")}
BLANK = "□"  # stands for the other blanks of a passage while one is filled
CHID_CONTEXT = 64  # characters kept each side of the blank; max_length (CLUE's 64 in all) cuts them to fit


@dataclasses.dataclass(frozen=True)
class ChidExample:
  line: int
  id: str  # FewCLUE: the record's id; CLUE: the blank's tag (#idiom000123#)
  left: str  # the text before the blank (other blanks as BLANK), its end kept
  right: str  # the text after it, its beginning kept
  candidates: tuple[str, ...]
  label: int | None


_TAG = re.compile(r"#idiom\d*#")


def _blanks(path, line: int, passages: list) -> list[tuple[str, str, str]]:
  """(tag, left, right) of each blank of the passages, the others in its passage as BLANK."""
  other = lambda text: _TAG.sub(BLANK, text)
  blanks = []
  for k, passage in enumerate(passages):
    expect(path, line, passage, str, f"passage {k} of 'content'")
    blanks += [
      (m.group(), other(passage[: m.start()])[-CHID_CONTEXT:], other(passage[m.end() :])[:CHID_CONTEXT])
      for m in _TAG.finditer(passage)
    ]
  if not blanks:
    raise FormatError(path, line, "the content has no #idiom# blank")
  return blanks


def read_chid(path, answers_path=None, *, labelled: bool) -> list[ChidExample]:
  """One example per blank of a ChID file, each id once, in either layout.

  - FewCLUE's: {"id", "candidates": 7 idioms, "content": a text with one #idiom#, "answer"} (test: no answer).
  - CLUE's: {"candidates": 10 idioms, "content": passages with #idiomNNNNNN# blanks}; the answers are in
    answers_path, {tag: index}.
  """
  answer = _chid_answers(answers_path) if answers_path is not None else None
  out, first_layout = [], None
  for line, record in files.json_records(path):
    content = files.field(path, line, record, "content", (str, list))
    layout = "FewCLUE" if isinstance(content, str) else "CLUE"
    first_layout = first_layout or layout
    if layout != first_layout:
      raise FormatError(
        path,
        line,
        f"a record in {layout}'s layout after {first_layout}'s (content a text: FewCLUE's; a list of passages: CLUE's)",
      )
    candidates = files.field(path, line, record, "candidates", list)
    if len(candidates) != CHID_CANDIDATES[layout] or not all(isinstance(c, str) and c for c in candidates):
      raise FormatError(
        path, line, f"'candidates' should be {CHID_CANDIDATES[layout]} idioms ({layout}'s layout), found {candidates!r}"
      )
    blanks = _blanks(path, line, [content] if layout == "FewCLUE" else content)
    if layout == "FewCLUE":
      out.append(_fewclue_chid(path, line, record, blanks, tuple(candidates), labelled))
    elif answer is None and labelled:
      raise FormatError(
        path,
        line,
        f"no {pathlib.Path(path).stem}_answer.json beside it, where CLUE's layout "
        "keeps the answers (a labelled split needs them)",
      )
    else:
      out += [
        ChidExample(
          line, tag, left, right, tuple(candidates), None if answer is None else answer(tag, f"{path}:{line}")
        )
        for tag, left, right in blanks
      ]
  return check_unique_ids(path, out)


def _fewclue_chid(path, line: int, record: dict, blanks, candidates: tuple[str, ...], labelled: bool) -> ChidExample:
  if len(blanks) != 1:
    raise FormatError(path, line, f"FewCLUE's layout has one #idiom# blank per record, found {len(blanks)}")
  label = None
  if "answer" in record:
    label = files.field(path, line, record, "answer", int)
    if not 0 <= label < len(candidates):
      raise FormatError(path, line, f"answer {label} is not an index into the {len(candidates)} candidates")
  elif labelled:
    raise FormatError(path, line, "no 'answer' (a labelled split needs one)")
  _, left, right = blanks[0]
  return ChidExample(line, str(files.field(path, line, record, "id", int)), left, right, candidates, label)


def _chid_answers(path) -> Callable[[str, str], int]:
  """CLUE's answers file {tag: index} as answer(tag, where the blank is), which checks the index."""
  answers, line_of = located_json(path)
  expect(path, 1, answers, dict, "the answers file ({tag: index})")
  count = CHID_CANDIDATES["CLUE"]

  def answer(tag: str, where: str) -> int:
    if tag not in answers:
      raise FormatError(path, 1, f"no answer for {tag} ({where})")
    label = answers[tag]
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < count:
      raise FormatError(
        path,
        line_of(answers, tag),
        f"{tag}: answer {label!r} should be an index into the {count} candidates (an int from 0 to {count - 1})",
      )
    return label

  return answer

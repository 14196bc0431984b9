"""CLUE's reading comprehension, from its released files: CMRC 2018 (span extraction; exact
match and F1 by its official rules, metrics.cmrc_scores), ChID and C3 (multiple choice;
accuracy). They share CLUE's board with its classification tasks (wyjax/tasks/clue.py); the
formats are described at their readers below.
"""

import dataclasses
import pathlib
import re
from collections.abc import Callable, Sequence

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import files, metrics, spans
from wyjax.tasks.clue import check_unique_ids, clue_task, record_id
from wyjax.tasks.files import FormatError, expect, located_json, objects_of
from wyjax.tasks.task import (
  OPTIONS,
  argmax,
  as_json,
  choice_rows,
  constant_baseline,
  label_or_ignore,
  per_example,
  rows,
  with_specials,
)


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  """The files of one split (none: the split is absent): C3's dialogue and mixed-genre files
  (its test also one file of both), ChID's file and (CLUE's layout) its answers, CMRC 2018's
  one file."""
  if task == "c3":
    return _c3_files(data_dir, split)
  names = {"cmrc2018": CMRC_FILES, "chid": CHID_FILES}[task][split]
  path = files.first_present(data_dir, names)
  if path is None:
    return []
  answers = pathlib.Path(data_dir) / f"{split}_answer.json"
  return [path, answers] if task == "chid" and answers.exists() else [path]


def read_split(task: str, data_dir, split: str) -> list | None:
  """The split's examples, or None when absent; every question of train and dev (released
  labelled) needs its answer, test's (released without) may lack one."""
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
CMRC_STRIDE = 128  # doc stride: tokens between the starts of a context's windows
NO_SPAN = (-1, -1)  # a question without a reference in the context
MAX_ANSWER_TOKENS = 100  # the longest answer decoded: 96% of the trial file's answers are shorter


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
  """Every question of a SQuAD v1.1 file, each id once, with all its references: the official
  evaluation (cmrc2018_evaluate.py) scores against each reference's text and never reads
  answer_start. Training takes the first reference found in the context; an answer_start that
  misses its text, or is -1 (the official dev file's, for a reference without a position), is
  moved to the text's nearest occurrence (5 of the trial file's 901 are off by one). References
  not in the context at all (174 of the official dev file's 3,219 questions have one: variant
  characters, paraphrases) are scored by their text; a question with no reference in the context
  is not trained on (BERT's run_squad skips it). These, moved starts and empty questions are
  counted in the run's notes. Any other answer_start outside the context is an error."""
  squad, line_of = located_json(path)
  articles = files.field(path, 1, expect(path, 1, squad, dict, "the file"), "data", list)
  out = []
  for article, line in objects_of(path, articles, line_of, "article"):
    for paragraph, line in objects_of(path, files.field(path, line, article, "paragraphs", list), line_of, "paragraph"):
      context = files.field(path, line, paragraph, "context", str)
      if not context.strip():
        raise FormatError(path, line, "empty 'context'")
      for qa, line in objects_of(path, files.field(path, line, paragraph, "qas", list), line_of, "question"):
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
  """The answer's text, its [start, end) characters (None: not in the context), and whether
  answer_start missed the text (or was -1), which is then taken at its nearest occurrence."""
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


def _cmrc_featurize(example: CmrcExample, tokenizer: Tokenizer, max_length: int):
  return spans.windows(
    tokenizer,
    example.question,
    example.context,
    max_length,
    CMRC_STRIDE,
    None if example.answer == NO_SPAN else example.answer,
  )


def _cmrc_decode(example: CmrcExample, features, logits) -> str:
  span, _ = spans.best_span(features, logits, max_answer_length=MAX_ANSWER_TOKENS)
  return "" if span is None else example.context[span[0] : span[1]]


def _cmrc_show(example: CmrcExample, answer: str, features, logits) -> dict:
  """The answer, its [start, end) characters in the context and its score (start + end logit)."""
  span, score = spans.best_span(features, logits, max_answer_length=MAX_ANSWER_TOKENS)
  start, end = span or (-1, -1)
  return {"answer": answer, "start": start, "end": end, "score": round(float(score), 4)}


def _cmrc_score(examples, predictions) -> dict:
  scored = [(p, e.answers) for e, p in zip(examples, predictions, strict=True) if e.answers]
  return metrics.cmrc_scores([p for p, _ in scored], [a for _, a in scored])


def _cmrc_notes(examples) -> list[str]:
  moved = [e.id for e in examples if e.start_moved]
  unlocated = [e.id for e in examples if e.unlocated]
  untrained = [e.id for e in examples if e.answers and e.answer == NO_SPAN]
  empty = [e.id for e in examples if not e.question.strip()]
  listed = lambda ids: ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
  notes = (
    [f"{len(moved)} answer(s) whose answer_start missed their text, taken at its nearest occurrence ({listed(moved)})"]
    if moved
    else []
  )
  if unlocated:
    notes.append(
      f"{sum(e.unlocated for e in examples)} reference answer(s) of {len(unlocated)} question(s) not "
      f"in the context, scored but not trained on ({listed(unlocated)})"
    )
  if untrained:
    notes.append(f"{len(untrained)} question(s) with no reference in the context: not trained on ({listed(untrained)})")
  return notes + (
    [f"{len(empty)} empty question(s), answered from the context alone ({listed(empty)})"] if empty else []
  )


CMRC2018 = clue_task(
  "cmrc2018",
  CmrcExample,
  "cmrc2018_train.json",
  "question-answering",
  split_files=split_files,
  read_split=read_split,
  heading="CMRC 2018",
  head="span",
  labels=(),
  max_length=512,
  featurize=_cmrc_featurize,
  decode=_cmrc_decode,
  score=_cmrc_score,
  main_metric="em",
  baseline=lambda train, dev: [""] * len(dev),
  submission_format="json",
  submission_name="cmrc2018_predict.json",
  submission=lambda examples, predictions: [as_json({e.id: p for e, p in zip(examples, predictions, strict=True)})],
  notes=_cmrc_notes,
  inputs=("context", "question"),
  show=_cmrc_show,
)


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


def _labelled_accuracy(examples, predictions) -> dict:
  scored = [(p, e.label) for e, p in zip(examples, predictions, strict=True) if e.label is not None]
  return {"accuracy": metrics.accuracy([p for p, _ in scored], [g for _, g in scored])}


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


def _c3_featurize(example: C3Example, tokenizer: Tokenizer, max_length: int):
  features, cut = choice_rows(tokenizer, example.context, example.question, example.options, max_length, cut="context")
  return {**features, "label": label_or_ignore(example.label)}, cut


C3 = clue_task(
  "c3",
  C3Example,
  "d-train.json and m-train.json",
  "multiple-choice",
  split_files=split_files,
  read_split=read_split,
  heading="C³",
  head="choice",
  labels=OPTIONS,
  max_length=512,
  featurize=_c3_featurize,
  decode=lambda e, f, logits: argmax(logits[: len(e.options)]),
  score=_labelled_accuracy,
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.label),
  submission_format="json",
  submission_name="c311_predict.json",
  submission=per_example(lambda e, p: as_json({"id": e.id, "label": p})),
  inputs=("context", "question", "options"),
  show=lambda e, p, f, logits: {"answer": p, "option": e.options[p]},
)


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
  """FewCLUE's layout ({"id", "candidates": 7 idioms, "content": a text with one #idiom#,
  "answer"}; no answer in its test file) or CLUE's ({"candidates": 10 idioms, "content":
  passages with #idiomNNNNNN# blanks}, the answers in answers_path: {tag: index}); one
  example per blank, each id once."""
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


def _chid_featurize(example: ChidExample, tokenizer: Tokenizer, max_length: int):
  """One row per candidate: [CLS] left candidate right [SEP], the blank in the middle."""
  left, right = (tokenizer.encode_chars(t)[0] for t in (example.left, example.right))
  rows_ = []
  for candidate in example.candidates:
    idiom = tokenizer.encode_chars(candidate)[0]
    room = max(0, max_length - 2 - len(idiom))
    keep_left = min(len(left), max(room // 2, room - len(right)))
    keep_right = min(len(right), room - keep_left)
    rows_.append(with_specials(tokenizer, np.concatenate([left[len(left) - keep_left :], idiom, right[:keep_right]])))
  cut = len(left) + len(right) - keep_left - keep_right
  return {**rows(rows_, tokenizer.pad_id), "label": label_or_ignore(example.label)}, cut


def assign_blanks(examples: Sequence[ChidExample], logits: Sequence[np.ndarray]) -> list[int]:
  """CLUE's ChID decoding: the blanks of one record (a line; its passages share the candidates)
  take distinct idioms, the highest-scoring (idiom, blank) pair of those left first, ties in
  idiom then blank order (its baseline's logits_matrix_to_array). A blank left over (more
  blanks than candidates) takes its own best."""
  predictions = [argmax(l[: len(e.candidates)]) for e, l in zip(examples, logits, strict=True)]
  records = {}
  for k, example in enumerate(examples):
    records.setdefault(example.line, []).append(k)
  for blanks in records.values():
    candidates = range(len(examples[blanks[0]].candidates))
    pairs = sorted(
      ((c, k) for c in candidates for k in blanks), key=lambda pair: logits[pair[1]][pair[0]], reverse=True
    )  # stable: equal scores keep idiom-then-blank order
    free_blanks, free_candidates = set(blanks), set(candidates)
    for c, k in pairs:
      if k in free_blanks and c in free_candidates:
        predictions[k] = c
        free_blanks.remove(k)
        free_candidates.remove(c)
  return predictions


def _chid_prepare(task, splits: dict, config):
  return (task if config.joint_blanks else dataclasses.replace(task, decode_together=None)), splits


def _chid_submission(examples, predictions) -> list[str]:
  """CLUE's layout: one JSON object {tag: index}; FewCLUE's: {"id", "answer"} per line."""
  if examples and examples[0].id.startswith("#idiom"):
    return [as_json({e.id: p for e, p in zip(examples, predictions, strict=True)})]
  return [as_json({"id": int(e.id), "answer": p}) for e, p in zip(examples, predictions, strict=True)]


CHID_LABELS = tuple(str(i) for i in range(CHID_CANDIDATES["CLUE"]))  # FewCLUE's 7 use the first 7
CHID = clue_task(
  "chid",
  ChidExample,
  "train.json (and train_answer.json)",
  "multiple-choice",
  split_files=split_files,
  read_split=read_split,
  heading="ChID",
  head="choice",
  labels=CHID_LABELS,
  max_length=64,
  featurize=_chid_featurize,
  decode=lambda e, f, logits: argmax(logits[: len(e.candidates)]),
  decode_together=assign_blanks,
  options={"joint_blanks": True},
  prepare=_chid_prepare,
  score=_labelled_accuracy,
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.label),
  submission_format="json",
  submission_name="chid11_predict.json",
  submission=_chid_submission,
  inserted_text=BLANK,
  inputs=("left", "right", "candidates"),
  show=lambda e, p, f, logits: {"answer": p, "idiom": e.candidates[p]},
)


TASKS = (CMRC2018, CHID, C3)  # CLUE's order

"""CLUE's reading comprehension, from its released files: CMRC 2018 (span extraction; exact
match and F1 by its official rules), ChID and C3 (multiple choice; accuracy). CLUE's score for
them is on the same board as its classification tasks (wyjax/tasks/clue.py); the formats are
described at their readers below.
"""
import dataclasses
import pathlib
import re
from collections.abc import Callable, Sequence

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import files, metrics, spans
from wyjax.tasks.clue import check_unique_ids, clue_task
from wyjax.tasks.files import FormatError, expect, located_json, objects_of
from wyjax.tasks.task import (OPTIONS, argmax, as_json, choice_rows, constant_baseline, label_or_ignore,
                              per_example, rows, with_specials)


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  """The files of one split (none: the split is absent): C3's dialogue and mixed-genre files,
  ChID's file and (CLUE's layout) its answers, CMRC 2018's one file."""
  if task == "c3":
    return [path for kind in "dm" if (path := files.first_present(
        data_dir, [name for name in C3_FILES[split] if name.endswith(f"{kind}-{split}.json")]))]
  path = files.first_present(data_dir, CMRC_FILES[split] if task == "cmrc2018" else (f"{split}.json",))
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

CMRC_FILES = {split: (f"cmrc2018_{split}.json", f"{split}.json") for split in ("train", "dev", "test")}
CMRC_STRIDE = 128  # doc stride: tokens between the starts of a context's windows
MAX_ANSWER_TOKENS = 100  # the longest answer decoded: 96% of the trial file's answers are shorter


@dataclasses.dataclass(frozen=True)
class CmrcExample:
  line: int  # where the question's id is in the file
  id: str
  context: str
  question: str
  answers: tuple[str, ...]  # every reference answer (dev and test files have several)
  answer: tuple[int, int]  # the first answer's [start, end) characters; (-1, -1) without answers
  start_moved: bool  # its answer_start did not point at its text: the nearest occurrence is used


def read_cmrc(path, *, labelled: bool) -> list[CmrcExample]:
  """Every question of a SQuAD v1.1 file, each id once. An answer whose answer_start misses
  its text is taken at the text's nearest occurrence in the context (5 of the trial file's
  901 are off by one) and counted in the run's notes, as are empty questions (one there); an
  answer not in the context, or an answer_start outside it, is an error."""
  squad, line_of = located_json(path)
  articles = files.field(path, 1, expect(path, 1, squad, dict, "the file"), "data", list)
  out = []
  for article, line in objects_of(path, articles, line_of, "article"):
    for paragraph, line in objects_of(path, files.field(path, line, article, "paragraphs", list), line_of,
                                      "paragraph"):
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
  texts, characters, moved = zip(*found) if found else ((), [(-1, -1)], [False])
  return CmrcExample(line, qid, context, question, texts, characters[0], moved[0])  # the first answer is trained on


def _cmrc_answer(path, line: int, qid: str, answer: dict, context: str) -> tuple[str, tuple[int, int], bool]:
  """The answer's text, its [start, end) characters, and whether answer_start missed the text,
  which is then taken at its nearest occurrence."""
  text = files.field(path, line, answer, "text", str)
  start = files.field(path, line, answer, "answer_start", int)
  if not text:
    raise FormatError(path, line, f"{qid}: empty answer text")
  if not 0 <= start < len(context):
    raise FormatError(path, line, f"{qid}: answer_start {start} is outside the context (0 to {len(context) - 1})")
  if context[start:start + len(text)] == text:
    return text, (start, start + len(text)), False
  found = [i for i in range(len(context)) if context.startswith(text, i)]
  if not found:
    raise FormatError(path, line, f"{qid}: answer {text!r} is not in the context")
  start = min(found, key=lambda i: abs(i - start))
  return text, (start, start + len(text)), True


# The official evaluation's punctuation (cmrc2018_evaluate.py's sp_char): its '……' entry is
# two characters and never equals one, so '…' is kept, as there.
CMRC_PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")


def _latin_words(text: str) -> list[str]:
  # The official script splits non-Chinese runs with NLTK's word_tokenize; words and symbols here.
  return re.findall(r"\w+|[^\w\s]", text)


def cmrc_segments(text: str) -> list[str]:
  """The official mixed segmentation with punctuation removed: lower case, each Chinese
  character (U+4E00–U+9FA5) a segment, the runs between them split into words."""
  segments, run = [], ""
  for char in text.lower().strip():
    if char in CMRC_PUNCTUATION:
      continue
    if "\u4e00" <= char <= "\u9fa5":
      segments += _latin_words(run) + [char]
      run = ""
    else:
      run += char
  return segments + _latin_words(run)


def _longest_common_run(a: list[str], b: list[str]) -> int:
  """Length of the longest common contiguous run of segments (the official find_lcs)."""
  best, previous = 0, [0] * (len(b) + 1)
  for x in a:
    current = [0] * (len(b) + 1)
    for j, y in enumerate(b):
      if x == y:
        current[j + 1] = previous[j] + 1
        best = max(best, current[j + 1])
    previous = current
  return best


def _without_punctuation(text: str) -> str:
  return "".join(c for c in text.lower().strip() if c not in CMRC_PUNCTUATION)


def cmrc_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict:
  """CMRC 2018's exact match and F1 (×1, not ×100), each the maximum over the references and
  averaged over the questions, and their mean, the official AVERAGE."""
  em = f1 = 0.0
  for prediction, answers in zip(predictions, references, strict=True):
    em += max(_without_punctuation(a) == _without_punctuation(prediction) for a in answers)
    predicted = cmrc_segments(prediction)
    best = 0.0
    for answer in answers:
      gold = cmrc_segments(answer)
      common = _longest_common_run(gold, predicted)
      if common:
        precision, recall = common / len(predicted), common / len(gold)
        best = max(best, 2 * precision * recall / (precision + recall))
    f1 += best
  n = max(len(predictions), 1)
  return {"em": em / n, "f1": f1 / n, "average": (em + f1) / (2 * n)}


def _cmrc_featurize(example: CmrcExample, tokenizer: Tokenizer, max_length: int):
  return spans.windows(tokenizer, example.question, example.context, max_length, CMRC_STRIDE,
                       example.answer if example.answers else None)


def _cmrc_decode(example: CmrcExample, features, logits) -> str:
  span, _ = spans.best_span(features, logits, max_answer_length=MAX_ANSWER_TOKENS)
  return "" if span is None else example.context[span[0]:span[1]]


def _cmrc_show(example: CmrcExample, answer: str, features, logits) -> dict:
  """The answer, its [start, end) characters in the context and its score (start + end logit)."""
  span, score = spans.best_span(features, logits, max_answer_length=MAX_ANSWER_TOKENS)
  start, end = span or (-1, -1)
  return {"answer": answer, "start": start, "end": end, "score": round(float(score), 4)}


def _cmrc_score(examples, predictions) -> dict:
  scored = [(p, e.answers) for e, p in zip(examples, predictions, strict=True) if e.answers]
  return cmrc_scores([p for p, _ in scored], [a for _, a in scored])


def _cmrc_notes(examples) -> list[str]:
  moved = [e.id for e in examples if e.start_moved]
  empty = [e.id for e in examples if not e.question.strip()]
  notes = [f"{len(moved)} answer(s) whose answer_start missed their text, taken at its nearest occurrence "
           f"({', '.join(moved[:5])})"] if moved else []
  return notes + ([f"{len(empty)} empty question(s), answered from the context alone ({', '.join(empty[:5])})"]
                  if empty else [])


CMRC2018 = clue_task(
    "cmrc2018", CmrcExample, "cmrc2018_train.json", "question-answering",
    split_files=split_files, read_split=read_split, heading="CMRC 2018", head="span", labels=(), max_length=512, featurize=_cmrc_featurize, decode=_cmrc_decode,
    score=_cmrc_score, main_metric="em", baseline=lambda train, dev: [""] * len(dev),
    submission_format="json", submission_name="cmrc2018_predict.json",
    submission=lambda examples, predictions: [as_json({e.id: p for e, p in zip(examples, predictions, strict=True)})],
    notes=_cmrc_notes, inputs=("context", "question"), show=_cmrc_show)


# --- C3: multiple-choice reading comprehension (dialogue d- and mixed-genre m- files) -----------------------

C3_FILES = {split: tuple(f"{prefix}{kind}-{split}.json" for kind in "dm" for prefix in ("", "c3-"))
            for split in ("train", "dev", "test")}


def _labelled_accuracy(examples, predictions) -> dict:
  scored = [(p, e.label) for e, p in zip(examples, predictions, strict=True) if e.label is not None]
  return {"accuracy": metrics.accuracy([p for p, _ in scored], [g for _, g in scored])}


@dataclasses.dataclass(frozen=True)
class C3Example:
  line: int  # where the question starts in its file
  id: int  # the question's "id" (test files), else its position among the split's questions
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
    if not (isinstance(document, list) and len(document) == 3 and isinstance(document[0], list)
            and isinstance(document[1], list)):
      raise FormatError(path, line, "expected [[sentences], [questions], document id]")
    sentences, questions, _ = document
    for k, sentence in enumerate(sentences):
      expect(path, line_of(sentences, k), sentence, str, f"sentence {k}")
    for qa, line in objects_of(path, questions, line_of, "question"):
      qid = files.field(path, line, qa, "id", int) if "id" in qa else first_id + len(out)
      out.append(C3Example(line, qid, "\n".join(sentences), files.field(path, line, qa, "question", str),
                           *_c3_choice(path, line, qa, labelled)))
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
  features, cut = choice_rows(tokenizer, example.context, example.question, example.options, max_length,
                              cut="context")
  return {**features, "label": label_or_ignore(example.label)}, cut


C3 = clue_task(
    "c3", C3Example, "d-train.json and m-train.json", "multiple-choice",
    split_files=split_files, read_split=read_split, heading="C³", head="choice", labels=OPTIONS, max_length=512, featurize=_c3_featurize,
    decode=lambda e, f, logits: argmax(logits[:len(e.options)]), score=_labelled_accuracy,
    main_metric="accuracy", baseline=constant_baseline(lambda e: e.label), submission_format="json",
    submission_name="c311_predict.json", submission=per_example(lambda e, p: as_json({"id": e.id, "label": p})),
    inputs=("context", "question", "options"), show=lambda e, p, f, logits: {"answer": p, "option": e.options[p]})


# --- ChID: the idiom that fills a blank, among candidates ---------------------------------------------------

CHID_CANDIDATES = {"FewCLUE": 7, "CLUE": 10}  # candidates per blank in each layout
BLANK = "□"  # stands for the other blanks of a passage while one is filled
CHID_CONTEXT = 64  # characters each side of the blank (CLUE's ChID baseline: max_seq_length 64 in all)


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
    blanks += [(m.group(), other(passage[:m.start()])[-CHID_CONTEXT:], other(passage[m.end():])[:CHID_CONTEXT])
               for m in _TAG.finditer(passage)]
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
      raise FormatError(path, line, f"a record in {layout}'s layout after {first_layout}'s (content a text: "
                                    "FewCLUE's; a list of passages: CLUE's)")
    candidates = files.field(path, line, record, "candidates", list)
    if len(candidates) != CHID_CANDIDATES[layout] or not all(isinstance(c, str) and c for c in candidates):
      raise FormatError(path, line, f"'candidates' should be {CHID_CANDIDATES[layout]} idioms ({layout}'s layout), "
                                    f"found {candidates!r}")
    blanks = _blanks(path, line, [content] if layout == "FewCLUE" else content)
    if layout == "FewCLUE":
      out.append(_fewclue_chid(path, line, record, blanks, tuple(candidates), labelled))
    elif answer is None and labelled:
      raise FormatError(path, line, f"no {pathlib.Path(path).stem}_answer.json beside it, where CLUE's layout "
                                    "keeps the answers (a labelled split needs them)")
    else:
      out += [ChidExample(line, tag, left, right, tuple(candidates),
                          None if answer is None else answer(tag, f"{path}:{line}")) for tag, left, right in blanks]
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
      raise FormatError(path, line_of(answers, tag), f"{tag}: answer {label!r} should be an index into the "
                                                     f"{count} candidates (an int from 0 to {count - 1})")
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
    rows_.append(with_specials(tokenizer, np.concatenate([left[len(left) - keep_left:], idiom, right[:keep_right]])))
  cut = len(left) + len(right) - keep_left - keep_right
  return {**rows(rows_, tokenizer.pad_id), "label": label_or_ignore(example.label)}, cut


def _chid_submission(examples, predictions) -> list[str]:
  """CLUE's layout: one JSON object {tag: index}; FewCLUE's: {"id", "answer"} per line."""
  if examples and examples[0].id.startswith("#idiom"):
    return [as_json({e.id: p for e, p in zip(examples, predictions, strict=True)})]
  return [as_json({"id": int(e.id), "answer": p}) for e, p in zip(examples, predictions, strict=True)]


CHID_LABELS = tuple(str(i) for i in range(CHID_CANDIDATES["CLUE"]))  # FewCLUE's 7 use the first 7
CHID = clue_task(
    "chid", ChidExample, "train.json (and train_answer.json)", "multiple-choice",
    split_files=split_files, read_split=read_split, heading="ChID", head="choice", labels=CHID_LABELS, max_length=2 + 2 * CHID_CONTEXT + 4,
    featurize=_chid_featurize, decode=lambda e, f, logits: argmax(logits[:len(e.candidates)]),
    score=_labelled_accuracy,
    main_metric="accuracy", baseline=constant_baseline(lambda e: e.label), submission_format="json",
    submission_name="chid11_predict.json", submission=_chid_submission, inserted_text=BLANK,
    inputs=("left", "right", "candidates"), show=lambda e, p, f, logits: {"answer": p, "idiom": e.candidates[p]})


TASKS = (CMRC2018, CHID, C3)  # CLUE's order

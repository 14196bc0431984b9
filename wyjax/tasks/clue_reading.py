"""CLUE's reading-comprehension tasks: CMRC 2018, ChID and C3 on CLUE's board.

- CMRC 2018: span extraction, exact match and F1 by its official rules (metrics.cmrc_scores).
- ChID and C3: multiple choice, accuracy.

Their files are read by clue_reading_files.py.
"""

import dataclasses
from collections.abc import Sequence

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics, spans
from wyjax.tasks.clue import clue_task
from wyjax.tasks.clue_reading_files import (
  BLANK,
  CHID_CANDIDATES,
  NO_SPAN,
  C3Example,
  ChidExample,
  CmrcExample,
  read_split,
  split_files,
)
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

# --- CMRC 2018: extractive reading comprehension (SQuAD v1.1 JSON) ------------------------------------------

CMRC_STRIDE = 128  # doc stride: tokens between the starts of a context's windows
MAX_ANSWER_TOKENS = 100  # the longest answer decoded: 96% of the trial file's answers are shorter


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


def _labelled_accuracy(examples, predictions) -> dict:
  scored = [(p, e.label) for e, p in zip(examples, predictions, strict=True) if e.label is not None]
  return {"accuracy": metrics.accuracy([p for p, _ in scored], [g for _, g in scored])}


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
  """CLUE's ChID decoding: the blanks of one record take distinct idioms, best-scoring pair first.

  A record is one line; its passages share the candidates. Ties go in idiom then blank order (CLUE's baseline's
  logits_matrix_to_array). A blank left over (more blanks than candidates) takes its own best.
  """
  predictions = [argmax(scores[: len(e.candidates)]) for e, scores in zip(examples, logits, strict=True)]
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

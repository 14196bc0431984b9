"""C-CLUE's tasks: features, decoding, C-CLUE's metrics and submissions, on its board and the Hub.

- `cclue_ner`: scored by C-CLUE's token macro F1 (run_NER.py), with entity-level micro F1 beside it.
- `cclue_re`: C-CLUE's predicate classification, of 25, from the text alone; accuracy (evaluate_classifiction.py's
  score for one predicate per line).
- `cclue_spo`: C-CLUE's triple extraction, its pipeline's second stage: the subject and object tagged in
  `[CLS] text [SEP] predicate [SEP]` for the predicate a `cclue_re` run predicted (evaluate_labeling.py's rules).
- `cclue_re_given_entities`: the predicate between a given subject and object marked in the text (「」, 『』):
  easier than C-CLUE's, not comparable with it.

Their files are read by cclue_files.py.
"""

import dataclasses
import functools

import numpy as np

from wyjax.core import checkpoints
from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics, tagging
from wyjax.tasks.cclue_files import (
  NER_LABELS,
  PREDICATES,
  SCORED_NER_LABELS,
  NerExample,
  RelationExample,
  read_split,
  split_files,
)
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import (
  Files,
  Task,
  argmax,
  as_json,
  classification_scores,
  constant_baseline,
  most_common,
  per_example,
  single,
  with_specials,
)

# --- NER ------------------------------------------------------------------------------------------------------

_NER_IDS = {label: i for i, label in enumerate(NER_LABELS)}


def _ner_featurize(example: NerExample, tokenizer, max_length):
  """The model's inputs, labelled with the label file's tags as written (as run_NER.py trains).

  IGNORE without a label file.
  """
  if not example.tagged:
    tags = np.full(len(example.text), IGNORE, np.int32)
  else:
    tags = np.array([_NER_IDS[t] for t in example.tags], np.int32)
  return tagging.tagging_inputs(tokenizer, example.text, tags, max_length)


def _ner_decode(example: NerExample, features, logits) -> tuple[str, ...]:
  """One predicted tag per character; 'O' for those without a token (whitespace, truncated)."""
  tags = tagging.char_tags(NER_LABELS, features, logits)
  return tuple(tags + ["O"] * (len(example.text) - len(tags)))


def token_macro_scores(predictions, gold) -> dict:
  """run_NER.py's metric: precision, recall and F1 per label of SCORED_NER_LABELS, averaged.

  Over all tokens, 0 where undefined, averaged over those labels (tf_metrics' 'macro').
  """
  predicted = np.concatenate([np.asarray(p) for p in predictions])
  expected = np.concatenate([np.asarray(g) for g in gold])
  per_label = []
  for label in SCORED_NER_LABELS:
    tp = np.sum((predicted == label) & (expected == label))
    n_pred, n_gold = np.sum(predicted == label), np.sum(expected == label)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    per_label.append((precision, recall, 2 * precision * recall / (precision + recall) if precision + recall else 0.0))
  precision, recall, f1 = (float(np.mean(column)) for column in zip(*per_label))
  return {"precision": precision, "recall": recall, "f1": f1}


def _ner_score(examples, predictions) -> dict:
  """C-CLUE's token macro scores (the main ones), then entity-level micro scores as entity_*.

  Both against the label file's tags as written; the entities are seqeval's chunks of the same tags.
  """
  gold = [e.tags for e in examples]
  entity = metrics.entity_scores(predictions, gold)
  return {**token_macro_scores(predictions, gold), **{f"entity_{k}": v for k, v in entity.items()}}


def _majority_tags(train, dev) -> list[tuple[str, ...]]:
  """Each dev character gets the tag it had most often in training ('O' if unseen)."""
  seen = {}
  for e in train:
    for char, tag in zip(e.text, e.tags):
      seen.setdefault(char, []).append(tag)
  return [tuple(most_common(seen[c]) if c in seen else "O" for c in e.text) for e in dev]


def _ner_notes(examples) -> list[str]:
  """The I-X tags that begin an entity (after O or another type), which seqeval reads as its start."""
  lines = [
    e.line
    for e in examples
    for i, tag in enumerate(e.tags)
    if tag.startswith("I-") and (i == 0 or e.tags[i - 1][2:] != tag[2:])
  ]
  if not lines:
    return []
  shown = sorted(set(lines))
  return [
    f"{len(lines)} I- tag(s) after O or another type (lines {shown[:10]}{' …' if len(shown) > 10 else ''}): "
    "scored as written by run_NER.py's token score, read as an entity's start for the entity score"
  ]


NER_FOLDER = Files(
  name="cclue_ner",
  example_type=NerExample,
  split_files=functools.partial(split_files, "cclue_ner"),
  read_split=functools.partial(read_split, "cclue_ner"),
  train_files="source.txt and target.txt (or train.txt and train-label.txt)",
)
RELATION_FOLDER = Files(
  name="cclue_re",
  example_type=RelationExample,
  split_files=functools.partial(split_files, "cclue_re"),
  read_split=functools.partial(read_split, "cclue_re"),
  train_files="train_data.json",
)
# Their places on the board and on the Hub.
_NER_PLACE = dict(board="classical", benchmark="C-CLUE", hub_dataset=("C-CLUE NER", "c-clue-ner"))
_RELATIONS_PLACE = dict(board="classical", benchmark="C-CLUE", hub_dataset=("C-CLUE relations", "c-clue-re"))

NER = Task(
  name="cclue_ner",
  files=NER_FOLDER,
  head="token",
  labels=NER_LABELS,
  max_length=512,
  featurize=_ner_featurize,
  decode=_ner_decode,
  score=_ner_score,
  main_metric="f1",
  baseline=_majority_tags,
  notes=_ner_notes,
  submission_format="txt",
  submission=per_example(lambda e, p: " ".join(p)),  # the label file's format
  heading="C-CLUE NER",
  hub_task_type="token-classification",
  **_NER_PLACE,
  inputs=("text",),
  long_text=True,
  show=lambda e, p, f, logits: {
    **tagging.entities(e.text, tagging.decode_spans(NER_LABELS, f, logits)),
    "tags": " ".join(p),
  },
)  # the label file's line, which the metric scores


# --- relations --------------------------------------------------------------------------------------------------


def _predicate_id(predicate: str) -> np.int32:
  if predicate not in PREDICATES:
    raise ValueError(f"predicate {predicate!r} is not one of C-CLUE's 25: {', '.join(PREDICATES)}")
  return np.int32(PREDICATES.index(predicate))


def _predicate_label(example: RelationExample) -> np.int32:
  return _predicate_id(example.predicate) if example.predicate else np.int32(IGNORE)


def _predicate_featurize(example: RelationExample, tokenizer: Tokenizer, max_length: int):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": _predicate_label(example)}, cut


RE = Task(
  name="cclue_re",
  files=RELATION_FOLDER,
  head="sequence",
  labels=PREDICATES,
  max_length=128,
  featurize=_predicate_featurize,
  decode=lambda e, f, logits: PREDICATES[argmax(logits)],
  score=lambda examples, predictions: classification_scores(predictions, [e.predicate for e in examples], PREDICATES),
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.predicate),
  submission_format="txt",
  submission=per_example(lambda e, p: p),
  submission_name="predicate_predict.txt",
  heading="C-CLUE RE",
  hub_task_type="text-classification",
  **_RELATIONS_PLACE,
  inputs=("text",),
)

# The gold-entity task marks the pair inside the text: 「subject」 and 『object』.
RELATION_MARKERS = "「」『』"


def entity_starts(example: RelationExample) -> dict[str, int]:
  """{role: start} of the subject and object in the text.

  The first occurrence of the longer, then the first of the other that does not overlap it (an object inside its
  subject, say 渊 in 公孙渊).
  """
  longer, shorter = sorted(("subject", "object"), key=lambda role: -len(getattr(example, role)))
  starts = {longer: example.text.index(getattr(example, longer))}
  start, end = starts[longer], starts[longer] + len(getattr(example, longer))
  other = getattr(example, shorter)
  position = example.text.find(other)
  while position >= 0 and position < end and position + len(other) > start:
    position = example.text.find(other, position + 1)
  if position < 0:
    raise ValueError(f"no occurrence of the {shorter} {other!r} outside the {longer} {getattr(example, longer)!r}")
  return {**starts, shorter: position}


def marked(example: RelationExample) -> str:
  """The text with its subject in 「」 and its object in 『』 (at `entity_starts`)."""
  starts = entity_starts(example)
  marks = {"subject": RELATION_MARKERS[:2], "object": RELATION_MARKERS[2:]}
  text = example.text
  for role in sorted(starts, key=starts.get, reverse=True):  # right to left: offsets stay valid
    begin, length = starts[role], len(getattr(example, role))
    text = text[:begin] + marks[role][0] + text[begin : begin + length] + marks[role][1] + text[begin + length :]
  return text


def _marked_featurize(example: RelationExample, tokenizer: Tokenizer, max_length: int):
  """[CLS] marked text [SEP]; a text too long is cut around both entities.

  The window of max_length − 2 tokens ends at the last marker (or starts at the first); when the entities are
  farther apart, half the window follows the first marker and half leads to the last.
  """
  ids = tokenizer.encode_chars(marked(example))[0]
  marker_ids = [tokenizer.token_to_id.get(m) for m in RELATION_MARKERS]
  if None in marker_ids:
    raise ValueError(f"the vocabulary has no token for the markers {RELATION_MARKERS!r}")
  positions = np.flatnonzero(np.isin(ids, marker_ids))
  room = max_length - 2
  if positions[-1] - positions[0] < room:
    start = min(positions[0], max(0, positions[-1] + 1 - room))
    kept = ids[start : start + room]
  else:
    kept = np.concatenate(
      [ids[positions[0] : positions[0] + room // 2], ids[positions[-1] + 1 - (room - room // 2) : positions[-1] + 1]]
    )
  return {"input_ids": with_specials(tokenizer, kept), "label": _predicate_label(example)}, len(ids) - len(kept)


def _triple(example: RelationExample, predicate: str) -> dict:
  return {
    "predicate": predicate,
    "object_type": example.object_type,
    "subject_type": example.subject_type,
    "object": example.object,
    "subject": example.subject,
  }


def triple_records(examples, predicates) -> list[dict]:
  """C-CLUE's triple format: one record per text, in order, its predicted triples in `spo_list` (a list)."""
  by_text = {}
  for e, p in zip(examples, predicates, strict=True):
    by_text.setdefault(e.text, []).append(_triple(e, p))
  return [{"text": text, "spo_list": triples} for text, triples in by_text.items()]


def _entity(name: str) -> str:
  return name.lower().strip("《》")  # evaluate_labeling.py's del_bookname(… .lower())


def triple_scores(gold_examples, records) -> dict:
  """evaluate_labeling.py's precision, recall and F1 of predicted triples (records of `triple_records`).

  Texts align by their text, a later line replacing an earlier one of the same text; a triple is (subject,
  predicate, object), entities lower-cased without 《》; only the gold file's texts count.
  """
  gold = {e.text: {(_entity(e.subject), e.predicate, _entity(e.object))} for e in gold_examples}
  predicted = {
    r["text"]: {(_entity(t["subject"]), t["predicate"], _entity(t["object"])) for t in r["spo_list"]} for r in records
  }
  correct = sum(len(triples & predicted.get(text, set())) for text, triples in gold.items())
  n_predicted = sum(len(predicted.get(text, set())) for text in gold)
  n_gold = sum(len(triples) for triples in gold.values())
  precision = correct / n_predicted if n_predicted else 0.0
  recall = correct / n_gold if n_gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"triple_precision": precision, "triple_recall": recall, "triple_f1": f1}


def _given_entities_score(examples, predictions) -> dict:
  scores = classification_scores(predictions, [e.predicate for e in examples], PREDICATES)
  return {**scores, **triple_scores(examples, triple_records(examples, predictions))}


RE_GIVEN_ENTITIES = Task(
  name="cclue_re_given_entities",
  files=RELATION_FOLDER,
  head="sequence",
  labels=PREDICATES,
  max_length=256,
  featurize=_marked_featurize,
  decode=lambda e, f, logits: PREDICATES[argmax(logits)],
  score=_given_entities_score,
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.predicate),
  submission_format="json",
  submission=lambda examples, predictions: [as_json(r) for r in triple_records(examples, predictions)],
  inserted_text=RELATION_MARKERS,
  config="cclue_re:given_entities",
  heading="C-CLUE RE (given entities)",
  hub_task_type="text-classification",
  **_RELATIONS_PLACE,
  inputs=("text", "subject", "object"),
)


# --- end-to-end triples: C-CLUE's pipeline, predicate classification then labelling -----------------------

SPO_LABELS = ("O", "B-SUB", "I-SUB", "B-OBJ", "I-OBJ")
_SPO_IDS = {label: i for i, label in enumerate(SPO_LABELS)}


def _spo_featurize(example: RelationExample, tokenizer: Tokenizer, max_length: int):
  """[CLS] text [SEP] predicate [SEP] (token types 0 | 1), the gold subject and object tagged in the text.

  The predicate is the given one, else the gold one; `predicate` holds its id, for decoding. The text's tail is
  cut to fit.
  """
  given = example.given_predicate or example.predicate
  if not given:
    raise ValueError(
      "no predicate to label the text for: give a cclue_re run's predictions "
      "(--config.predicates_from) for a file without predicates"
    )
  tags = np.zeros(len(example.text), np.int32)
  for role, start in entity_starts(example).items():
    kind = "SUB" if role == "subject" else "OBJ"
    tags[start] = _SPO_IDS[f"B-{kind}"]
    tags[start + 1 : start + len(getattr(example, role))] = _SPO_IDS[f"I-{kind}"]
  predicate = tokenizer.encode_chars(given)[0]
  text, cut = tagging.tagging_inputs(tokenizer, example.text, tags, max_length - len(predicate) - 1)
  width = len(predicate) + 1
  features = {
    "input_ids": np.concatenate([text["input_ids"], predicate, [tokenizer.sep_id]]).astype(np.int32),
    "token_type_ids": np.concatenate([np.zeros(len(text["input_ids"])), np.ones(width)]).astype(np.int32),
    "labels": np.concatenate([text["labels"], np.full(width, IGNORE)]).astype(np.int32),
    "char_index": np.concatenate([text["char_index"], np.full(width, -1)]).astype(np.int32),
    "predicate": _predicate_id(given),
  }
  if not example.predicate:  # an unlabelled record: predicted, never scored
    features["labels"] = np.full_like(features["labels"], IGNORE)
  return features, cut


def _spo_decode(example: RelationExample, features, logits) -> dict | None:
  """The triple of the first tagged subject and object, with the input's predicate; None if one is missing."""
  spans = tagging.decode_spans(SPO_LABELS, features, logits)
  found = {kind: example.text[start:end] for start, end, kind in reversed(spans)}  # the first of each kind
  if "SUB" not in found or "OBJ" not in found:
    return None
  return {"predicate": PREDICATES[int(features["predicate"])], "subject": found["SUB"], "object": found["OBJ"]}


def spo_records(examples, triples) -> list[dict]:
  """C-CLUE's end-to-end output: one record per text, in order, its distinct predicted triples in `spo_list`."""
  by_text = {}
  for e, triple in zip(examples, triples, strict=True):
    found = by_text.setdefault(e.text, [])
    if triple is not None and triple not in found:
      found.append(triple)
  return [{"text": text, "spo_list": found} for text, found in by_text.items()]


def given_predicates(splits: dict, run) -> dict:
  """The dev and test records with the predicates a cclue_re run (its workdir) predicted for them.

  The labeller's input in C-CLUE's pipeline; train keeps the gold ones.
  """
  best_run = checkpoints.best_run(run)
  out = dict(splits)
  for split in ("dev", "test"):
    if split not in splits:
      continue
    path = best_run / f"{split}_predictions.txt"
    predicted = path.read_text(encoding="utf-8").splitlines()
    if len(predicted) != len(splits[split]):
      raise ValueError(
        f"{path}: {len(predicted)} predicates for the {len(splits[split])} records of the {split} "
        "split: the cclue_re run was made on other files"
      )
    out[split] = [dataclasses.replace(e, given_predicate=p) for e, p in zip(splits[split], predicted)]
  return out


def _spo_prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  return task, (given_predicates(splits, config.predicates_from) if config.predicates_from else splits)


def _predicates_run(runs, out) -> dict:
  """In a suite, the labeller reads the predicates of the suite's own cclue_re run."""
  return {"predicates_from": str(out / RE.name)} if any(task.name == RE.name for task, _ in runs) else {}


SPO = Task(
  name="cclue_spo",
  files=RELATION_FOLDER,
  head="token",
  labels=SPO_LABELS,
  max_length=128,
  featurize=_spo_featurize,
  decode=_spo_decode,
  score=lambda examples, triples: triple_scores(examples, spo_records(examples, triples)),
  main_metric="triple_f1",
  baseline=lambda train, dev: [None] * len(dev),
  submission_format="json",
  submission=lambda examples, triples: [as_json(r) for r in spo_records(examples, triples)],
  # a cclue_re workdir: its dev and test predictions are the inputs (empty: the gold predicates)
  options={"predicates_from": ""},
  path_options=("predicates_from",),
  prepare=_spo_prepare,
  from_other_runs=_predicates_run,
  config="cclue_re:spo",
  heading="C-CLUE triples",
  hub_task_type="token-classification",
  **_RELATIONS_PLACE,
  inputs=("text", "given_predicate"),
)

TASKS = (NER, RE, SPO, RE_GIVEN_ENTITIES)  # the leaderboard's order

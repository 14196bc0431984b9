"""The fine-tuning tasks as the training loop sees them: WYWEB's nine, CCPM (two models),
C-CLUE NER and relations, and AC-EVAL.

A Task turns one example into model inputs (numpy, unpadded), one example's logits into a
prediction, predictions into the paper's metrics, and a prediction into a submission line
in the task's own format (docs/finetuning.md). Every text is encoded one token per visible
character (`Tokenizer.encode_chars`), so spans and tags stay aligned with the text.

Heads: 'sequence' (pooled [CLS] classifier), 'token' (per-token classifier), 'choice'
(one score per option), 'pair' (XuCi: [u; v; |u − v|] over span vectors), 'prefix_lm'
(WYWMT: the MLM head predicts the next token; predictions are generated text), 'match'
(CCPM Match: cosine similarity of separately encoded texts).

A split without gold labels (CCPM's and AC-EVAL's test files, an untagged C-CLUE test file)
gets label IGNORE: it is predicted, never scored.
"""
import collections
import dataclasses
import json
from collections.abc import Callable, Sequence

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import aceval, cclue, ccpm, metrics, tagging, wyweb
from wyjax.tasks.tagging import IGNORE

Features = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Task:
  name: str
  head: str
  labels: tuple[str, ...]  # the head's output classes (choice: the option indices)
  max_length: int  # the paper's max_seq_len
  # (example, tokenizer, max_length) → (features, characters cut by truncation)
  featurize: Callable[..., tuple[Features, int]]
  # (example, features, logits of that example) → prediction
  decode: Callable
  # (examples, predictions) → metrics; `main_metric` among them selects checkpoints
  score: Callable[[Sequence, Sequence], dict]
  main_metric: str
  submission_format: str  # "tsv" or "jsonl"
  # (example, prediction) → one line of the submission file
  submission_line: Callable[..., str]
  dataset: str = ""  # the folder format it reads, when not its own name (CCPM's two models share one)
  inserted_text: str = ""  # characters featurize adds to the text: a fresh vocabulary needs them

  @property
  def data(self) -> str:
    return self.dataset or self.name


def _with_specials(tokenizer: Tokenizer, ids: np.ndarray) -> np.ndarray:
  return np.concatenate([[tokenizer.cls_id], ids, [tokenizer.sep_id]]).astype(np.int32)


def _single(tokenizer: Tokenizer, text: str, max_length: int) -> tuple[Features, int]:
  ids = tokenizer.encode_chars(text)[0]
  room = max_length - 2
  return {"input_ids": _with_specials(tokenizer, ids[:room])}, max(0, len(ids) - room)


def _rows(rows: list[np.ndarray], pad_id: int, second_segment_from: int | None = None) -> Features:
  """Sequences as one [rows, longest] block (input_ids; with second_segment_from, token types
  1 from that position to each row's end)."""
  width = max(len(r) for r in rows)
  input_ids = np.full((len(rows), width), pad_id, np.int32)
  token_types = np.zeros((len(rows), width), np.int32)
  for i, row in enumerate(rows):
    input_ids[i, :len(row)] = row
    if second_segment_from is not None:
      token_types[i, second_segment_from:len(row)] = 1
  return {"input_ids": input_ids} if second_segment_from is None else {"input_ids": input_ids,
                                                                      "token_type_ids": token_types}


def _argmax(logits) -> int:
  return int(np.argmax(logits))


def _json(record: dict) -> str:
  return json.dumps(record, ensure_ascii=False)


# --- sequence classification: TLC, GJC, FSPC -----------------------------------------------------------

def _classification_scores(predictions, gold, num_classes: int) -> dict:
  return {"accuracy": metrics.accuracy(predictions, gold), "macro_f1": metrics.macro_f1(predictions, gold, num_classes)}


def _tlc_featurize(example: wyweb.TlcExample, tokenizer, max_length):
  features, cut = _single(tokenizer, example.text, max_length)
  return {**features, "label": np.int32(wyweb.TLC_DYNASTIES.index(example.dynasty))}, cut


def _tlc_decode(example, features, logits) -> tuple[str, str]:
  """(period, dynasty): the head predicts the dynasty, whose period follows (strict hierarchy),
  so a submission always passes the TLC reader."""
  dynasty = wyweb.TLC_DYNASTIES[_argmax(logits)]
  return wyweb.TLC_PERIOD_OF[dynasty], dynasty


def _tlc_score(examples, predictions) -> dict:
  dynasty = _classification_scores([wyweb.TLC_DYNASTIES.index(p[1]) for p in predictions],
                                   [wyweb.TLC_DYNASTIES.index(e.dynasty) for e in examples], len(wyweb.TLC_DYNASTIES))
  period = _classification_scores([wyweb.TLC_PERIODS.index(p[0]) for p in predictions],
                                  [wyweb.TLC_PERIODS.index(e.period) for e in examples], len(wyweb.TLC_PERIODS))
  return {**dynasty, **{f"period_{k}": v for k, v in period.items()}}


TLC = Task(
    "tlc", "sequence", wyweb.TLC_DYNASTIES, 512, _tlc_featurize, _tlc_decode, _tlc_score, "accuracy", "tsv",
    lambda e, p: f"{p[0]}\t{p[1]}\t{e.text}")


def _gjc_featurize(example: wyweb.GjcExample, tokenizer, max_length):
  features, cut = _single(tokenizer, example.text, max_length)
  return {**features, "label": np.int32(wyweb.GJC_COLLECTIONS.index(example.collection))}, cut


GJC = Task(
    "gjc", "sequence", wyweb.GJC_COLLECTIONS, 512, _gjc_featurize,
    lambda e, f, logits: wyweb.GJC_COLLECTIONS[_argmax(logits)],
    lambda examples, predictions: _classification_scores(
        [wyweb.GJC_COLLECTIONS.index(p) for p in predictions],
        [wyweb.GJC_COLLECTIONS.index(e.collection) for e in examples], len(wyweb.GJC_COLLECTIONS)),
    "accuracy", "tsv", lambda e, p: f"{p}\t{e.text}")


def fspc_line_examples(example: wyweb.FspcExample) -> list[wyweb.FspcExample]:
  """The toolkit's per-line examples: each verse line with its own sentiment."""
  return [dataclasses.replace(example, lines=(line,), holistic=sentiment, line_sentiments=())
          for line, sentiment in zip(example.lines, example.line_sentiments)]


def _fspc_featurize(example: wyweb.FspcExample, tokenizer, max_length):
  # The whole poem as the toolkit writes it: lines joined by '，', closed by '。'.
  text = "，".join(example.lines) + ("。" if len(example.lines) > 1 else "")
  features, cut = _single(tokenizer, text, max_length)
  return {**features, "label": np.int32(wyweb.FSPC_SENTIMENTS.index(example.holistic))}, cut


def _fspc_score(examples, predictions) -> dict:
  """Holistic (whole-poem) accuracy is the primary metric; with per-line examples the toolkit's
  mixed accuracy over poems and lines is reported beside it."""
  ids = lambda labels: [wyweb.FSPC_SENTIMENTS.index(x) for x in labels]
  poems = [i for i, e in enumerate(examples) if len(e.lines) > 1]
  scores = _classification_scores(ids([predictions[i] for i in poems]), ids([examples[i].holistic for i in poems]),
                                  len(wyweb.FSPC_SENTIMENTS))
  if len(poems) < len(examples):
    scores["accuracy_with_lines"] = metrics.accuracy(ids(predictions), ids([e.holistic for e in examples]))
  return scores


FSPC = Task(
    "fspc", "sequence", wyweb.FSPC_SENTIMENTS, 48, _fspc_featurize,
    lambda e, f, logits: wyweb.FSPC_SENTIMENTS[_argmax(logits)], _fspc_score, "accuracy", "jsonl",
    lambda e, p: _json({"poem": "|".join(e.lines), "title": e.title, "poet": e.poet, "dynasty": e.dynasty,
                        "sentiments": {"holistic": p}}))


# --- token classification: PUNC, GLNER ------------------------------------------------------------------

_PUNC_IDS = {label: i for i, label in enumerate(wyweb.PUNC_LABELS)}
_GLNER_IDS = {label: i for i, label in enumerate(wyweb.GLNER_LABELS)}


def _tagging(tokenizer, text, char_labels, max_length) -> tuple[Features, int]:
  f = tagging.tagging_features(tokenizer, text, char_labels, max_length)
  return {"input_ids": f.input_ids, "labels": f.labels, "char_index": f.char_index}, f.truncated_chars


def _char_tags(labels: tuple[str, ...], features: Features, logits) -> list[str]:
  """One predicted tag per character of the text ('O' where there is no token)."""
  tags = ["O"] * (int(features["char_index"].max()) + 1)
  for token, char in enumerate(features["char_index"]):
    if char >= 0:
      tags[char] = labels[_argmax(logits[token])]
  return tags


def _punc_decode(example: wyweb.PuncExample, features, logits) -> list[str]:
  tags = _char_tags(wyweb.PUNC_LABELS, features, logits)
  return tags + ["O"] * (len(example.text) - len(tags))


def _punc_score(examples, predictions) -> dict:
  ids = lambda tags: [_PUNC_IDS[t] for t in tags]
  return metrics.punctuation_f1(np.concatenate([ids(p) for p in predictions]),
                                np.concatenate([ids(e.labels) for e in examples]))


PUNC = Task(
    "punc", "token", wyweb.PUNC_LABELS, 512,
    lambda e, tokenizer, max_length: _tagging(tokenizer, e.text, [_PUNC_IDS[t] for t in e.labels], max_length),
    _punc_decode, _punc_score, "f1", "tsv",
    lambda e, p: f"{e.text}\t{''.join('O' if t == 'O' else t[2:] for t in p)}")


# Entity tasks (GLNER, C-CLUE NER): predictions are (start, end exclusive, type) spans.

def _decode_spans(labels: tuple[str, ...], features, logits) -> tuple[tuple[int, int, str], ...]:
  token_tags = ["O" if c < 0 else labels[_argmax(row)] for c, row in zip(features["char_index"], logits)]
  return tuple(tagging.spans_from_tags(token_tags, features["char_index"]))


def _span_tags(labels: tuple[str, ...], text: str, spans) -> list[str]:
  """One BIO tag (a string of labels) per character of text."""
  ids = {label: i for i, label in enumerate(labels)}
  return [labels[i] for i in tagging.bio_tags(len(text), spans, ids)]


def _entity_scores(labels: tuple[str, ...], examples, predictions) -> dict:
  return metrics.entity_scores([_span_tags(labels, e.text, p) for e, p in zip(examples, predictions)],
                               [_span_tags(labels, e.text, e.spans) for e in examples])


GLNER = Task(
    "glner", "token", wyweb.GLNER_LABELS, 512,
    lambda e, tokenizer, max_length: _tagging(tokenizer, e.text, tagging.bio_tags(len(e.text), e.spans, _GLNER_IDS),
                                              max_length),
    lambda e, f, logits: _decode_spans(wyweb.GLNER_LABELS, f, logits),
    lambda examples, predictions: _entity_scores(wyweb.GLNER_LABELS, examples, predictions), "f1", "jsonl",
    lambda e, p: _json({"text": e.text, "label": [list(span) for span in p]}))


# --- multiple choice: IRC, WYWRC --------------------------------------------------------------------------

def _choice_featurize(example: wyweb.ChoiceExample, tokenizer: Tokenizer, max_length: int, *, cut: str):
  """One row per option: [CLS] context [SEP] question [SEP] option [SEP] (token types 0 | 1).

  Truncation (WYWEB's rule): the `cut` part keeps its beginning and gets what the longest
  option, the other part and the four specials leave of max_length, the same for every option.
  """
  context, question = (tokenizer.encode_chars(t)[0] for t in (example.context, example.question))
  options = [tokenizer.encode_chars(o)[0] for o in example.options]
  longest = max(len(o) for o in options)
  kept = context if cut == "context" else question
  budget = max(0, max_length - 4 - longest - len(question if cut == "context" else context))
  truncated = max(0, len(kept) - budget)
  if cut == "context":
    context = context[:budget]
  else:
    question = question[:budget]
  first = _with_specials(tokenizer, context)
  rows = [np.concatenate([first, question, [tokenizer.sep_id], o, [tokenizer.sep_id]])[:max_length]
          for o in options]
  truncated += sum(len(first) + len(question) + len(o) + 2 - len(r) for o, r in zip(options, rows))
  return {**_rows(rows, tokenizer.pad_id, len(first)), "label": np.int32(example.label)}, truncated


def _choice_score(examples, predictions) -> dict:
  return {"accuracy": metrics.accuracy(predictions, [e.label for e in examples])}


_OPTIONS = ("0", "1", "2", "3")
IRC = Task(
    "irc", "choice", _OPTIONS, 256,
    lambda e, tokenizer, max_length: _choice_featurize(e, tokenizer, max_length, cut="question"),
    lambda e, f, logits: _argmax(logits), _choice_score, "accuracy", "jsonl",
    lambda e, p: _json({"idiom": e.context, "origin": e.question, "options": list(e.options), "label": p}))
WYWRC = Task(
    "wywrc", "choice", _OPTIONS, 512,
    lambda e, tokenizer, max_length: _choice_featurize(e, tokenizer, max_length, cut="context"),
    lambda e, f, logits: _argmax(logits), _choice_score, "accuracy", "jsonl",
    lambda e, p: _json({"article": e.context, "question": e.question,
                        **{f"option{i}": o for i, o in enumerate(e.options)}, "answer": str(p),
                        **({} if e.kind is None else {"type": e.kind})}))


# --- XuCi: the same function word in two sentences, same usage or not ---------------------------------------

def _xuci_featurize(example: wyweb.XuciExample, tokenizer: Tokenizer, max_length: int):
  rows, masks = [], []
  for text, (start, end) in ((example.text_a, example.span_a), (example.text_b, example.span_b)):
    ids, char_index = tokenizer.encode_chars(text)
    ids, char_index = ids[:max_length - 2], char_index[:max_length - 2]
    in_span = (char_index >= start) & (char_index <= end)
    if not in_span.any():
      raise ValueError(f"the word at characters {start}..{end} of {text!r} has no token within {max_length} tokens")
    rows.append(_with_specials(tokenizer, ids))
    masks.append(np.concatenate([[0.0], in_span, [0.0]]).astype(np.float32))
  features = _rows(rows, tokenizer.pad_id)
  span_mask = np.zeros(features["input_ids"].shape, np.float32)
  for i, mask in enumerate(masks):
    span_mask[i, :len(mask)] = mask
  return {**features, "span_mask": span_mask, "label": np.int32(example.same_usage)}, 0


XUCI = Task(
    "xuci", "pair", ("f", "t"), 96, _xuci_featurize, lambda e, f, logits: bool(_argmax(logits)),
    lambda examples, predictions: _classification_scores(
        [int(p) for p in predictions], [int(e.same_usage) for e in examples], 2),
    "accuracy", "tsv",
    lambda e, p: "\t".join([e.text_a, e.text_b, "%d, %d" % e.span_a, "%d, %d" % e.span_b, "t" if p else "f"]))


# --- WYWMT: classical → modern Chinese translation with a prefix LM ---------------------------------------------

def _wywmt_featurize(example: wyweb.MtExample, tokenizer: Tokenizer, max_length: int):
  """[CLS] source [SEP] target [SEP] (token types 0 | 1, wyjax.models.prefix_lm); labels: the
  next token from the source's [SEP] to the last target token, IGNORE elsewhere. A pair that
  does not fit loses characters from the end of its longer side, one at a time (the toolkit's
  rule; it also drops pairs over 510 characters, wyjax keeps them trimmed)."""
  source, target = (tokenizer.encode_chars(t)[0] for t in (example.source, example.target))
  kept_source, kept_target = len(source), len(target)
  while kept_source + kept_target > max_length - 3:
    if kept_source > kept_target:
      kept_source -= 1
    else:
      kept_target -= 1
  first = _with_specials(tokenizer, source[:kept_source])
  input_ids = np.concatenate([first, target[:kept_target], [tokenizer.sep_id]]).astype(np.int32)
  token_type_ids = (np.arange(len(input_ids)) >= len(first)).astype(np.int32)
  labels = np.full(len(input_ids), IGNORE, np.int32)
  labels[len(first) - 1:-1] = input_ids[len(first):]
  cut = len(source) - kept_source + len(target) - kept_target
  return {"input_ids": input_ids, "token_type_ids": token_type_ids, "labels": labels}, cut


WYWMT = Task(
    "wywmt", "prefix_lm", (), 512, _wywmt_featurize, lambda e, f, text: text,
    lambda examples, predictions: metrics.translation_scores(predictions, [e.target for e in examples]),
    "bleu", "tsv", lambda e, p: f"{e.source}\t{p}")


# --- CCPM: the verse line (of four) a modern-Chinese description translates -----------------------------------

def _answer(index: int | None):
  return np.int32(IGNORE if index is None else index)


def _ccpm_cls_featurize(example: ccpm.CcpmExample, tokenizer: Tokenizer, max_length: int):
  """The paper's Cls model: one row per line, [CLS] translation [SEP] line [SEP] (token types
  0 | 1); the translation loses its tail when the longest line would not fit."""
  translation = tokenizer.encode_chars(example.translation)[0]
  full = [tokenizer.encode_chars(c)[0] for c in example.choices]
  lines = [line[:max_length - 4] for line in full]
  room = max_length - 3 - max(len(line) for line in lines)
  first = _with_specials(tokenizer, translation[:room])
  rows = [np.concatenate([first, line, [tokenizer.sep_id]]) for line in lines]
  cut = max(0, len(translation) - room) + sum(len(f) - len(line) for f, line in zip(full, lines))
  return {**_rows(rows, tokenizer.pad_id, len(first)), "label": _answer(example.answer)}, cut


def _ccpm_match_featurize(example: ccpm.CcpmExample, tokenizer: Tokenizer, max_length: int):
  """The paper's Match model: the translation (row 0) and each line (rows 1-4) alone."""
  rows, cut = [], 0
  for text in (example.translation, *example.choices):
    features, lost = _single(tokenizer, text, max_length)
    rows.append(features["input_ids"])
    cut += lost
  return {**_rows(rows, tokenizer.pad_id), "label": _answer(example.answer)}, cut


def _ccpm_task(name: str, head: str, featurize) -> Task:
  return Task(
      name, head, _OPTIONS, 128, featurize, lambda e, f, logits: _argmax(logits),
      lambda examples, predictions: {"accuracy": metrics.accuracy(predictions, [e.answer for e in examples])},
      "accuracy", "jsonl",
      lambda e, p: _json({"translation": e.translation, "choices": list(e.choices), "answer": p}), dataset="ccpm")


CCPM = _ccpm_task("ccpm", "choice", _ccpm_cls_featurize)
CCPM_MATCH = _ccpm_task("ccpm_match", "match", _ccpm_match_featurize)


# --- C-CLUE: named entities and relations in the histories ----------------------------------------------------

_CCLUE_NER_IDS = {label: i for i, label in enumerate(cclue.NER_LABELS)}


def _cclue_ner_featurize(example: cclue.NerExample, tokenizer, max_length):
  tags = tagging.bio_tags(len(example.text), example.spans, _CCLUE_NER_IDS)
  features, cut = _tagging(tokenizer, example.text, tags, max_length)
  if not example.tagged:
    features["labels"] = np.full_like(features["labels"], IGNORE)
  return features, cut


CCLUE_NER = Task(
    "cclue_ner", "token", cclue.NER_LABELS, 512, _cclue_ner_featurize,
    lambda e, f, logits: _decode_spans(cclue.NER_LABELS, f, logits),
    lambda examples, predictions: _entity_scores(cclue.NER_LABELS, examples, predictions), "f1", "txt",
    lambda e, p: " ".join(_span_tags(cclue.NER_LABELS, e.text, p)))  # the label file's format

# Relation classification marks the pair inside the text: 「subject」 and 『object』.
RELATION_MARKERS = "「」『』"


def _marked(example: cclue.RelationExample) -> str:
  """The text with the first occurrence of the longer entity marked, then the first occurrence
  of the other that does not overlap it (an object inside its subject, say 渊 in 公孙渊)."""
  longer, shorter = sorted(("subject", "object"), key=lambda role: -len(getattr(example, role)))
  spans = {longer: example.text.index(getattr(example, longer))}
  start, end = spans[longer], spans[longer] + len(getattr(example, longer))
  other = getattr(example, shorter)
  position = example.text.find(other)
  while position >= 0 and position < end and position + len(other) > start:
    position = example.text.find(other, position + 1)
  if position < 0:
    raise ValueError(f"no occurrence of the {shorter} {other!r} outside the {longer} "
                     f"{getattr(example, longer)!r}")
  spans[shorter] = position
  marks = {"subject": RELATION_MARKERS[:2], "object": RELATION_MARKERS[2:]}
  text = example.text
  for role in sorted(spans, key=spans.get, reverse=True):  # right to left: offsets stay valid
    begin, length = spans[role], len(getattr(example, role))
    text = text[:begin] + marks[role][0] + text[begin:begin + length] + marks[role][1] + text[begin + length:]
  return text


def _relation_featurize(predicates: tuple[str, ...], example: cclue.RelationExample, tokenizer: Tokenizer,
                        max_length: int):
  """[CLS] marked text [SEP]. A text too long keeps both entities: the window of max_length − 2
  tokens that ends at the last marker (or starts at the first); when the entities are farther
  apart than that, half the window from the first marker on and half up to the last one."""
  ids = tokenizer.encode_chars(_marked(example))[0]
  marker_ids = [tokenizer.token_to_id.get(m) for m in RELATION_MARKERS]
  if None in marker_ids:
    raise ValueError(f"the vocabulary has no token for the markers {RELATION_MARKERS!r}")
  positions = np.flatnonzero(np.isin(ids, marker_ids))
  room = max_length - 2
  if positions[-1] - positions[0] < room:
    start = min(positions[0], max(0, positions[-1] + 1 - room))
    kept = ids[start:start + room]
  else:
    kept = np.concatenate([ids[positions[0]:positions[0] + room // 2],
                           ids[positions[-1] + 1 - (room - room // 2):positions[-1] + 1]])
  label = predicates.index(example.predicate) if example.predicate else IGNORE
  return {"input_ids": _with_specials(tokenizer, kept), "label": np.int32(label)}, len(ids) - len(kept)


def relation_task(predicates: tuple[str, ...]) -> Task:
  """C-CLUE relations over a predicate set (the benchmark fixes none: `for_data` takes them
  from the data)."""
  return Task(
      "cclue_re", "sequence", predicates, 256, lambda e, t, n: _relation_featurize(predicates, e, t, n),
      lambda e, f, logits: predicates[_argmax(logits)],
      lambda examples, predictions: _classification_scores(
          [predicates.index(p) for p in predictions], [predicates.index(e.predicate) for e in examples],
          len(predicates)),
      "accuracy", "jsonl",
      lambda e, p: _json({"text": e.text, "spo_list": {
          "predicate": p, "object_type": e.object_type, "subject_type": e.subject_type, "object": e.object,
          "subject": e.subject}}),
      inserted_text=RELATION_MARKERS)


# --- AC-EVAL: four-option questions in 13 subjects ----------------------------------------------------------

QUESTION_TAIL = 64  # tokens a cut question keeps from its end, where the question proper stands


def _aceval_featurize(example: aceval.Question, tokenizer: Tokenizer, max_length: int):
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
  first = _with_specials(tokenizer, question)
  rows = [np.concatenate([first, o, [tokenizer.sep_id]]) for o in options]
  cut = len(whole_question) - len(question) + sum(len(f) - len(o) for f, o in zip(full, options))
  label = aceval.LETTERS.index(example.answer) if example.answer else None
  return {**_rows(rows, tokenizer.pad_id, len(first)), "label": _answer(label)}, cut


def aceval_scores(examples, predictions) -> dict:
  """Accuracy per subject and per category (the mean of its subjects present), `average` the
  mean of the categories (the AC-EVAL paper's Average), `accuracy` over all questions."""
  correct = {}
  for e, p in zip(examples, predictions, strict=True):
    correct.setdefault(e.subject, []).append(e.answer == p)
  subjects = {s: float(np.mean(c)) for s, c in correct.items()}
  categories = {}
  for category, members in aceval.CATEGORIES.items():
    present = [subjects[s] for s in members if s in subjects]
    if present:
      categories[category] = float(np.mean(present))
  return {"accuracy": metrics.accuracy([aceval.LETTERS.index(p) for p in predictions],
                                       [aceval.LETTERS.index(e.answer) for e in examples]),
          "average": float(np.mean(list(categories.values()))),
          **{f"category/{c}": v for c, v in categories.items()}, **{f"subject/{s}": v for s, v in subjects.items()}}


ACEVAL = Task(
    "aceval", "choice", aceval.LETTERS, 512, _aceval_featurize, lambda e, f, logits: aceval.LETTERS[_argmax(logits)],
    aceval_scores, "average", "jsonl",
    lambda e, p: _json({"subject": e.subject, "id": e.row_id, "answer": p}))


TASKS = {t.name: t for t in (TLC, GJC, FSPC, PUNC, GLNER, IRC, WYWRC, XUCI, WYWMT, CCPM, CCPM_MATCH, CCLUE_NER,
                             relation_task(()), ACEVAL)}


def for_data(task: Task, splits: dict) -> Task:
  """The task with the label set its data defines, where the benchmark fixes none (C-CLUE
  relations: the predicates of train and dev, sorted, so a dev predicate unseen in training
  is scored, never an error)."""
  if task.name != "cclue_re":
    return task
  return relation_task(tuple(sorted({e.predicate for split in ("train", "dev") for e in splits.get(split, ())})))


def _majority_tags(train, dev) -> list[tuple]:
  """Each dev character gets the tag it had most often in training ('O' if unseen); the spans
  of those tags."""
  seen = collections.defaultdict(collections.Counter)
  for e in train:
    for char, tag in zip(e.text, _span_tags(cclue.NER_LABELS, e.text, e.spans)):
      seen[char][tag] += 1
  tags = [[seen[c].most_common(1)[0][0] if c in seen else "O" for c in e.text] for e in dev]
  return [tuple(sorted((s, t + 1, kind) for kind, s, t in metrics.chunks(t))) for t in tags]


def majority_baseline(task: Task, train, dev) -> dict:
  """The dev metrics of always predicting the train split's most frequent label (PUNC and
  GLNER: every character 'O', which scores F1 0; C-CLUE NER: each character's most frequent
  training tag; WYWMT: copying the source, a floor well above zero since classical and modern
  Chinese share many characters; AC-EVAL: chance, 0.25, since its only labelled questions are
  the few-shot training set)."""
  def most_common(values):
    values = list(values)
    return max(set(values), key=values.count)

  if task.name == "aceval":
    return {k: 0.25 for k in task.score(dev, [e.answer for e in dev])}
  if task.name == "cclue_ner":
    return task.score(dev, _majority_tags(train, dev))
  if task.name == "punc":
    return task.score(dev, [["O"] * len(e.text) for e in dev])
  if task.name == "glner":
    return task.score(dev, [() for _ in dev])
  if task.name == "wywmt":
    return task.score(dev, [e.source for e in dev])
  if task.name == "tlc":
    prediction = (most_common(e.period for e in train), most_common(e.dynasty for e in train))
  else:
    label_of = {"gjc": lambda e: e.collection, "fspc": lambda e: e.holistic, "irc": lambda e: e.label,
                "wywrc": lambda e: e.label, "xuci": lambda e: e.same_usage, "ccpm": lambda e: e.answer,
                "ccpm_match": lambda e: e.answer, "cclue_re": lambda e: e.predicate}[task.name]
    prediction = most_common(label_of(e) for e in train)
  return task.score(dev, [prediction] * len(dev))

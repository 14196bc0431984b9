"""WYWEB's nine tasks: features, decoding, the toolkit's metrics and submission lines, on its board and the Hub.

Their file formats are read by wyweb_files.py.
"""

import dataclasses
import functools

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics, tagging
from wyjax.tasks.punctuation import decoded_tags, mark_scores, punctuated, tag_features, unpunctuated
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import (
  OPTIONS,
  Files,
  Task,
  argmax,
  as_json,
  choice_accuracy,
  choice_rows,
  classification_scores,
  constant_baseline,
  label_in,
  label_or_ignore,
  most_common,
  pair,
  per_example,
  rows,
  single,
  with_specials,
)
from wyjax.tasks.wyweb_files import (
  EXTENSIONS,
  FSPC_SENTIMENTS,
  GJC_COLLECTIONS,
  GLNER_LABELS,
  PUNC_LABELS,
  TLC_DYNASTIES,
  TLC_PERIOD_OF,
  TLC_PERIODS,
  ChoiceExample,
  FspcExample,
  GjcExample,
  GlnerExample,
  MtExample,
  PuncExample,
  TlcExample,
  XuciExample,
  read_split,
  split_files,
)


def _wyweb_task(name: str, example_type, hub_task_type: str, **fields) -> Task:
  """A WYWEB task: its folder's format, and its place on the WYWEB board and on the Hub."""
  files = Files(
    name=name,
    example_type=example_type,
    split_files=functools.partial(split_files, name),
    read_split=functools.partial(read_split, name),
    train_files=f"train.{{{','.join(EXTENSIONS[name])}}}",
  )
  return Task(
    name=name,
    files=files,
    board="wyweb",
    benchmark="WYWEB",
    hub_task_type=hub_task_type,
    hub_dataset=(f"WYWEB {name.upper()}", f"wyweb-{name}"),
    **fields,
  )


# --- sequence classification: TLC, GJC, FSPC -----------------------------------------------------------


def _tlc_featurize(example: TlcExample, tokenizer, max_length):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": label_in(TLC_DYNASTIES, example.dynasty)}, cut


def _tlc_decode(example, features, logits) -> tuple[str, str]:
  """(period, dynasty): the predicted dynasty and its period, so a submission always passes the TLC reader."""
  dynasty = TLC_DYNASTIES[argmax(logits)]
  return TLC_PERIOD_OF[dynasty], dynasty


def _tlc_score(examples, predictions) -> dict:
  dynasty = classification_scores([p[1] for p in predictions], [e.dynasty for e in examples], TLC_DYNASTIES)
  period = classification_scores([p[0] for p in predictions], [e.period for e in examples], TLC_PERIODS)
  return {**dynasty, **{f"period_{k}": v for k, v in period.items()}}


def _tlc_baseline(train, dev) -> list:
  return [(most_common(e.period for e in train), most_common(e.dynasty for e in train))] * len(dev)


TLC = _wyweb_task(
  "tlc",
  TlcExample,
  "text-classification",
  head="sequence",
  labels=TLC_DYNASTIES,
  max_length=512,
  featurize=_tlc_featurize,
  decode=_tlc_decode,
  score=_tlc_score,
  main_metric="accuracy",
  baseline=_tlc_baseline,
  submission_format="tsv",
  submission=per_example(lambda e, p: f"{p[0]}\t{p[1]}\t{e.text}"),
  board_note=lambda results: f"dynasty, 7 classes; period accuracy {100 * results['dev']['period_accuracy']:.2f}",
  inputs=("text",),
  show=lambda e, p, f, logits: {"period": p[0], "dynasty": p[1]},
)


def _gjc_featurize(example: GjcExample, tokenizer, max_length):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": label_in(GJC_COLLECTIONS, example.collection)}, cut


GJC = _wyweb_task(
  "gjc",
  GjcExample,
  "text-classification",
  head="sequence",
  labels=GJC_COLLECTIONS,
  max_length=512,
  featurize=_gjc_featurize,
  decode=lambda e, f, logits: GJC_COLLECTIONS[argmax(logits)],
  score=lambda examples, predictions: classification_scores(
    predictions, [e.collection for e in examples], GJC_COLLECTIONS
  ),
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.collection),
  submission_format="tsv",
  submission=per_example(lambda e, p: f"{p}\t{e.text}"),
  inputs=("text",),
)


def fspc_scoring_set(poems: list[FspcExample]) -> list[FspcExample]:
  """The toolkit's example set: every poem, then each poem's lines as examples with their own sentiments."""
  return poems + [
    dataclasses.replace(poem, lines=(line,), holistic=sentiment, line_sentiments=())
    for poem in poems
    for line, sentiment in zip(poem.lines, poem.line_sentiments)
  ]


def _fspc_prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  """The toolkit scores poems and their lines; training uses both too unless train_on_lines is off."""
  return task, {
    split: examples if split == "train" and not config.train_on_lines else fspc_scoring_set(examples)
    for split, examples in splits.items()
  }


def _fspc_featurize(example: FspcExample, tokenizer, max_length):
  # The whole poem as the toolkit writes it: lines joined by '，', closed by '。'.
  text = "，".join(example.lines) + ("。" if len(example.lines) > 1 else "")
  features, cut = single(tokenizer, text, max_length)
  return {**features, "label": label_in(FSPC_SENTIMENTS, example.holistic)}, cut


FSPC_TOOLKIT_CLASSES = 10  # the toolkit's macro-F1 averages over label ids range(10), 5 of them unused


def _fspc_score(examples, predictions) -> dict:
  """The toolkit's metrics over its scoring set (poems and their lines), and the same over whole poems.

  `macro_f1` averages over 10 label ids as the toolkit's code does; `poem_macro_f1` over the 5 sentiments.
  """
  ids = lambda labels: [FSPC_SENTIMENTS.index(x) for x in labels]
  predicted, gold = ids(predictions), ids(e.holistic for e in examples)
  poems = [i for i, e in enumerate(examples) if len(e.lines) > 1]
  poem_scores = classification_scores(
    [predictions[i] for i in poems], [examples[i].holistic for i in poems], FSPC_SENTIMENTS
  )
  return {
    "accuracy": metrics.accuracy(predicted, gold),
    "macro_f1": metrics.macro_f1(predicted, gold, FSPC_TOOLKIT_CLASSES),
    **{f"poem_{k}": v for k, v in poem_scores.items()},
  }


FSPC = _wyweb_task(
  "fspc",
  FspcExample,
  "text-classification",
  head="sequence",
  labels=FSPC_SENTIMENTS,
  max_length=48,
  featurize=_fspc_featurize,
  decode=lambda e, f, logits: FSPC_SENTIMENTS[argmax(logits)],
  score=_fspc_score,
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.holistic),
  submission_format="jsonl",
  submission=lambda examples, predictions: [  # whole poems: the released files' records
    as_json(
      {"poem": "|".join(e.lines), "title": e.title, "poet": e.poet, "dynasty": e.dynasty, "sentiments": {"holistic": p}}
    )
    for e, p in zip(examples, predictions)
    if len(e.lines) > 1
  ],
  options={"train_on_lines": True},
  prepare=_fspc_prepare,
  inputs=("lines",),
)


# --- token classification: PUNC, GLNER ------------------------------------------------------------------

_GLNER_IDS = {label: i for i, label in enumerate(GLNER_LABELS)}
TOOLKIT_PUNC_CHARS = 510  # the toolkit cuts PUNC texts (and their tags) to max_seq_len − 2 before scoring


def punc_task(score_chars: int = 0) -> Task:
  """PUNC, scored over whole texts (score_chars 0) or over each text's first score_chars characters.

  Over whole texts, a mark after a character the model never saw counts as missed; TOOLKIT_PUNC_CHARS is the
  toolkit's cut.
  """
  return _wyweb_task(
    "punc",
    PuncExample,
    "token-classification",
    head="token",
    labels=PUNC_LABELS,
    max_length=512,
    featurize=tag_features,
    decode=decoded_tags,
    score=lambda examples, predictions: mark_scores(examples, predictions, score_chars),
    main_metric="f1",
    baseline=lambda train, dev: [["O"] * len(e.text) for e in dev],  # F1 0
    submission_format="tsv",
    submission=per_example(lambda e, p: f"{e.text}\t{''.join('O' if t == 'O' else t[2:] for t in p)}"),
    options={"score_chars": score_chars},
    prepare=_punc_prepare,
    inputs=("text",),
    long_text=True,
    unmarked=unpunctuated,
    show=lambda e, p, f, logits: punctuated(e.text, p),
  )


def _punc_prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  return (punc_task(config.score_chars) if config.score_chars else task), splits


PUNC = punc_task()

GLNER = _wyweb_task(
  "glner",
  GlnerExample,
  "token-classification",
  head="token",
  labels=GLNER_LABELS,
  max_length=512,
  featurize=lambda e, tokenizer, max_length: tagging.tagging_inputs(
    tokenizer, e.text, tagging.bio_tags(len(e.text), e.spans, _GLNER_IDS), max_length
  ),
  decode=lambda e, f, logits: tagging.decode_spans(GLNER_LABELS, f, logits),
  score=lambda examples, predictions: tagging.entity_scores(GLNER_LABELS, examples, predictions),
  main_metric="f1",
  baseline=lambda train, dev: [() for _ in dev],  # F1 0
  submission_format="jsonl",
  submission=per_example(lambda e, p: as_json({"text": e.text, "label": [list(span) for span in p]})),
  inputs=("text",),
  long_text=True,
  show=lambda e, p, f, logits: tagging.entities(e.text, p),
)


# --- multiple choice: IRC, WYWRC --------------------------------------------------------------------------


def _choice_featurize(example: ChoiceExample, tokenizer: Tokenizer, max_length: int, cut: str):
  features, truncated = choice_rows(tokenizer, example.context, example.question, example.options, max_length, cut)
  return {**features, "label": label_or_ignore(example.label)}, truncated


def _choice_task(name: str, max_length: int, cut: str, submission_line) -> Task:
  return _wyweb_task(
    name,
    ChoiceExample,
    "multiple-choice",
    head="choice",
    labels=OPTIONS,
    max_length=max_length,
    featurize=lambda e, tokenizer, n: _choice_featurize(e, tokenizer, n, cut),
    decode=lambda e, f, logits: argmax(logits),
    score=choice_accuracy,
    main_metric="accuracy",
    baseline=constant_baseline(lambda e: e.label),
    submission_format="jsonl",
    submission=per_example(submission_line),
    inputs=("context", "question", "options"),
    show=lambda e, p, f, logits: {"answer": p, "option": e.options[p]},
  )


IRC = _choice_task(
  "irc",
  256,
  "question",
  lambda e, p: as_json({"idiom": e.context, "origin": e.question, "options": list(e.options), "label": p}),
)
WYWRC = _choice_task(
  "wywrc",
  512,
  "context",
  lambda e, p: as_json(
    {
      "article": e.context,
      "question": e.question,
      **{f"option{i}": o for i, o in enumerate(e.options)},
      "answer": str(p),
      **({} if e.kind is None else {"type": e.kind}),
    }
  ),
)


# --- XuCi: the same function word in two sentences, same usage or not ---------------------------------------


def _xuci_featurize(example: XuciExample, tokenizer: Tokenizer, max_length: int):
  sequences, masks = [], []
  for text, (start, end) in ((example.text_a, example.span_a), (example.text_b, example.span_b)):
    ids, char_index = tokenizer.encode_chars(text)
    ids, char_index = ids[: max_length - 2], char_index[: max_length - 2]
    in_span = (char_index >= start) & (char_index <= end)
    if not in_span.any():
      raise ValueError(f"the word at characters {start}..{end} of {text!r} has no token within {max_length} tokens")
    sequences.append(with_specials(tokenizer, ids))
    masks.append(np.concatenate([[0.0], in_span, [0.0]]).astype(np.float32))
  features = rows(sequences, tokenizer.pad_id)
  span_mask = np.zeros(features["input_ids"].shape, np.float32)
  for i, mask in enumerate(masks):
    span_mask[i, : len(mask)] = mask
  return {**features, "span_mask": span_mask, "label": np.int32(example.same_usage)}, 0


XUCI = _wyweb_task(
  "xuci",
  XuciExample,
  "text-classification",
  head="span_pair",
  heading="XuCi",
  labels=("f", "t"),
  max_length=96,
  featurize=_xuci_featurize,
  decode=lambda e, f, logits: bool(argmax(logits)),
  score=lambda examples, predictions: classification_scores(
    predictions, [e.same_usage for e in examples], (False, True)
  ),
  main_metric="accuracy",
  baseline=constant_baseline(lambda e: e.same_usage),
  submission_format="tsv",
  submission=per_example(
    lambda e, p: "\t".join(
      [e.text_a, e.text_b, f"{e.span_a[0]}, {e.span_a[1]}", f"{e.span_b[0]}, {e.span_b[1]}", "t" if p else "f"]
    )
  ),
  inputs=("text_a", "span_a", "text_b", "span_b"),
  show=lambda e, p, f, logits: {"same_usage": p},
)


# --- WYWMT: classical → modern Chinese translation with a prefix LM ---------------------------------------------


def _wywmt_featurize(example: MtExample, tokenizer: Tokenizer, max_length: int):
  """[CLS] source [SEP] target [SEP] (token types 0 | 1), labelled with the next token of the target.

  Labels run from the source's [SEP] to the last target token, IGNORE elsewhere. A pair that does not fit loses
  characters from the end of its longer side, one at a time (the toolkit's rule; the toolkit also drops pairs
  over 510 characters, wyjax keeps them trimmed).
  """
  features, cut = pair(tokenizer, example.source, example.target, max_length)
  input_ids = features["input_ids"]
  first = int(np.argmax(features["token_type_ids"]))  # [CLS] source [SEP]
  labels = np.full(len(input_ids), IGNORE, np.int32)
  labels[first - 1 : -1] = input_ids[first:]
  return {**features, "labels": labels}, cut


def _teacher_forced_scores(tokenizer, features, predicted) -> dict:
  """The WYWEB toolkit's teacher-forced WYWMT scores, comparable with the paper's.

  The argmax at each target position given the gold prefix, its tokens (with the closing [SEP]) joined by spaces,
  is scored against the gold tokens likewise.
  """
  as_text = lambda ids: " ".join(tokenizer.vocab[i] for i in ids)
  scored = [f["labels"] != IGNORE for f in features]
  scores = metrics.translation_scores(
    [as_text(p[s]) for p, s in zip(predicted, scored)],
    [as_text(f["labels"][s]) for f, s in zip(features, scored)],
    tokenized=True,
  )
  return {f"teacher_forced_{k}": v for k, v in scores.items()}


WYWMT = _wyweb_task(
  "wywmt",
  MtExample,
  "translation",
  head="prefix_lm",
  labels=(),
  max_length=512,
  featurize=_wywmt_featurize,
  decode=lambda e, f, text: text,
  score=lambda examples, predictions: metrics.translation_scores(predictions, [e.target for e in examples]),
  main_metric="bleu",
  # Copying the source: a floor well above zero, since classical and modern Chinese share many characters.
  baseline=lambda train, dev: [e.source for e in dev],
  submission_format="tsv",
  submission=per_example(lambda e, p: f"{e.source}\t{p}"),
  forced_scores=_teacher_forced_scores,
  averaged=False,
  inputs=("source",),
  show=lambda e, p, f, text: p,
  # Checkpoints are chosen on greedy translations; the final ones use this beam search.
  options={"decoding": {"beam_size": 4, "length_penalty": 0.6, "max_ratio": 2.0, "max_extra": 32}},
)

TASKS = (PUNC, GLNER, GJC, TLC, FSPC, XUCI, IRC, WYWRC, WYWMT)  # the leaderboard's order

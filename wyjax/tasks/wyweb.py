"""WYWEB's nine tasks: their original file formats (as the WYWEB toolkit reads them,
wyweb_toolkit_spec.md), features, decoding, the toolkit's metrics and submission lines.

Every example keeps the line it came from. Nothing is dropped: a malformed record is a
FormatError naming the file and line.
"""
import dataclasses
import functools
import pathlib

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import files, metrics, tagging
from wyjax.tasks.files import FormatError
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import (OPTIONS, Files, Task, argmax, as_json, choice_accuracy, choice_rows, classification_scores,
                              constant_baseline, most_common, pair, per_example, rows, single, with_specials)

TLC_PERIODS = ("远古", "中古", "近古")
TLC_DYNASTIES = ("先秦", "两汉", "魏晋南北朝", "唐", "宋", "元明", "清")
TLC_PERIOD_OF = {"先秦": "远古", "两汉": "远古", "魏晋南北朝": "中古", "唐": "中古", "宋": "中古",
                 "元明": "近古", "清": "近古"}
GJC_COLLECTIONS = ("儒藏", "诗藏", "佛藏", "易藏", "医藏", "艺藏", "子藏", "集藏", "道藏", "史藏")
PUNC_MARKS = ("。", "？", "！", "，", "、", "；", "：", "|")
PUNC_LABELS = ("O",) + tuple(f"S-{m}" for m in PUNC_MARKS)
GLNER_TYPES = ("noun_other", "noun_bookname")
GLNER_LABELS = ("O",) + tuple(f"{p}-{t}" for t in GLNER_TYPES for p in ("B", "I"))
FSPC_SENTIMENTS = ("negative", "implicit negative", "neutral", "implicit positive", "positive")

# Accepted file names per task, in order of preference.
EXTENSIONS = {
    "tlc": ("tsv", "txt"), "gjc": ("tsv", "txt"), "punc": ("tsv", "txt"), "glner": ("jsonl", "json"),
    "fspc": ("json", "jsonl"), "xuci": ("tsv", "txt"), "irc": ("json", "jsonl"), "wywrc": ("json", "jsonl"),
    "wywmt": ("tsv", "txt"),
}


@dataclasses.dataclass(frozen=True)
class TlcExample:
  line: int
  text: str
  period: str
  dynasty: str


@dataclasses.dataclass(frozen=True)
class GjcExample:
  line: int
  text: str
  collection: str


@dataclasses.dataclass(frozen=True)
class PuncExample:
  line: int
  text: str
  # One label per character of text: "O" or "S-<mark that follows the character>".
  labels: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class GlnerExample:
  line: int
  text: str
  # (start, end exclusive, type), character offsets into text.
  spans: tuple[tuple[int, int, str], ...]


@dataclasses.dataclass(frozen=True)
class FspcExample:
  line: int
  lines: tuple[str, ...]  # the four verse lines
  holistic: str
  line_sentiments: tuple[str, ...]
  title: str
  poet: str
  dynasty: str


@dataclasses.dataclass(frozen=True)
class XuciExample:
  line: int
  text_a: str
  text_b: str
  span_a: tuple[int, int]  # inclusive character indices
  span_b: tuple[int, int]
  same_usage: bool


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
  """IRC (context = idiom, question = origin) and WYWRC (context = article)."""
  line: int
  context: str
  question: str
  options: tuple[str, ...]
  label: int
  kind: int | None = None  # WYWRC question type


@dataclasses.dataclass(frozen=True)
class MtExample:
  line: int
  source: str
  target: str


def _check(condition: bool, path, line: int, message: str):
  if not condition:
    raise FormatError(path, line, message)


def _nonempty(path, line, value: str, what: str) -> str:
  _check(bool(value.strip()), path, line, f"empty {what}")
  return value


def read_tlc(path) -> list[TlcExample]:
  out = []
  for line, (period, dynasty, text) in files.tsv_rows(path, 3):
    _check(dynasty in TLC_PERIOD_OF, path, line, f"unknown dynasty {dynasty!r}; expected one of {TLC_DYNASTIES}")
    _check(TLC_PERIOD_OF[dynasty] == period, path, line,
           f"period {period!r} does not contain dynasty {dynasty!r} (expected {TLC_PERIOD_OF[dynasty]!r})")
    out.append(TlcExample(line, _nonempty(path, line, text, "text"), period, dynasty))
  return out


def read_gjc(path) -> list[GjcExample]:
  out = []
  for line, (collection, text) in files.tsv_rows(path, 2):
    _check(collection in GJC_COLLECTIONS, path, line,
           f"unknown collection {collection!r}; expected one of {GJC_COLLECTIONS}")
    out.append(GjcExample(line, _nonempty(path, line, text, "text"), collection))
  return out


def read_punc(path) -> list[PuncExample]:
  out = []
  for line, (text, tags) in files.tsv_rows(path, 2):
    _check(len(text) == len(tags), path, line, f"text has {len(text)} characters but the tag string {len(tags)}")
    bad = sorted({t for t in tags if t != "O" and t not in PUNC_MARKS})
    _check(not bad, path, line, f"unknown tags {bad}; expected O or one of {PUNC_MARKS}")
    out.append(PuncExample(line, _nonempty(path, line, text, "text"),
                           tuple("O" if t == "O" else f"S-{t}" for t in tags)))
  return out


def read_glner(path) -> list[GlnerExample]:
  out = []
  for line, record in files.json_records(path):
    text = files.field(path, line, record, "text", str)
    spans = []
    previous_end = 0
    for item in files.field(path, line, record, "label", list):
      _check(isinstance(item, list) and len(item) == 3, path, line, f"label entry {item!r} is not [start, end, type]")
      start, end, kind = item
      _check(all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)), path, line,
             f"span offsets {start!r}, {end!r} are not integers")
      _check(0 <= start < end <= len(text), path, line,
             f"span [{start}, {end}) is outside the text of {len(text)} characters or empty")
      _check(kind in GLNER_TYPES, path, line, f"unknown entity type {kind!r}; expected one of {GLNER_TYPES}")
      _check(start >= previous_end, path, line, f"span [{start}, {end}) overlaps or precedes the previous one")
      previous_end = end
      spans.append((start, end, kind))
    out.append(GlnerExample(line, text, tuple(spans)))
  return out


def read_fspc(path) -> list[FspcExample]:
  out = []
  for line, record in files.json_records(path):
    poem = files.field(path, line, record, "poem", str)
    verses = tuple(poem.split("|"))
    _check(len(verses) == 4 and all(v.strip() for v in verses), path, line,
           f"poem should be four '|'-separated lines, found {len(verses)}")
    sentiments = files.field(path, line, record, "sentiments", dict)
    keys = ("holistic", "line1", "line2", "line3", "line4")
    values = []
    for key in keys:
      value = files.field(path, line, sentiments, key, str)
      _check(value in FSPC_SENTIMENTS, path, line, f"sentiment {key}={value!r}; expected one of {FSPC_SENTIMENTS}")
      values.append(value)
    out.append(FspcExample(line, verses, values[0], tuple(values[1:]), str(record.get("title", "")),
                           str(record.get("poet", "")), str(record.get("dynasty", ""))))
  return out


def _span(path, line, value: str, text: str, which: str) -> tuple[int, int]:
  try:
    start, end = (int(x) for x in value.split(","))
  except ValueError:
    raise FormatError(path, line, f"position {which} {value!r} is not 'start, end'") from None
  _check(0 <= start <= end < len(text), path, line,
         f"position {which} {value!r} is outside sentence {which} of {len(text)} characters")
  return start, end


def read_xuci(path) -> list[XuciExample]:
  out = []
  for line, (a, b, pos_a, pos_b, label) in files.tsv_rows(path, 5):
    _check(label in ("t", "f"), path, line, f"label {label!r}; expected 't' or 'f'")
    out.append(XuciExample(line, a, b, _span(path, line, pos_a, a, "A"), _span(path, line, pos_b, b, "B"),
                           label == "t"))
  return out


def _options(path, line, options) -> tuple[str, ...]:
  _check(isinstance(options, list) and len(options) == 4 and all(isinstance(o, str) for o in options),
         path, line, "expected 4 option strings")
  return tuple(options)


def read_irc(path) -> list[ChoiceExample]:
  out = []
  for line, record in files.json_records(path):
    options = _options(path, line, files.field(path, line, record, "options", list))
    label = files.field(path, line, record, "label", int)
    _check(0 <= label < 4, path, line, f"label {label} is not in 0..3")
    out.append(ChoiceExample(line, files.field(path, line, record, "idiom", str),
                             files.field(path, line, record, "origin", str), options, label))
  return out


def read_wywrc(path) -> list[ChoiceExample]:
  out = []
  for line, record in files.json_records(path):
    options = _options(path, line, [record.get(f"option{i}") for i in range(4)])
    answer = files.field(path, line, record, "answer", str)
    _check(answer in ("0", "1", "2", "3"), path, line, f"answer {answer!r} is not '0'..'3'")
    kind = files.field(path, line, record, "type", int) if record.get("type") is not None else None
    out.append(ChoiceExample(line, files.field(path, line, record, "article", str),
                             files.field(path, line, record, "question", str), options, int(answer), kind))
  return out


def read_wywmt(path) -> list[MtExample]:
  out = []
  for line, (source, target) in files.tsv_rows(path, 2):
    out.append(MtExample(line, _nonempty(path, line, source, "source"), _nonempty(path, line, target, "target")))
  return out


READERS = {"tlc": read_tlc, "gjc": read_gjc, "punc": read_punc, "glner": read_glner, "fspc": read_fspc,
           "xuci": read_xuci, "irc": read_irc, "wywrc": read_wywrc, "wywmt": read_wywmt}


def split_files(task: str, data_dir, split: str) -> list[pathlib.Path]:
  path = files.find_split(data_dir, split, EXTENSIONS[task])
  return [] if path is None else [path]


def read_split(task: str, data_dir, split: str):
  """Examples of data_dir/<split>.<ext> in the task's original format, or None when absent
  (a missing test file is normal: then there are no test predictions)."""
  path = files.find_split(data_dir, split, EXTENSIONS[task])
  return None if path is None else READERS[task](pathlib.Path(path))


def _wyweb_task(name: str, example_type, hub_task_type: str, **fields) -> Task:
  """A WYWEB task: its folder's format, and its place on the WYWEB board and on the Hub."""
  files = Files(name=name, example_type=example_type, split_files=functools.partial(split_files, name),
                read_split=functools.partial(read_split, name), train_files=f"train.{{{','.join(EXTENSIONS[name])}}}")
  return Task(name=name, files=files, board="wyweb", benchmark="WYWEB", hub_task_type=hub_task_type,
              hub_dataset=(f"WYWEB {name.upper()}", f"wyweb-{name}"), **fields)


# --- sequence classification: TLC, GJC, FSPC -----------------------------------------------------------

def _tlc_featurize(example: TlcExample, tokenizer, max_length):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": np.int32(TLC_DYNASTIES.index(example.dynasty))}, cut


def _tlc_decode(example, features, logits) -> tuple[str, str]:
  """(period, dynasty): the head predicts the dynasty, whose period follows (strict hierarchy),
  so a submission always passes the TLC reader."""
  dynasty = TLC_DYNASTIES[argmax(logits)]
  return TLC_PERIOD_OF[dynasty], dynasty


def _tlc_score(examples, predictions) -> dict:
  dynasty = classification_scores([p[1] for p in predictions], [e.dynasty for e in examples], TLC_DYNASTIES)
  period = classification_scores([p[0] for p in predictions], [e.period for e in examples], TLC_PERIODS)
  return {**dynasty, **{f"period_{k}": v for k, v in period.items()}}


def _tlc_baseline(train, dev) -> list:
  return [(most_common(e.period for e in train), most_common(e.dynasty for e in train))] * len(dev)


TLC = _wyweb_task(
    "tlc", TlcExample, "text-classification", head="sequence", labels=TLC_DYNASTIES, max_length=512, featurize=_tlc_featurize,
    decode=_tlc_decode, score=_tlc_score, main_metric="accuracy", baseline=_tlc_baseline,
    submission_format="tsv", submission=per_example(lambda e, p: f"{p[0]}\t{p[1]}\t{e.text}"),
    board_note=lambda results: f"dynasty, 7 classes; period accuracy {100 * results['dev']['period_accuracy']:.2f}")


def _gjc_featurize(example: GjcExample, tokenizer, max_length):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": np.int32(GJC_COLLECTIONS.index(example.collection))}, cut


GJC = _wyweb_task(
    "gjc", GjcExample, "text-classification", head="sequence", labels=GJC_COLLECTIONS, max_length=512, featurize=_gjc_featurize,
    decode=lambda e, f, logits: GJC_COLLECTIONS[argmax(logits)],
    score=lambda examples, predictions: classification_scores(
        predictions, [e.collection for e in examples], GJC_COLLECTIONS),
    main_metric="accuracy", baseline=constant_baseline(lambda e: e.collection),
    submission_format="tsv", submission=per_example(lambda e, p: f"{p}\t{e.text}"))


def fspc_scoring_set(poems: list[FspcExample]) -> list[FspcExample]:
  """The toolkit's example set: every poem, then every verse line of every poem as an example
  of its own with the line's sentiment."""
  return poems + [dataclasses.replace(poem, lines=(line,), holistic=sentiment, line_sentiments=())
                  for poem in poems for line, sentiment in zip(poem.lines, poem.line_sentiments)]


def _fspc_prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  """The toolkit scores poems and their lines; training uses both too unless train_on_lines is off."""
  return task, {split: examples if split == "train" and not config.train_on_lines else fspc_scoring_set(examples)
                for split, examples in splits.items()}


def _fspc_featurize(example: FspcExample, tokenizer, max_length):
  # The whole poem as the toolkit writes it: lines joined by '，', closed by '。'.
  text = "，".join(example.lines) + ("。" if len(example.lines) > 1 else "")
  features, cut = single(tokenizer, text, max_length)
  return {**features, "label": np.int32(FSPC_SENTIMENTS.index(example.holistic))}, cut


FSPC_TOOLKIT_CLASSES = 10  # the toolkit's macro-F1 averages over label ids range(10), 5 of them unused


def _fspc_score(examples, predictions) -> dict:
  """The toolkit's metrics over its scoring set (poems and their lines together): `accuracy`,
  and `macro_f1` averaged over 10 label ids as its code does; `poem_accuracy` and
  `poem_macro_f1` (over the 5 sentiments) over whole poems only."""
  ids = lambda labels: [FSPC_SENTIMENTS.index(x) for x in labels]
  predicted, gold = ids(predictions), ids(e.holistic for e in examples)
  poems = [i for i, e in enumerate(examples) if len(e.lines) > 1]
  poem_scores = classification_scores([predictions[i] for i in poems], [examples[i].holistic for i in poems],
                                      FSPC_SENTIMENTS)
  return {"accuracy": metrics.accuracy(predicted, gold),
          "macro_f1": metrics.macro_f1(predicted, gold, FSPC_TOOLKIT_CLASSES),
          **{f"poem_{k}": v for k, v in poem_scores.items()}}


FSPC = _wyweb_task(
    "fspc", FspcExample, "text-classification", head="sequence", labels=FSPC_SENTIMENTS, max_length=48, featurize=_fspc_featurize,
    decode=lambda e, f, logits: FSPC_SENTIMENTS[argmax(logits)], score=_fspc_score, main_metric="accuracy",
    baseline=constant_baseline(lambda e: e.holistic), submission_format="jsonl",
    submission=lambda examples, predictions: [  # whole poems: the released files' records
        as_json({"poem": "|".join(e.lines), "title": e.title, "poet": e.poet, "dynasty": e.dynasty,
                 "sentiments": {"holistic": p}}) for e, p in zip(examples, predictions) if len(e.lines) > 1],
    options={"train_on_lines": True}, prepare=_fspc_prepare)


# --- token classification: PUNC, GLNER ------------------------------------------------------------------

_PUNC_IDS = {label: i for i, label in enumerate(PUNC_LABELS)}
_GLNER_IDS = {label: i for i, label in enumerate(GLNER_LABELS)}
TOOLKIT_PUNC_CHARS = 510  # the toolkit cuts PUNC texts (and their tags) to max_seq_len − 2 before scoring


def _punc_decode(example: PuncExample, features, logits) -> list[str]:
  tags = tagging.char_tags(PUNC_LABELS, features, logits)
  return tags + ["O"] * (len(example.text) - len(tags))


def punc_task(score_chars: int = 0) -> Task:
  """PUNC scored over whole texts (score_chars 0: a mark after a character the model never saw
  counts as missed), or over each text's first score_chars characters (TOOLKIT_PUNC_CHARS: the
  toolkit's cut)."""
  cut = slice(None, score_chars or None)

  def score(examples, predictions) -> dict:
    ids = lambda tags: [_PUNC_IDS[t] for t in tags[cut]]
    return metrics.punctuation_f1(np.concatenate([ids(p) for p in predictions]),
                                  np.concatenate([ids(e.labels) for e in examples]))

  return _wyweb_task(
      "punc", PuncExample, "token-classification", head="token", labels=PUNC_LABELS, max_length=512,
      featurize=lambda e, tokenizer, max_length: tagging.tagging_inputs(
          tokenizer, e.text, [_PUNC_IDS[t] for t in e.labels], max_length),
      decode=_punc_decode, score=score, main_metric="f1",
      baseline=lambda train, dev: [["O"] * len(e.text) for e in dev],  # F1 0
      submission_format="tsv",
      submission=per_example(lambda e, p: f"{e.text}\t{''.join('O' if t == 'O' else t[2:] for t in p)}"),
      options={"score_chars": score_chars}, prepare=_punc_prepare)


def _punc_prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  return (punc_task(config.score_chars) if config.score_chars else task), splits


PUNC = punc_task()

GLNER = _wyweb_task(
    "glner", GlnerExample, "token-classification", head="token", labels=GLNER_LABELS, max_length=512,
    featurize=lambda e, tokenizer, max_length: tagging.tagging_inputs(
        tokenizer, e.text, tagging.bio_tags(len(e.text), e.spans, _GLNER_IDS), max_length),
    decode=lambda e, f, logits: tagging.decode_spans(GLNER_LABELS, f, logits),
    score=lambda examples, predictions: tagging.entity_scores(GLNER_LABELS, examples, predictions),
    main_metric="f1", baseline=lambda train, dev: [() for _ in dev],  # F1 0
    submission_format="jsonl",
    submission=per_example(lambda e, p: as_json({"text": e.text, "label": [list(span) for span in p]})))


# --- multiple choice: IRC, WYWRC --------------------------------------------------------------------------

def _choice_featurize(example: ChoiceExample, tokenizer: Tokenizer, max_length: int, cut: str):
  features, truncated = choice_rows(tokenizer, example.context, example.question, example.options, max_length, cut)
  return {**features, "label": np.int32(example.label)}, truncated


def _choice_task(name: str, max_length: int, cut: str, submission_line) -> Task:
  return _wyweb_task(
      name, ChoiceExample, "multiple-choice", head="choice", labels=OPTIONS, max_length=max_length,
      featurize=lambda e, tokenizer, n: _choice_featurize(e, tokenizer, n, cut),
      decode=lambda e, f, logits: argmax(logits), score=choice_accuracy, main_metric="accuracy",
      baseline=constant_baseline(lambda e: e.label), submission_format="jsonl",
      submission=per_example(submission_line))


IRC = _choice_task("irc", 256, "question", lambda e, p: as_json(
    {"idiom": e.context, "origin": e.question, "options": list(e.options), "label": p}))
WYWRC = _choice_task("wywrc", 512, "context", lambda e, p: as_json(
    {"article": e.context, "question": e.question, **{f"option{i}": o for i, o in enumerate(e.options)},
     "answer": str(p), **({} if e.kind is None else {"type": e.kind})}))


# --- XuCi: the same function word in two sentences, same usage or not ---------------------------------------

def _xuci_featurize(example: XuciExample, tokenizer: Tokenizer, max_length: int):
  sequences, masks = [], []
  for text, (start, end) in ((example.text_a, example.span_a), (example.text_b, example.span_b)):
    ids, char_index = tokenizer.encode_chars(text)
    ids, char_index = ids[:max_length - 2], char_index[:max_length - 2]
    in_span = (char_index >= start) & (char_index <= end)
    if not in_span.any():
      raise ValueError(f"the word at characters {start}..{end} of {text!r} has no token within {max_length} tokens")
    sequences.append(with_specials(tokenizer, ids))
    masks.append(np.concatenate([[0.0], in_span, [0.0]]).astype(np.float32))
  features = rows(sequences, tokenizer.pad_id)
  span_mask = np.zeros(features["input_ids"].shape, np.float32)
  for i, mask in enumerate(masks):
    span_mask[i, :len(mask)] = mask
  return {**features, "span_mask": span_mask, "label": np.int32(example.same_usage)}, 0


XUCI = _wyweb_task(
    "xuci", XuciExample, "text-classification", head="span_pair", heading="XuCi", labels=("f", "t"), max_length=96, featurize=_xuci_featurize,
    decode=lambda e, f, logits: bool(argmax(logits)),
    score=lambda examples, predictions: classification_scores(
        predictions, [e.same_usage for e in examples], (False, True)),
    main_metric="accuracy", baseline=constant_baseline(lambda e: e.same_usage), submission_format="tsv",
    submission=per_example(lambda e, p: "\t".join(
        [e.text_a, e.text_b, "%d, %d" % e.span_a, "%d, %d" % e.span_b, "t" if p else "f"])))


# --- WYWMT: classical → modern Chinese translation with a prefix LM ---------------------------------------------

def _wywmt_featurize(example: MtExample, tokenizer: Tokenizer, max_length: int):
  """[CLS] source [SEP] target [SEP] (token types 0 | 1, wyjax.models.prefix_lm); labels: the
  next token from the source's [SEP] to the last target token, IGNORE elsewhere. A pair that
  does not fit loses characters from the end of its longer side, one at a time (the toolkit's
  rule; it also drops pairs over 510 characters, wyjax keeps them trimmed)."""
  features, cut = pair(tokenizer, example.source, example.target, max_length)
  input_ids = features["input_ids"]
  first = int(np.argmax(features["token_type_ids"]))  # [CLS] source [SEP]
  labels = np.full(len(input_ids), IGNORE, np.int32)
  labels[first - 1:-1] = input_ids[first:]
  return {**features, "labels": labels}, cut


def _teacher_forced_scores(tokenizer, features, predicted) -> dict:
  """The WYWEB toolkit's WYWMT score, for comparison with the paper: the argmax at each target
  position given the gold prefix, tokens (with the closing [SEP]) joined by spaces, against
  the gold tokens likewise. Its outputs have the reference's length by construction."""
  as_text = lambda ids: " ".join(tokenizer.vocab[i] for i in ids)
  scored = [f["labels"] != IGNORE for f in features]
  scores = metrics.translation_scores([as_text(p[s]) for p, s in zip(predicted, scored)],
                                      [as_text(f["labels"][s]) for f, s in zip(features, scored)], tokenized=True)
  return {f"teacher_forced_{k}": v for k, v in scores.items()}


WYWMT = _wyweb_task(
    "wywmt", MtExample, "translation", head="prefix_lm", labels=(), max_length=512, featurize=_wywmt_featurize,
    decode=lambda e, f, text: text,
    score=lambda examples, predictions: metrics.translation_scores(predictions, [e.target for e in examples]),
    main_metric="bleu",
    # Copying the source: a floor well above zero, since classical and modern Chinese share many characters.
    baseline=lambda train, dev: [e.source for e in dev],
    submission_format="tsv", submission=per_example(lambda e, p: f"{e.source}\t{p}"),
    forced_scores=_teacher_forced_scores, averaged=False,
    # Checkpoints are chosen on greedy translations; the final ones use this beam search.
    options={"decoding": {"beam_size": 4, "length_penalty": 0.6, "max_ratio": 2.0, "max_extra": 32}})

TASKS = (PUNC, GLNER, GJC, TLC, FSPC, XUCI, IRC, WYWRC, WYWMT)  # the leaderboard's order

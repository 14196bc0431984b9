"""Character tagging features (PUNC, GLNER): one token per visible character, so labels never shift.

A text becomes [CLS] + one token per visible character + [SEP]; `char_index[t]` is the character token t stands
for (-1 for the specials). Whitespace has no token and no label.
"""

import dataclasses

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import metrics

IGNORE = -100  # label of positions without a character ([CLS], [SEP], padding)


@dataclasses.dataclass(frozen=True)
class TaggingFeatures:
  input_ids: np.ndarray  # [n] int32
  labels: np.ndarray  # [n] int32, IGNORE where no character
  char_index: np.ndarray  # [n] int32, -1 where no character
  truncated_chars: int  # visible characters cut by max_length (reported, never silent)


def bio_tags(length: int, spans, label_ids: dict[str, int]) -> np.ndarray:
  """Per-character BIO label ids from (start, end exclusive, type) spans."""
  tags = np.full(length, label_ids["O"], np.int32)
  for start, end, kind in spans:
    tags[start] = label_ids[f"B-{kind}"]
    tags[start + 1 : end] = label_ids[f"I-{kind}"]
  return tags


def tagging_features(tokenizer: Tokenizer, text: str, char_labels: np.ndarray, max_length: int) -> TaggingFeatures:
  """char_labels: one label id per character of text (whitespace characters' labels unused)."""
  if len(char_labels) != len(text):
    raise ValueError(f"{len(char_labels)} labels for {len(text)} characters")
  ids, index = tokenizer.encode_chars(text)
  room = max_length - 2
  truncated = max(0, len(ids) - room)
  ids, index = ids[:room], index[:room]
  input_ids = np.concatenate([[tokenizer.cls_id], ids, [tokenizer.sep_id]]).astype(np.int32)
  char_index = np.concatenate([[-1], index, [-1]]).astype(np.int32)
  labels = np.concatenate([[IGNORE], np.asarray(char_labels, np.int32)[index], [IGNORE]]).astype(np.int32)
  return TaggingFeatures(input_ids, labels, char_index, truncated)


def spans_from_tags(tags: list[str], char_index: np.ndarray) -> list[tuple[int, int, str]]:
  """(start char, end char exclusive, type) of each BIO chunk over the tokens with a character."""
  real = np.flatnonzero(char_index >= 0)
  token_tags = [tags[t] for t in real]
  return sorted(
    (int(char_index[real[s]]), int(char_index[real[e]]) + 1, kind) for kind, s, e in metrics.chunks(token_tags)
  )


def tagging_inputs(tokenizer: Tokenizer, text: str, char_labels, max_length: int) -> tuple[dict, int]:
  """A task's features (input_ids, labels, char_index) and the characters cut."""
  f = tagging_features(tokenizer, text, char_labels, max_length)
  return {"input_ids": f.input_ids, "labels": f.labels, "char_index": f.char_index}, f.truncated_chars


def char_tags(labels: tuple[str, ...], features: dict, logits) -> list[str]:
  """One predicted tag per character of the text up to its last token ('O' where a character has no token)."""
  char_index = np.asarray(features["char_index"])
  tags = ["O"] * (int(char_index.max()) + 1)
  for char, label in zip(char_index, np.argmax(np.asarray(logits)[: len(char_index)], -1)):  # one argmax per text
    if char >= 0:
      tags[char] = labels[label]
  return tags


def decode_spans(labels: tuple[str, ...], features: dict, logits) -> tuple[tuple[int, int, str], ...]:
  """Entity predictions: the (start, end exclusive, type) spans of the predicted tags."""
  token_tags = ["O" if c < 0 else labels[int(np.argmax(row))] for c, row in zip(features["char_index"], logits)]
  return tuple(spans_from_tags(token_tags, features["char_index"]))


def entities(text: str, spans) -> dict:
  """wyjax.predict's output of entity spans: the text, and each entity's text, type, start and end characters."""
  return {
    "text": text,
    "entities": [{"text": text[start:end], "type": kind, "start": start, "end": end} for start, end, kind in spans],
  }


def span_tags(labels: tuple[str, ...], text: str, spans) -> list[str]:
  """One BIO tag (a string of labels) per character of text."""
  ids = {label: i for i, label in enumerate(labels)}
  return [labels[i] for i in bio_tags(len(text), spans, ids)]


def entity_scores(labels: tuple[str, ...], examples, predictions) -> dict:
  """Entity-level micro P/R/F1 (seqeval's rules) of predicted spans against the examples'."""
  return metrics.entity_scores(
    [span_tags(labels, e.text, p) for e, p in zip(examples, predictions)],
    [span_tags(labels, e.text, e.spans) for e in examples],
  )

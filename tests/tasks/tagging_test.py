"""Character tagging features keep every gold entity of the real GLNER data recoverable."""

import numpy as np
import pytest

from wyjax.data import tokenizer as tk
from wyjax.tasks import tagging, wyweb_files

LABEL_IDS = {label: i for i, label in enumerate(wyweb_files.GLNER_LABELS)}


@pytest.fixture(scope="module")
def glner(shared_data):
  return {split: wyweb_files.read_split("glner", shared_data / "wyweb" / "glner", split) for split in ("train", "dev")}


def test_every_gold_entity_is_recovered_from_the_features(glner):
  tokenizer = tk.Tokenizer(tk.build_vocab(e.text for e in glner["train"]))
  names = wyweb_files.GLNER_LABELS
  entities = whitespace_texts = 0
  for examples in glner.values():
    for e in examples:
      char_labels = tagging.bio_tags(len(e.text), e.spans, LABEL_IDS)
      features = tagging.tagging_features(tokenizer, e.text, char_labels, max_length=1024)
      assert features.truncated_chars == 0
      tags = [names[i] if i != tagging.IGNORE else "O" for i in features.labels]
      recovered = tagging.spans_from_tags(tags, features.char_index)
      gold = sorted(e.spans)
      # A gold span is recovered with the same type and the same characters (whitespace
      # inside a span has no token, so the span's visible ends are compared).
      assert [(e.text[s:t].strip(), k) for s, t, k in recovered] == [(e.text[s:t].strip(), k) for s, t, k in gold]
      entities += len(gold)
      whitespace_texts += any(c.isspace() for c in e.text)
  assert entities > 10_000 and whitespace_texts > 0


def test_labels_stay_on_their_characters_after_whitespace():
  tokenizer = tk.Tokenizer(tk.build_vocab(["史记汉书"]))
  text = "读\u3000史记 汉书"
  spans = [(2, 4, "noun_bookname"), (5, 7, "noun_bookname")]
  features = tagging.tagging_features(tokenizer, text, tagging.bio_tags(len(text), spans, LABEL_IDS), 16)
  assert "".join(text[i] for i in features.char_index[1:-1]) == "读史记汉书"
  assert [wyweb_files.GLNER_LABELS[i] for i in features.labels[1:-1]] == [
    "O",
    "B-noun_bookname",
    "I-noun_bookname",
    "B-noun_bookname",
    "I-noun_bookname",
  ]


def test_truncation_is_counted():
  tokenizer = tk.Tokenizer(tk.build_vocab(["一二三四五"]))
  features = tagging.tagging_features(tokenizer, "一二三四五", np.zeros(5, np.int32), max_length=5)
  assert len(features.input_ids) == 5 and features.truncated_chars == 2

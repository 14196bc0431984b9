"""PUNC's marks as character tags: features, decoding and scores, and the text with its marks removed or placed."""

import unicodedata

import numpy as np

from wyjax.tasks import metrics, tagging
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.wyweb_files import PUNC_LABELS, PUNC_MARKS, PuncExample

_PUNC_IDS = {label: i for i, label in enumerate(PUNC_LABELS)}


def tag_features(example: PuncExample, tokenizer, max_length: int):
  """The model's inputs for the example's text, each character labelled with the mark after it (if labelled)."""
  labels = [_PUNC_IDS[t] for t in example.labels] if example.labels else np.full(len(example.text), IGNORE)
  return tagging.tagging_inputs(tokenizer, example.text, labels, max_length)


def decoded_tags(example: PuncExample, features, logits) -> list[str]:
  """Each character's predicted tag; characters past the model's input are tagged 'O'."""
  tags = tagging.char_tags(PUNC_LABELS, features, logits)
  return tags + ["O"] * (len(example.text) - len(tags))


def mark_scores(examples, predictions, chars: int = 0) -> dict:
  """The marks' precision, recall and F1 over each text's first chars characters (0: the whole text)."""
  cut = slice(None, chars or None)
  ids = lambda tags: [_PUNC_IDS[t] for t in tags[cut]]
  return metrics.punctuation_f1(
    np.concatenate([ids(p) for p in predictions]), np.concatenate([ids(e.labels) for e in examples])
  )


def unpunctuated(text: str) -> str:
  return "".join(c for c in text if c not in PUNC_MARKS)


_ZWJ = "\u200d"


def _regional_indicator(char: str) -> bool:
  return "\U0001f1e6" <= char <= "\U0001f1ff"


def _hangul(char: str) -> str:
  """A character's Hangul syllable type (UAX #29): L, V, T (conjoining jamo), LV, LVT or ''."""
  if "\u1100" <= char <= "\u115f" or "\ua960" <= char <= "\ua97c":
    return "L"
  if "\u1160" <= char <= "\u11a7" or "\ud7b0" <= char <= "\ud7c6":
    return "V"
  if "\u11a8" <= char <= "\u11ff" or "\ud7cb" <= char <= "\ud7fb":
    return "T"
  if "\uac00" <= char <= "\ud7a3":
    return "LVT" if (ord(char) - 0xAC00) % 28 else "LV"
  return ""


# Which Hangul syllable type may follow which inside one cluster (UAX #29's GB6-GB8).
_HANGUL_JOINS = {"L": ("L", "V", "LV", "LVT"), "LV": ("V", "T"), "V": ("V", "T"), "LVT": ("T",), "T": ("T",)}


def _extends(text: str, i: int) -> bool:
  """Whether text[i] continues the grapheme cluster that text[i - 1] is in (UAX #29).

  What continues one: a combining mark or variation selector, an emoji modifier (skin tone), a ZWJ and the
  character it joins, an emoji tag, conjoining Hangul jamo, and the second regional indicator of a pair (a flag).
  """
  previous, char = text[i - 1], text[i]
  if _regional_indicator(previous) and _regional_indicator(char):
    before = next((j for j in range(i - 1, -1, -1) if not _regional_indicator(text[j])), -1)
    return (i - 1 - before) % 2 == 1  # they pair from the run's start: 🇨🇳🇯🇵 is two flags
  return (
    unicodedata.category(char) in ("Mn", "Mc", "Me")
    or "\U0001f3fb" <= char <= "\U0001f3ff"
    or _ZWJ in (previous, char)
    or "\U000e0020" <= char <= "\U000e007f"
    or _hangul(char) in _HANGUL_JOINS.get(_hangul(previous), ())
  )


def punctuated(text: str, tags) -> str:
  """The text with each predicted mark placed after its character's whole grapheme cluster.

  A mark itself, or a cluster already followed by one (punctuation kept from the input), gets none.
  """
  out, mark = [], None
  for i, (char, tag) in enumerate(zip(text, tags)):
    out.append(char)
    if tag != "O" and char not in PUNC_MARKS:
      mark = tag[2:]
    following = text[i + 1 : i + 2]
    if following and _extends(text, i + 1):
      continue
    if mark and following not in PUNC_MARKS:
      out.append(mark)
    mark = None
  return "".join(out)

"""Build the WYWEB PUNC task (punctuation restoration) from punctuated classical text.

- Each paragraph of the chosen Daizhige collections (default 史藏) becomes `<text>\\t<tags>`: the text without
  punctuation, and for each character the mark that followed it (one of 。？！，、；：|) or O.
- Other punctuation (quotes, brackets, ·) is removed without a label; ASCII and half-width variants count as the
  marks.
- Paragraphs over `max_length` characters are cut after a sentence-ending mark; documents are split by hash;
  exact duplicate paragraphs are dropped (counted in the summary).
"""

import collections
import unicodedata

from wyjax.data import corpus
from wyjax.tasks.builders import outputs
from wyjax.tasks.wyweb_files import PUNC_MARKS

VARIANTS = {
  ".": "。",
  "?": "？",
  "!": "！",
  ",": "，",
  ";": "；",
  ":": "：",
  "｡": "。",
  "､": "、",
  "｜": "|",
  "丨": None,
}
SENTENCE_END = ("。", "？", "！")


def _mark(c: str) -> str | None:
  """The label mark c stands for, '' for other punctuation, None for a text character."""
  c = VARIANTS.get(c, c)
  if c is None:
    return None
  if c in PUNC_MARKS:
    return c
  return "" if unicodedata.category(c).startswith("P") else None


def label_paragraph(paragraph: str) -> tuple[str, str]:
  """(text without punctuation, tag string of the same length)."""
  text, tags = [], []
  for c in paragraph:
    mark = _mark(c)
    if mark is None:
      text.append(c)
      tags.append("O")
    elif mark and tags:
      tags[-1] = mark  # the last mark of a run wins: "。」" → 。
  return "".join(text), "".join(tags)


def split_long(text: str, tags: str, max_length: int) -> list[tuple[str, str]]:
  pieces = []
  while len(text) > max_length:
    cut = max((i for i in range(max_length) if tags[i] in SENTENCE_END), default=max_length - 1) + 1
    pieces.append((text[:cut], tags[:cut]))
    text, tags = text[cut:], tags[cut:]
  return pieces + [(text, tags)] if text else pieces


def build_punc(
  daizhige_dir,
  out,
  *,
  collections_=("史藏",),
  dev_fraction: float = 0.05,
  test_fraction: float = 0.05,
  min_length: int = 8,
  max_length: int = 510,
  t2s: bool = True,
  overwrite: bool = False,
) -> dict:
  reader = corpus.DaizhigeReader(daizhige_dir)
  out = outputs.claim(out, overwrite)
  counts, seen = collections.Counter(), set()
  with outputs.written(out, counts, overwrite) as writers:
    for unit in reader.units():
      if unit.split("/")[0] not in collections_:
        continue
      for doc in reader.read(unit):
        h = corpus.document_fraction(doc.id)
        split = "test" if h < test_fraction else "dev" if h < test_fraction + dev_fraction else "train"
        for paragraph in corpus.clean_paragraphs(doc.paragraphs, t2s=t2s):
          key = corpus.paragraph_hash(paragraph)
          if key in seen:
            counts["duplicate_paragraphs"] += 1
            continue
          seen.add(key)
          text, tags = label_paragraph(paragraph)
          if len(text) < min_length or set(tags) == {"O"}:
            counts["skipped_unpunctuated_or_short"] += 1
            continue
          for piece_text, piece_tags in split_long(text, tags, max_length):
            writers[split].write(f"{piece_text}\t{piece_tags}\n")
            counts[f"{split}_examples"] += 1
            counts.update(f"mark {t}" for t in piece_tags if t != "O")
  return dict(sorted(counts.items()))

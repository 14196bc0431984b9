"""The worker processes' side of `prepare.prepare_corpus`: each reads, cleans and tokenises work units (files).

`start` initialises a worker (worker_pool.processes' initializer); `count_unit` and `tokenize_unit` do one unit.
"""

import collections

import numpy as np

from wyjax.data import corpus
from wyjax.data import tokenizer as tokenizer_lib

_worker = {}


def start(source: str, t2s: bool, char_filter: str, vocab: list[str] | None, casing: dict) -> None:
  """Makes this process read `source`, clean as told, and tokenise with `vocab` (None: count only)."""
  _worker["reader"] = corpus.reader_for(source)
  _worker["cleaning"] = {"t2s": t2s, "char_filter": char_filter}
  # Text is already t2s-converted by cleaning; the tokenizer must not convert again.
  _worker["tokenizer"] = tokenizer_lib.Tokenizer(vocab, t2s=False, **casing) if vocab else None


def _clean_documents(unit: str):
  for doc in _worker["reader"].read(unit):
    raw_chars = sum(corpus.non_space_chars(p) for p in doc.paragraphs)
    paragraphs = corpus.clean_paragraphs(doc.paragraphs, **_worker["cleaning"])
    yield doc, paragraphs, raw_chars


def count_unit(unit: str) -> collections.Counter:
  """The characters of `unit`'s cleaned text, counted."""
  counts = collections.Counter()
  for _, paragraphs, _ in _clean_documents(unit):
    for p in paragraphs:
      counts.update(p)
  return counts


def tokenize_unit(unit: str) -> list[tuple]:
  """[(document id, raw chars, kept chars, paragraph hashes, ids, paragraph token starts)] of `unit`'s documents."""
  tokenizer = _worker["tokenizer"]
  out = []
  for doc, paragraphs, raw_chars in _clean_documents(unit):
    # One tokenizer call per document: newlines never join words, so token positions split it back.
    text = "\n".join(paragraphs)
    ids, positions = tokenizer.encode_ids_with_positions(text)
    starts = np.cumsum([0] + [len(p) + 1 for p in paragraphs[:-1]])
    hashes = np.array([corpus.paragraph_hash(p) for p in paragraphs], np.uint64)
    out.append((doc.id, raw_chars, corpus.non_space_chars(text), hashes, ids, np.searchsorted(positions, starts)))
  return out

"""A corpus's vocabulary against a checkpoint's: which embedding row each token continues from.

A token continues the checkpoint's row of the same token, else that of its simplified/traditional
counterpart (OpenCC: 後 continues 后, 髮 and 發 continue 发), else none (a new row). This serves the
checkpoint's own vocabulary, an extension of it (new characters appended) and the corpus's own.
"""

import collections
import dataclasses
import functools

import numpy as np
import opencc

from wyjax.data.normalize import to_simplified

TWIN = "##"  # WordPiece's continuation prefix: "##c" is c inside a word


@functools.cache
def _s2t() -> opencc.OpenCC:
  return opencc.OpenCC("s2t")


@dataclasses.dataclass(frozen=True)
class RowSources:
  """For each token of the new vocabulary, the checkpoint row it starts from (-1: a new row)."""

  rows: np.ndarray  # int64 [new vocabulary size]
  copied: int  # the same token
  mapped: int  # its OpenCC counterpart
  new: int  # neither

  def describe(self) -> str:
    return f"{self.copied:,} rows copied, {self.mapped:,} mapped by OpenCC (simplified/traditional), {self.new:,} new"


def _split(token: str) -> tuple[str, str]:
  """(WordPiece's continuation prefix or "", the rest): "##c" → ("##", "c")."""
  return (TWIN, token[len(TWIN) :]) if token.startswith(TWIN) else ("", token)


def _counterparts(token: str, by_simplified: dict[str, list[str]]) -> list[str]:
  """The checkpoint tokens that stand for `token` in the other script, most direct first."""
  prefix, char = _split(token)
  if len(char) != 1:  # a special token or a word piece of several characters: no counterpart
    return []
  simplified = to_simplified(char)
  found = [prefix + simplified, prefix + _s2t().convert(char)] + by_simplified.get(prefix + simplified, [])
  return [t for t in dict.fromkeys(found) if t != token]


def row_sources(checkpoint_vocab: list[str], vocab: list[str]) -> RowSources:
  """Where each row of a model over `vocab` comes from in a model over `checkpoint_vocab`."""
  ids = {token: i for i, token in enumerate(checkpoint_vocab)}
  by_simplified = collections.defaultdict(list)  # a simplified token → the checkpoint's tokens that simplify to it
  for token in checkpoint_vocab:
    prefix, char = _split(token)
    if len(char) == 1:
      by_simplified[prefix + to_simplified(char)].append(token)
  rows = np.full(len(vocab), -1, np.int64)
  copied = mapped = 0
  for i, token in enumerate(vocab):
    if token in ids:
      rows[i], copied = ids[token], copied + 1
    elif counterpart := next((t for t in _counterparts(token, by_simplified) if t in ids), None):
      rows[i], mapped = ids[counterpart], mapped + 1
  return RowSources(rows=rows, copied=copied, mapped=mapped, new=len(vocab) - copied - mapped)


def extended(checkpoint_vocab: list[str], corpus_vocab: list[str]) -> list[str]:
  """The checkpoint's vocabulary with the corpus's tokens it lacks appended, most frequent first.

  Every old id keeps its token, so every old embedding row stays.
  """
  known = set(checkpoint_vocab)
  return list(checkpoint_vocab) + [t for t in corpus_vocab if t not in known]


def kind(checkpoint_vocab: list[str], vocab: list[str]) -> str:
  """How `vocab` relates to the checkpoint's: its own, an extension of it, or a transplant."""
  if vocab == checkpoint_vocab:
    return "the checkpoint's own"
  if vocab[: len(checkpoint_vocab)] == checkpoint_vocab:
    return f"the checkpoint's extended by {len(vocab) - len(checkpoint_vocab):,} tokens"
  return "the corpus's own (transplanted)"

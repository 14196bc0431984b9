"""What BERT's normaliser and pre-tokenizer do to each code point, kept as tables for the tokenizer's fast path.

Each answer is asked of the `tokenizers` pipeline itself, once per code point, and cached.
"""

import collections
import unicodedata

import numpy as np
from tokenizers import normalizers, pre_tokenizers

MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word


def normalizer(lowercase: bool = False, strip_accents: bool = False) -> normalizers.Normalizer:
  """BERT's normaliser, as transformers' fast BertTokenizer builds it."""
  return normalizers.BertNormalizer(
    clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
  )


KINDS = ("space", "control", "glyph", "word", "single")
CONTROL, GLYPH, WORD, SINGLE = (KINDS.index(k) for k in ("control", "glyph", "word", "single"))
_UNKNOWN = 255


class CharClasses:
  """What BERT's pipeline does with each character, as an index in KINDS.

  'space' and 'control' give no token; 'glyph' is deleted although visible (private-use or unassigned);
  'word' joins neighbouring word characters into one WordPiece word; 'single' is always its own token
  (CJK ideographs, punctuation).
  """

  def __init__(self):
    self._normalizer = normalizer()
    self._pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    self.table = np.full(0x110000, _UNKNOWN, np.uint8)  # code point → index in KINDS

  def _classify(self, c: str) -> str:
    normalized = self._normalizer.normalize_str(c)
    if not normalized:
      return "control" if unicodedata.category(c) in ("Cc", "Cf") else "glyph"
    if not normalized.strip():
      return "space"
    pieces = self._pre_tokenizer.pre_tokenize_str(self._normalizer.normalize_str(c + c))
    return "word" if len(pieces) == 1 else "single"

  def of_codepoints(self, codepoints: np.ndarray) -> np.ndarray:
    """The kind (index in KINDS) of each code point."""
    kinds = self.table[codepoints]
    if (kinds == _UNKNOWN).any():
      for cp in np.unique(codepoints[kinds == _UNKNOWN]):
        self.table[cp] = KINDS.index(self._classify(chr(cp)))
      kinds = self.table[codepoints]
    return kinds

  def __call__(self, c: str) -> str:
    return KINDS[self.of_codepoints(np.array([ord(c)]))[0]]


char_classes = CharClasses()
UNSET, DELETED, EXPANDED = -1, -2, -3  # Folding's table beside code points


class Folding:
  """Each code point as lower-casing and accent stripping leave it, asked of BERT's normaliser.

  The table holds one code point, DELETED (an accent stripped away) or EXPANDED (several code points).
  """

  def __init__(self, lowercase: bool, strip_accents: bool):
    self._normalizer = normalizers.BertNormalizer(
      clean_text=False, handle_chinese_chars=False, strip_accents=strip_accents, lowercase=lowercase
    )
    self._strip_accents = strip_accents
    self.table = np.full(0x110000, UNSET, np.int32)
    # Bit 0: NFD begins with a combining mark; bit 1: ends with one. By Python's unicodedata (Unicode
    # 15.0 on 3.12): a mark the normaliser's newer tables know and these do not would go unseen.
    self._marks = np.zeros(0x110000, np.uint8)

  def __call__(self, codepoints: np.ndarray) -> np.ndarray:
    folded = self.table[codepoints]
    if (folded == UNSET).any():
      for cp in np.unique(codepoints[folded == UNSET]):
        out = self._normalizer.normalize_str(chr(cp))
        self.table[cp] = ord(out) if len(out) == 1 else EXPANDED if out else DELETED
        nfd = unicodedata.normalize("NFD", chr(cp))
        self._marks[cp] = (unicodedata.combining(nfd[0]) > 0) | (unicodedata.combining(nfd[-1]) > 0) << 1
      folded = self.table[codepoints]
    return folded

  def reorders(self, codepoints: np.ndarray) -> bool:
    """Whether accent stripping's NFD may reorder combining marks across these code points.

    Such a text is not folded character by character. `codepoints` have been through `__call__` (which
    records their marks), controls left out (BERT deletes them first).
    """
    marks = self._marks[codepoints]
    return self._strip_accents and bool(((marks[1:] & 1) & (marks[:-1] >> 1)).any())

  def counts(self, counts: collections.Counter) -> collections.Counter:
    """`counts` of characters as counts of what they fold to (a stripped accent: nothing)."""
    folded = collections.Counter()
    for c, n in counts.items():
      for f in self._normalizer.normalize_str(c):
        folded[f] += n
    return folded


def codepoints_of(text: str) -> np.ndarray:
  """The code points of `text`, as uint32."""
  return np.frombuffer(text.encode("utf-32-le"), np.uint32)

"""Character-level BERT tokenizer: vocabulary building, encoding with offsets, HF files.

The exported folder loads with `transformers.AutoTokenizer` as a fast `BertTokenizer`.
transformers 5 rebuilds that tokenizer's pipeline from its arguments (ignoring the
pre-tokenizer in tokenizer.json), so wyjax encodes with exactly that pipeline — BERT
normaliser, BERT pre-tokenizer, WordPiece — and ids are identical by construction;
tests/data/tokenizer_test.py checks it on real data. wyjax's own vocabularies neither
lower-case nor strip accents; a published one may do both (hfl's RoBERTa-wwm-ext's tokenizer_config
names no do_lower_case, so transformers lower-cases), and wyjax then does what transformers does.

What that pipeline does to classical Chinese, and how wyjax keeps offsets honest:
- every CJK ideograph and every punctuation mark is its own token;
- runs of other "word" characters (Latin letters, digits, 〇, symbols) are split by WordPiece,
  so the vocabulary carries a `##c` twin for each such character;
- whitespace gives no token; `Encoding.offsets` maps each token to its characters in the
  original text;
- BERT deletes private-use and unassigned code points (rare glyphs in Daizhige and WYWEB):
  `normalize` replaces them by UNKNOWN_GLYPH, which becomes [UNK], so no visible character
  ever loses its token.
"""

import collections
import dataclasses
import itertools
import json
import logging
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
import tokenizers
from etils import epath
from tokenizers import normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from wyjax.core.storage import read_json
from wyjax.data.normalize import to_simplified

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
# A punctuation character (so BERT always isolates it) that is never put in a vocabulary.
UNKNOWN_GLYPH = "\u2e2e"


@dataclasses.dataclass(frozen=True)
class Encoding:
  ids: list[int]
  type_ids: list[int]
  # (start, end) character span of each token in the original text; (0, 0) for specials.
  offsets: list[tuple[int, int]]
  # 0 or 1: which text of a pair the token came from; None for specials.
  sequence_ids: list[int | None]


def _bert_pipeline(
  vocab: dict[str, int] | None, lowercase: bool = False, strip_accents: bool = False
) -> tokenizers.Tokenizer:
  tk = tokenizers.Tokenizer(WordPiece(vocab or {UNK: 0}, unk_token=UNK, max_input_chars_per_word=100))
  tk.normalizer = normalizers.BertNormalizer(
    clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
  )
  tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tk


_KINDS = ("space", "control", "glyph", "word", "single")
_UNKNOWN = 255


class _CharClasses:
  """What BERT's pipeline does with each character, asked of the pipeline itself.

  Kinds: 'space' and 'control' (no token), 'glyph' (deleted although visible: private-use or
  unassigned), 'word' (joins neighbouring word characters into one WordPiece word) and
  'single' (always its own token: CJK ideographs, punctuation).
  """

  def __init__(self):
    self._pipeline = _bert_pipeline(None)
    self.table = np.full(0x110000, _UNKNOWN, np.uint8)  # code point → index in _KINDS

  def _classify(self, c: str) -> str:
    normalized = self._pipeline.normalizer.normalize_str(c)
    if not normalized:
      return "control" if unicodedata.category(c) in ("Cc", "Cf") else "glyph"
    if not normalized.strip():
      return "space"
    pieces = self._pipeline.pre_tokenizer.pre_tokenize_str(self._pipeline.normalizer.normalize_str(c + c))
    return "word" if len(pieces) == 1 else "single"

  def of_codepoints(self, codepoints: np.ndarray) -> np.ndarray:
    kinds = self.table[codepoints]
    if (kinds == _UNKNOWN).any():
      for cp in np.unique(codepoints[kinds == _UNKNOWN]):
        self.table[cp] = _KINDS.index(self._classify(chr(cp)))
      kinds = self.table[codepoints]
    return kinds

  def __call__(self, c: str) -> str:
    return _KINDS[self.of_codepoints(np.array([ord(c)]))[0]]


_char_classes = _CharClasses()
_CONTROL, _GLYPH, _WORD, _SINGLE = (_KINDS.index(k) for k in ("control", "glyph", "word", "single"))
_MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word
_UNSET, _DELETED, _EXPANDED = -1, -2, -3  # _Folding's table beside code points


class _Folding:
  """Each code point as lower-casing and accent stripping leave it, asked of BERT's normaliser:
  one code point, _DELETED (an accent stripped away) or _EXPANDED (several code points).

  Accent stripping decomposes the whole text (NFD), which reorders adjacent combining marks by
  their class: a text where one character's decomposition ends in such a mark and the next one's
  begins with one is not folded character by character (`reorders`)."""

  def __init__(self, lowercase: bool, strip_accents: bool):
    self._normalizer = normalizers.BertNormalizer(
      clean_text=False, handle_chinese_chars=False, strip_accents=strip_accents, lowercase=lowercase
    )
    self._strip_accents = strip_accents
    self.table = np.full(0x110000, _UNSET, np.int32)
    # Bit 0: NFD begins with a combining mark; bit 1: ends with one. By Python's unicodedata (Unicode
    # 15.0 on 3.12): a mark the normaliser's newer tables know and these do not would go unseen.
    self._marks = np.zeros(0x110000, np.uint8)

  def __call__(self, codepoints: np.ndarray) -> np.ndarray:
    folded = self.table[codepoints]
    if (folded == _UNSET).any():
      for cp in np.unique(codepoints[folded == _UNSET]):
        out = self._normalizer.normalize_str(chr(cp))
        self.table[cp] = ord(out) if len(out) == 1 else _EXPANDED if out else _DELETED
        nfd = unicodedata.normalize("NFD", chr(cp))
        self._marks[cp] = (unicodedata.combining(nfd[0]) > 0) | (unicodedata.combining(nfd[-1]) > 0) << 1
      folded = self.table[codepoints]
    return folded

  def reorders(self, codepoints: np.ndarray) -> bool:
    """Whether decomposing these code points (already `__call__`ed, controls left out: BERT deletes
    them first) may reorder combining marks across them."""
    marks = self._marks[codepoints]
    return self._strip_accents and bool(((marks[1:] & 1) & (marks[:-1] >> 1)).any())

  def counts(self, counts: collections.Counter) -> collections.Counter:
    """`counts` of characters as counts of what they fold to (a stripped accent: nothing)."""
    folded = collections.Counter()
    for c, n in counts.items():
      for f in self._normalizer.normalize_str(c):
        folded[f] += n
    return folded


def _codepoints(text: str) -> np.ndarray:
  return np.frombuffer(text.encode("utf-32-le"), np.uint32)


def replace_deleted_glyphs(text: str) -> str:
  """Private-use/unassigned code points → UNKNOWN_GLYPH (same length)."""
  codepoints = _codepoints(text)
  is_glyph = _char_classes.of_codepoints(codepoints) == _GLYPH
  if not is_glyph.any():  # most texts: no np.unique, a third of this function's time
    return text
  return text.translate({int(cp): UNKNOWN_GLYPH for cp in np.unique(codepoints[is_glyph])})


def normalize(text: str, *, t2s: bool = True) -> str:
  """Length-preserving normalisation applied before tokenisation."""
  return replace_deleted_glyphs(to_simplified(text) if t2s else text)


def count_characters(texts: Iterable[str], *, t2s: bool = True) -> collections.Counter:
  counts = collections.Counter()
  for text in texts:
    counts.update(normalize(text, t2s=t2s))
  return counts


# Of the characters a vocabulary could hold, the share it may leave [UNK]: past MOST_UNKNOWN it is
# refused (max_vocab 5 built a corpus 99.75% [UNK], with not one character), past SOME_UNKNOWN warned of.
MOST_UNKNOWN, SOME_UNKNOWN = 0.5, 0.01


def build_vocab(
  texts: Iterable[str] | None = None,
  *,
  counts: collections.Counter | None = None,
  min_count: int = 1,
  max_size: int | None = None,
  t2s: bool = True,
) -> list[str]:
  """Special tokens, then characters by descending count (ties by code point), then the
  `##c` twins of the "word" characters among them.

  max_size bounds the whole vocabulary, twins and special tokens included. One that leaves most
  of the text's characters [UNK] (a max_size or min_count that keeps too few) is a ValueError.
  """
  if counts is None:
    counts = count_characters(texts, t2s=t2s)
  candidates = [c for c in counts if c != UNKNOWN_GLYPH and _char_classes(c) in ("word", "single")]
  chars = sorted((c for c in candidates if counts[c] >= min_count), key=lambda c: (-counts[c], ord(c)))
  vocab, twins = list(SPECIAL_TOKENS), []
  for c in chars:
    needed = 2 if _char_classes(c) == "word" else 1
    if max_size is not None and len(vocab) + len(twins) + needed > max_size:
      break
    vocab.append(c)
    if needed == 2:
      twins.append("##" + c)
  _check_coverage(counts, candidates, len(vocab) - len(SPECIAL_TOKENS), min_count, max_size)
  return vocab + twins


def _check_coverage(
  counts: collections.Counter, candidates: list[str], kept: int, min_count: int, max_size: int | None
) -> None:
  """Refuses (or warns of) a vocabulary whose `kept` most frequent candidates leave too many of
  the candidates' occurrences [UNK]."""
  total = sum(counts[c] for c in candidates)
  unknown = total - sum(sorted((counts[c] for c in candidates), reverse=True)[:kept])
  if not total or unknown <= SOME_UNKNOWN * total:
    return
  message = (
    f"a vocabulary of {kept:,} characters (max_vocab {max_size}, min_count {min_count}) leaves "
    f"{unknown / total:.2%} of the text's {total:,} characters [UNK]"
  )
  if unknown > MOST_UNKNOWN * total:
    raise ValueError(f"{message}; raise max_vocab (at least {len(SPECIAL_TOKENS) + 1}) or lower min_count")
  logging.warning("%s", message)


def unknown_share(unknown: int, tokens: int, log, *, advice: str = "") -> None:
  """States the share of a text's tokens a vocabulary leaves [UNK] with `log`; past SOME_UNKNOWN
  as a warning instead (with `advice`), as a vocabulary built here is warned of."""
  message = f"the vocabulary leaves {unknown / max(tokens, 1):.2%} of the text's {tokens:,} tokens [UNK]"
  if unknown > SOME_UNKNOWN * tokens:
    logging.warning("%s", f"{message}; {advice}" if advice else message)
  else:
    log(message)


# Code points a placeholder vocabulary takes, CJK first: every one but the surrogates.
_PLACEHOLDER_RANGES = (range(0x4E00, 0xD800), range(0xE000, 0x110000), range(0x4E00))
MAX_VOCAB_SIZE = len(SPECIAL_TOKENS) + sum(map(len, _PLACEHOLDER_RANGES))  # a character-level vocabulary's most


def placeholder(vocab_size: int) -> "Tokenizer":
  """A tokenizer of `vocab_size` tokens (the special ones first, as in every wyjax vocabulary,
  then characters; at most MAX_VOCAB_SIZE) for building a model of that size before any corpus exists."""
  characters = itertools.islice(itertools.chain(*_PLACEHOLDER_RANGES), vocab_size - len(SPECIAL_TOKENS))
  return Tokenizer(list(SPECIAL_TOKENS) + [chr(c) for c in characters])


class Tokenizer:
  """A char-level BERT tokenizer with a length-preserving normalisation in front.

  `lowercase` and `strip_accents` are transformers' do_lower_case and strip_accents (None: as
  lowercase).
  """

  def __init__(
    self,
    vocab: Sequence[str],
    *,
    t2s: bool = True,
    model_max_length: int = 512,
    lowercase: bool = False,
    strip_accents: bool | None = None,
  ):
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
      raise ValueError(f"vocabulary lacks the special tokens {missing}")
    if len(set(vocab)) != len(vocab):
      dup = [t for t, n in collections.Counter(vocab).items() if n > 1][:5]
      raise ValueError(f"vocabulary has duplicate tokens, e.g. {dup}")
    self.vocab = list(vocab)
    self.token_to_id = {t: i for i, t in enumerate(self.vocab)}
    self.t2s = t2s
    self.model_max_length = model_max_length
    self.lowercase = lowercase
    self.strip_accents = lowercase if strip_accents is None else strip_accents
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.token_to_id[t] for t in SPECIAL_TOKENS)
    self._backend = _bert_pipeline(self.token_to_id, self.lowercase, self.strip_accents)
    self._folding = _Folding(lowercase, self.strip_accents) if lowercase or self.strip_accents else None
    # code point → id of the token "c" and of its twin "##c" (-1 when absent): the fast path.
    self._char_ids = np.full(0x110000, -1, np.int32)
    self._twin_ids = np.full(0x110000, -1, np.int32)
    for token, i in self.token_to_id.items():
      char = token.removeprefix("##")
      if len(char) == 1 and char != UNKNOWN_GLYPH and _char_classes(char) in ("word", "single"):
        (self._twin_ids if token.startswith("##") else self._char_ids)[ord(char)] = i
    # The fast path is exact when every non-special token is one character or its twin.
    self._char_level = all(len(t.removeprefix("##")) == 1 for t in self.vocab if t not in SPECIAL_TOKENS)
    self._backend.post_processor = processors.TemplateProcessing(
      single=f"{CLS}:0 $A:0 {SEP}:0",
      pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
      special_tokens=[(CLS, self.cls_id), (SEP, self.sep_id)],
    )
    # Special tokens in raw text are matched as units, as transformers does.
    self._backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])

  def __len__(self) -> int:
    return len(self.vocab)

  def normalize(self, text: str) -> str:
    return normalize(text, t2s=self.t2s)

  def _encoding(self, enc: tokenizers.Encoding) -> Encoding:
    return Encoding(ids=enc.ids, type_ids=enc.type_ids, offsets=enc.offsets, sequence_ids=enc.sequence_ids)

  def encode(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True) -> Encoding:
    """Whole-string BERT tokenisation of normalize(text); offsets index the original text."""
    pair = None if pair is None else self.normalize(pair)
    return self._encoding(self._backend.encode(self.normalize(text), pair, add_special_tokens=add_special_tokens))

  def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[Encoding]:
    """Like encode, parallel over texts in the Rust backend."""
    normalized = [self.normalize(t) for t in texts]
    return [self._encoding(e) for e in self._backend.encode_batch(normalized, add_special_tokens=add_special_tokens)]

  def encode_ids(self, text: str) -> np.ndarray:
    """`encode(text, add_special_tokens=False).ids` as int32, computed in numpy: the corpus path.

    Reproduces BERT's rules per code point: CJK and punctuation are single tokens; a run of
    "word" characters is the token of its first character then `##` twins, or one [UNK] if
    any of them is missing or the run exceeds 100 characters. Texts holding special-token
    strings, a character lower-casing makes several or combining marks accent stripping may
    reorder, and vocabularies with multi-character tokens, go through the BERT pipeline.
    """
    return self.encode_ids_with_positions(text)[0]

  def encode_ids_with_positions(self, text: str) -> tuple[np.ndarray, np.ndarray]:
    """encode_ids and, per token, the position in `text` of its first character."""
    special = "[" in text and any(t in text for t in SPECIAL_TOKENS)
    codepoints, kinds = self._folded_kinds(text) if self._char_level and not special else (None, None)
    if codepoints is None:
      enc = self.encode(text, add_special_tokens=False)
      return np.asarray(enc.ids, np.int32), np.asarray([s for s, _ in enc.offsets], np.int64)
    # BERT deletes controls (and stripped accents) before splitting words.
    positions = np.flatnonzero(kinds != _CONTROL)
    codepoints, kinds = codepoints[positions], kinds[positions]
    is_word = kinds == _WORD
    continues = is_word & np.concatenate([[False], is_word[:-1]])
    ids = np.where(continues, self._twin_ids[codepoints], self._char_ids[codepoints])
    ids[kinds == _GLYPH] = self.unk_id
    token = kinds >= _GLYPH
    if is_word.any():
      word = np.cumsum(is_word & ~continues) - 1
      bad = np.bincount(word[is_word & (ids < 0)], minlength=word.max() + 1) > 0
      bad |= np.bincount(word[is_word], minlength=word.max() + 1) > _MAX_WORD_CHARS
      in_bad_word = is_word & bad[np.maximum(word, 0)]
      ids[in_bad_word] = self.unk_id
      token &= ~(in_bad_word & continues)  # one [UNK] per bad word
    ids, positions = ids[token], positions[token]
    ids[ids < 0] = self.unk_id
    return ids, positions

  def encode_chars(self, text: str) -> tuple[np.ndarray, np.ndarray]:
    """One token per visible character, for character-labelled tasks (PUNC, NER).

    Returns (ids, char_index): char_index[t] is the position in `text` of token t.
    Whitespace and invisible control characters get no token; an accent a lower-casing
    tokenizer strips away does get one, [UNK].
    """
    # Glyphs BERT would delete have no entry in _char_ids, so they map to [UNK] here directly.
    codepoints = _codepoints(to_simplified(text) if self.t2s else text)
    index = np.flatnonzero(_char_classes.of_codepoints(codepoints) >= _GLYPH).astype(np.int32)
    codepoints = codepoints[index]
    if self._folding is not None:  # an accent stripped away or a character folded to several: [UNK]
      folded = self._folding(codepoints)
      codepoints = np.where(folded >= 0, folded, ord(UNKNOWN_GLYPH))
    ids = self._char_ids[codepoints]
    return np.where(ids < 0, self.unk_id, ids).astype(np.int32), index

  def folded_counts(self, counts: collections.Counter) -> collections.Counter:
    """Character counts as this tokenizer's lower-casing and accent stripping leave the characters:
    what a vocabulary extending this one should count."""
    return self._folding.counts(counts) if self._folding else counts

  def _folded_kinds(self, text: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The code points of `text` as the normaliser leaves them and their kinds, one per character
    (a stripped accent a control); (None, None) where a character becomes several or combining
    marks may be reordered."""
    codepoints = _codepoints(to_simplified(text) if self.t2s else text)
    kinds = _char_classes.of_codepoints(codepoints)
    if self._folding is None:
      return codepoints, kinds
    folded = self._folding(codepoints)
    if (folded == _EXPANDED).any() or self._folding.reorders(codepoints[kinds != _CONTROL]):
      return None, None
    deleted = folded == _DELETED
    codepoints = np.where(deleted, codepoints, folded).astype(codepoints.dtype)
    kinds = _char_classes.of_codepoints(codepoints)
    kinds[deleted] = _CONTROL
    return codepoints, kinds

  def decode(self, ids) -> str:
    """The text of token ids without special tokens; a '##' twin joins the word before it."""
    return "".join(self.vocab[i].removeprefix("##") for i in ids if self.vocab[i] not in SPECIAL_TOKENS)

  def unk_rate(self, texts: Iterable[str]) -> float:
    ids = [self.encode_ids(t) for t in texts]
    total = sum(map(len, ids))
    return sum(int((i == self.unk_id).sum()) for i in ids) / max(total, 1)

  # --- files -------------------------------------------------------------------------------

  def files(self) -> dict[str, str]:
    """{name: text} of vocab.txt, tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    special = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
    config = {
      "tokenizer_class": "BertTokenizer",
      "do_lower_case": self.lowercase,
      "strip_accents": self.strip_accents,
      "tokenize_chinese_chars": True,
      "model_max_length": self.model_max_length,
      **special,
      # Read by wyjax only: inputs go through OpenCC t2s before tokenisation.
      "wyjax_t2s": self.t2s,
    }
    return {
      "vocab.txt": "".join(t + "\n" for t in self.vocab),
      "tokenizer.json": self._backend.to_str(pretty=True),
      "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2),
      "special_tokens_map.json": json.dumps(special, indent=2),
    }

  def save(self, directory) -> None:
    directory = epath.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in self.files().items():
      (directory / name).write_text(text, encoding="utf-8")

  @classmethod
  def load(cls, directory) -> "Tokenizer":
    """The tokenizer saved in `directory`. A vocab.txt an editor saved with a byte-order mark reads
    as without one (its first token was "\\ufeff[PAD]": "lacks the special tokens ['[PAD]']"), and
    a vocabulary wyjax cannot use is an error naming the file. It lower-cases unless
    tokenizer_config.json says do_lower_case false, as transformers' BertTokenizer does."""
    directory = epath.Path(directory)
    vocab_file = directory / "vocab.txt"
    vocab = vocab_file.read_text(encoding="utf-8").removeprefix("\ufeff").split("\n")
    if vocab and vocab[-1] == "":
      vocab.pop()
    config_file = directory / "tokenizer_config.json"
    config = read_json(config_file) if config_file.exists() else {}
    if "do_lower_case" not in config:
      logging.info(
        "%s: no do_lower_case in %s: lower-casing, as transformers' BertTokenizer does", directory, config_file.name
      )
    if not config.get("tokenize_chinese_chars", True):
      raise ValueError(
        f"{config_file}: tokenize_chinese_chars false is not supported: wyjax's tokenizer "
        "makes every CJK character its own token"
      )
    max_length = int(config.get("model_max_length", 512))
    try:
      return cls(
        vocab,
        t2s=config.get("wyjax_t2s", False),
        model_max_length=max_length,
        lowercase=bool(config.get("do_lower_case", True)),
        strip_accents=config.get("strip_accents"),
      )
    except ValueError as e:
      raise ValueError(f"{vocab_file}: {e}") from None

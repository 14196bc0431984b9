"""Character-level BERT tokenizer: vocabulary building, encoding with offsets, HF files.

The exported folder loads with `transformers.AutoTokenizer` as a fast `BertTokenizer`.
transformers 5 rebuilds that tokenizer's pipeline from its arguments (ignoring the
pre-tokenizer in tokenizer.json), so wyjax encodes with exactly that pipeline — BERT
normaliser (no lower-casing, no accent stripping), BERT pre-tokenizer, WordPiece — and ids
are identical by construction; tests/data/tokenizer_test.py checks it on real data.

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
import json
import pathlib
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
import tokenizers
from tokenizers import normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

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


def _bert_pipeline(vocab: dict[str, int] | None) -> tokenizers.Tokenizer:
  tk = tokenizers.Tokenizer(WordPiece(vocab or {UNK: 0}, unk_token=UNK, max_input_chars_per_word=100))
  tk.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False)
  tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tk


class _CharClasses:
  """What BERT's pipeline does with each character, asked of the pipeline itself."""

  def __init__(self):
    self._pipeline = _bert_pipeline(None)
    self._cache: dict[str, str] = {}

  def __call__(self, c: str) -> str:
    """'space', 'control' (deleted, invisible), 'glyph' (deleted, visible), 'word' or 'single'."""
    kind = self._cache.get(c)
    if kind is None:
      normalized = self._pipeline.normalizer.normalize_str(c)
      if not normalized:
        kind = "control" if unicodedata.category(c) in ("Cc", "Cf") else "glyph"
      elif not normalized.strip():
        kind = "space"
      else:
        pieces = self._pipeline.pre_tokenizer.pre_tokenize_str(
            self._pipeline.normalizer.normalize_str(c + c))
        kind = "word" if len(pieces) == 1 else "single"
      self._cache[c] = kind
    return kind


_char_classes = _CharClasses()


def replace_deleted_glyphs(text: str) -> str:
  """Private-use/unassigned code points → UNKNOWN_GLYPH (same length)."""
  glyphs = {c for c in set(text) if _char_classes(c) == "glyph"}
  if not glyphs:
    return text
  return text.translate({ord(c): UNKNOWN_GLYPH for c in glyphs})


def normalize(text: str, *, t2s: bool = True) -> str:
  """Length-preserving normalisation applied before tokenisation."""
  return replace_deleted_glyphs(to_simplified(text) if t2s else text)


def count_characters(texts: Iterable[str], *, t2s: bool = True) -> collections.Counter:
  counts = collections.Counter()
  for text in texts:
    counts.update(normalize(text, t2s=t2s))
  return counts


def build_vocab(texts: Iterable[str] | None = None, *, counts: collections.Counter | None = None,
                min_count: int = 1, max_size: int | None = None, t2s: bool = True) -> list[str]:
  """Special tokens, then characters by descending count (ties by code point), then the
  `##c` twins of the "word" characters among them.

  max_size bounds the whole vocabulary, twins and special tokens included.
  """
  if counts is None:
    counts = count_characters(texts, t2s=t2s)
  chars = [c for c, n in counts.items()
           if n >= min_count and c != UNKNOWN_GLYPH and _char_classes(c) in ("word", "single")]
  chars.sort(key=lambda c: (-counts[c], ord(c)))
  vocab, twins = list(SPECIAL_TOKENS), []
  for c in chars:
    needed = 2 if _char_classes(c) == "word" else 1
    if max_size is not None and len(vocab) + len(twins) + needed > max_size:
      break
    vocab.append(c)
    if needed == 2:
      twins.append("##" + c)
  return vocab + twins


class Tokenizer:
  """A char-level BERT tokenizer with a length-preserving normalisation in front."""

  def __init__(self, vocab: Sequence[str], *, t2s: bool = True, model_max_length: int = 512):
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
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.token_to_id[t] for t in SPECIAL_TOKENS)
    self._backend = _bert_pipeline(self.token_to_id)
    self._backend.post_processor = processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, self.cls_id), (SEP, self.sep_id)],
    )
    # Special tokens in raw text are matched as units, as transformers does.
    self._backend.add_special_tokens([
        tokenizers.AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])

  def __len__(self) -> int:
    return len(self.vocab)

  def normalize(self, text: str) -> str:
    return normalize(text, t2s=self.t2s)

  def _encoding(self, enc: tokenizers.Encoding) -> Encoding:
    return Encoding(ids=enc.ids, type_ids=enc.type_ids, offsets=enc.offsets,
                    sequence_ids=enc.sequence_ids)

  def encode(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True) -> Encoding:
    """Whole-string BERT tokenisation of normalize(text); offsets index the original text."""
    pair = None if pair is None else self.normalize(pair)
    return self._encoding(self._backend.encode(
        self.normalize(text), pair, add_special_tokens=add_special_tokens))

  def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[Encoding]:
    """Like encode, parallel over texts in the Rust backend."""
    normalized = [self.normalize(t) for t in texts]
    return [self._encoding(e) for e in
            self._backend.encode_batch(normalized, add_special_tokens=add_special_tokens)]

  def encode_ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
    """Token ids without special tokens: the corpus-preparation fast path."""
    normalized = [self.normalize(t) for t in texts]
    return [e.ids for e in self._backend.encode_batch_fast(normalized, add_special_tokens=False)]

  def encode_chars(self, text: str) -> tuple[np.ndarray, np.ndarray]:
    """One token per visible character, for character-labelled tasks (PUNC, NER).

    Returns (ids, char_index): char_index[t] is the position in `text` of token t.
    Whitespace and invisible control characters get no token.
    """
    normalized = self.normalize(text)
    ids, index = [], []
    for i, c in enumerate(normalized):
      if _char_classes(c) in ("space", "control"):
        continue
      ids.append(self.token_to_id.get(c, self.unk_id))
      index.append(i)
    return np.asarray(ids, np.int32), np.asarray(index, np.int32)

  def unk_rate(self, texts: Iterable[str]) -> float:
    total = unknown = 0
    for enc in self.encode_batch(list(texts), add_special_tokens=False):
      total += len(enc.ids)
      unknown += sum(i == self.unk_id for i in enc.ids)
    return unknown / max(total, 1)

  # --- files -------------------------------------------------------------------------------

  def save(self, directory) -> None:
    """vocab.txt, tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in self.vocab), encoding="utf-8")
    self._backend.save(str(directory / "tokenizer.json"))
    special = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": False,
        "strip_accents": False,
        "tokenize_chinese_chars": True,
        "model_max_length": self.model_max_length,
        **special,
        # Read by wyjax only: inputs go through OpenCC t2s before tokenisation.
        "wyjax_t2s": self.t2s,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2))
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2))

  @classmethod
  def load(cls, directory) -> "Tokenizer":
    directory = pathlib.Path(directory)
    vocab_file = directory / "vocab.txt"
    vocab = vocab_file.read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
      vocab.pop()
    config_file = directory / "tokenizer_config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    if config.get("do_lower_case", False):
      raise ValueError(f"{config_file}: do_lower_case=true is not supported by wyjax's tokenizer")
    return cls(vocab, t2s=config.get("wyjax_t2s", False),
               model_max_length=int(config.get("model_max_length", 512)))

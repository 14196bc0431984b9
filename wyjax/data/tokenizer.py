"""Character-level BERT tokenizer: vocabulary building, encoding with offsets, HF tokenizer files.

The exported folder loads with `transformers.AutoTokenizer` as a fast `BertTokenizer`, and wyjax encodes
with the same pipeline (BERT normaliser, BERT pre-tokenizer, WordPiece), so the ids are identical:
- every CJK ideograph and every punctuation mark is its own token;
- runs of other "word" characters (Latin letters, digits, 〇, symbols) are split by WordPiece, so the
  vocabulary carries a `##c` twin for each such character;
- whitespace gives no token; `Encoding.offsets` maps each token to its characters in the original text;
- private-use and unassigned code points, which BERT deletes, become UNKNOWN_GLYPH, then [UNK].
"""

import collections
import dataclasses
import itertools
import json
import logging
from collections.abc import Iterable, Sequence

import numpy as np
import tokenizers
from etils import epath
from tokenizers import pre_tokenizers, processors
from tokenizers.models import WordPiece

from wyjax.core.storage import read_json
from wyjax.data import bert_chars
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


def _bert_pipeline(vocab: dict[str, int], lowercase: bool, strip_accents: bool) -> tokenizers.Tokenizer:
  tk = tokenizers.Tokenizer(WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=bert_chars.MAX_WORD_CHARS))
  tk.normalizer = bert_chars.normalizer(lowercase, strip_accents)
  tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tk


def replace_deleted_glyphs(text: str) -> str:
  """Private-use/unassigned code points → UNKNOWN_GLYPH (same length)."""
  codepoints = bert_chars.codepoints_of(text)
  is_glyph = bert_chars.char_classes.of_codepoints(codepoints) == bert_chars.GLYPH
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
# refused, past SOME_UNKNOWN warned of.
MOST_UNKNOWN, SOME_UNKNOWN = 0.5, 0.01


def build_vocab(
  texts: Iterable[str] | None = None,
  *,
  counts: collections.Counter | None = None,
  min_count: int = 1,
  max_size: int | None = None,
  t2s: bool = True,
  extends: Sequence[str] = (),
) -> list[str]:
  """Special tokens, then characters by descending count (ties by code point), then the word characters' `##c` twins.

  max_size bounds the whole vocabulary, twins and special tokens included. `extends`: the vocabulary the
  built one is appended to (vocab_map.extended), whose characters count as known.

  Raises:
    ValueError: the vocabulary (with `extends`) leaves most of the text's characters [UNK] (max_size or
      min_count keep too few).
  """
  if counts is None:
    counts = count_characters(texts, t2s=t2s)
  candidates = [c for c in counts if c != UNKNOWN_GLYPH and bert_chars.char_classes(c) in ("word", "single")]
  chars = sorted((c for c in candidates if counts[c] >= min_count), key=lambda c: (-counts[c], ord(c)))
  vocab, twins = list(SPECIAL_TOKENS), []
  for c in chars:
    needed = 2 if bert_chars.char_classes(c) == "word" else 1
    if max_size is not None and len(vocab) + len(twins) + needed > max_size:
      break
    vocab.append(c)
    if needed == 2:
      twins.append("##" + c)
  _check_coverage(counts, candidates, {*vocab, *extends}, min_count, max_size)
  return vocab + twins


def _check_coverage(
  counts: collections.Counter, candidates: list[str], known: set[str], min_count: int, max_size: int | None
) -> None:
  """Refuses (or warns of) a vocabulary whose `known` tokens leave too many of the candidates' occurrences [UNK]."""
  total = sum(counts[c] for c in candidates)
  unknown = sum(counts[c] for c in candidates if c not in known)
  if not total or unknown <= SOME_UNKNOWN * total:
    return
  message = (
    f"a vocabulary of {sum(c in known for c in candidates):,} characters (max_vocab {max_size}, min_count "
    f"{min_count}) leaves {unknown / total:.2%} of the text's {total:,} characters [UNK]"
  )
  if unknown > MOST_UNKNOWN * total:
    raise ValueError(f"{message}; raise max_vocab (at least {len(SPECIAL_TOKENS) + 1}) or lower min_count")
  logging.warning("%s", message)


def unknown_share(unknown: int, tokens: int, log, *, advice: str = "") -> None:
  """Logs the share of a text's tokens a vocabulary leaves [UNK]: a warning with `advice` past SOME_UNKNOWN."""
  message = f"the vocabulary leaves {unknown / max(tokens, 1):.2%} of the text's {tokens:,} tokens [UNK]"
  if unknown > SOME_UNKNOWN * tokens:
    logging.warning("%s", f"{message}; {advice}" if advice else message)
  else:
    log(message)


# Code points a placeholder vocabulary takes, CJK first: every one but the surrogates.
_PLACEHOLDER_RANGES = (range(0x4E00, 0xD800), range(0xE000, 0x110000), range(0x4E00))
MAX_VOCAB_SIZE = len(SPECIAL_TOKENS) + sum(map(len, _PLACEHOLDER_RANGES))  # a character-level vocabulary's most


def placeholder(vocab_size: int) -> "Tokenizer":
  """A tokenizer of `vocab_size` tokens (at most MAX_VOCAB_SIZE), to build a model before any corpus exists.

  The special tokens come first, as in every wyjax vocabulary, then characters.
  """
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
    self._folding = bert_chars.Folding(lowercase, self.strip_accents) if lowercase or self.strip_accents else None
    # code point → id of the token "c" and of its twin "##c" (-1 when absent): the fast path.
    self._char_ids = np.full(0x110000, -1, np.int32)
    self._twin_ids = np.full(0x110000, -1, np.int32)
    for token, i in self.token_to_id.items():
      char = token.removeprefix("##")
      if len(char) == 1 and char != UNKNOWN_GLYPH and bert_chars.char_classes(char) in ("word", "single"):
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
    positions = np.flatnonzero(kinds != bert_chars.CONTROL)
    codepoints, kinds = codepoints[positions], kinds[positions]
    is_word = kinds == bert_chars.WORD
    continues = is_word & np.concatenate([[False], is_word[:-1]])
    ids = np.where(continues, self._twin_ids[codepoints], self._char_ids[codepoints])
    ids[kinds == bert_chars.GLYPH] = self.unk_id
    token = kinds >= bert_chars.GLYPH
    if is_word.any():
      word = np.cumsum(is_word & ~continues) - 1
      bad = np.bincount(word[is_word & (ids < 0)], minlength=word.max() + 1) > 0
      bad |= np.bincount(word[is_word], minlength=word.max() + 1) > bert_chars.MAX_WORD_CHARS
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
    codepoints = bert_chars.codepoints_of(to_simplified(text) if self.t2s else text)
    index = np.flatnonzero(bert_chars.char_classes.of_codepoints(codepoints) >= bert_chars.GLYPH).astype(np.int32)
    codepoints = codepoints[index]
    if self._folding is not None:  # an accent stripped away or a character folded to several: [UNK]
      folded = self._folding(codepoints)
      codepoints = np.where(folded >= 0, folded, ord(UNKNOWN_GLYPH))
    ids = self._char_ids[codepoints]
    return np.where(ids < 0, self.unk_id, ids).astype(np.int32), index

  def folded_counts(self, counts: collections.Counter) -> collections.Counter:
    """Character counts as this tokenizer's casing folds them: what a vocabulary extending this one counts."""
    return self._folding.counts(counts) if self._folding else counts

  def _folded_kinds(self, text: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The code points of `text` as the normaliser leaves them, and their kinds (a stripped accent: a control).

    (None, None) where a character becomes several, or combining marks may be reordered.
    """
    codepoints = bert_chars.codepoints_of(to_simplified(text) if self.t2s else text)
    kinds = bert_chars.char_classes.of_codepoints(codepoints)
    if self._folding is None:
      return codepoints, kinds
    folded = self._folding(codepoints)
    if (folded == bert_chars.EXPANDED).any() or self._folding.reorders(codepoints[kinds != bert_chars.CONTROL]):
      return None, None
    deleted = folded == bert_chars.DELETED
    codepoints = np.where(deleted, codepoints, folded).astype(codepoints.dtype)
    kinds = bert_chars.char_classes.of_codepoints(codepoints)
    kinds[deleted] = bert_chars.CONTROL
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
    """The tokenizer saved in `directory`: its vocab.txt, else the WordPiece vocabulary of its tokenizer.json.

    It lower-cases unless tokenizer_config.json says do_lower_case false, as transformers' BertTokenizer does.
    A byte-order mark before vocab.txt's first token is ignored.

    Raises:
      ValueError: a vocabulary wyjax cannot use, naming the file.
    """
    directory = epath.Path(directory)
    vocab_file = directory / "vocab.txt"
    if vocab_file.exists() or not (directory / "tokenizer.json").exists():
      vocab = vocab_file.read_text(encoding="utf-8").removeprefix("\ufeff").split("\n")
      if vocab and vocab[-1] == "":
        vocab.pop()
    else:  # a fast tokenizer's folder without vocab.txt
      vocab_file = directory / "tokenizer.json"
      vocab = _wordpiece_vocab(vocab_file)
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


def _wordpiece_vocab(path: epath.Path) -> list[str]:
  """The tokens, in id order, of the WordPiece model (BERT's) in a tokenizer.json."""
  model = read_json(path).get("model") or {}
  if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##":
    raise ValueError(
      f"{path}: its model is {model.get('type', 'of no type')}, not BERT's WordPiece: wyjax's tokenizer is "
      "BERT's, character by character; pass a BERT vocabulary (vocab.txt)"
    )
  ids = {i: token for token, i in model.get("vocab", {}).items()}
  if sorted(ids) != list(range(len(model.get("vocab", {})))):
    raise ValueError(f"{path}: its WordPiece vocabulary's ids are not 0, 1, 2, … each once")
  return [ids[i] for i in range(len(ids))]

import json
import pathlib
import re
import unicodedata

import numpy as np
import pytest
import transformers

from wyjax.data import tokenizer as tk
from wyjax.data.normalize import to_simplified


def _texts(path: pathlib.Path) -> list[str]:
  """Every text field of a WYWEB file: TSV columns, or every string in JSON / JSON Lines."""
  raw = path.read_text(encoding="utf-8")
  if path.suffix == ".tsv":
    return [field for line in raw.split("\n") for field in line.split("\t") if field.strip()]
  docs = (
    [json.loads(line) for line in raw.splitlines() if line.strip()] if path.suffix == ".jsonl" else [json.loads(raw)]
  )
  out = []

  def walk(x):
    if isinstance(x, str):
      out.append(x) if x.strip() else None
    elif isinstance(x, dict):
      for v in x.values():
        walk(v)
    elif isinstance(x, list):
      for v in x:
        walk(v)

  for doc in docs:
    walk(doc)
  return out


def _visible(c: str) -> bool:
  """Not whitespace and not an invisible control/format character (glyphs, PUA included)."""
  return not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf")


@pytest.fixture(scope="module")
def wyweb_files(shared_data):
  files = sorted(p for p in (shared_data / "wyweb").rglob("*") if p.suffix in (".tsv", ".json", ".jsonl"))
  assert len(files) == 14
  return {f"{p.parent.name}/{p.name}": _texts(p) for p in files}


@pytest.fixture(scope="module")
def tokenizer(wyweb_files):
  train = [t for name, texts in wyweb_files.items() if "train" in name for t in texts]
  return tk.Tokenizer(tk.build_vocab(train, min_count=2))


@pytest.mark.parametrize("t2s", [True, False])
def test_ids_equal_autotokenizer_on_every_wyweb_text(wyweb_files, tokenizer, t2s, tmp_path, capsys):
  ours = tk.Tokenizer(tokenizer.vocab, t2s=t2s)
  ours.save(tmp_path)
  theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
  assert theirs.is_fast and type(theirs).__name__ in ("BertTokenizer", "BertTokenizerFast")
  total = 0
  for name, texts in wyweb_files.items():
    expected = theirs([ours.normalize(t) for t in texts])["input_ids"]
    got = [e.ids for e in ours.encode_batch(texts)]
    mismatches = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    assert not mismatches, f"{name}: {len(mismatches)} texts differ, first {texts[mismatches[0]]!r}"
    total += len(texts)
    if t2s:
      with capsys.disabled():
        print(f"\n  UNK rate {name}: {ours.unk_rate(texts):.4%} of {sum(len(t) for t in texts):,} chars", end="")
  assert total > 100_000


def test_fast_corpus_path_equals_the_bert_pipeline(wyweb_files, tokenizer):
  extra = [
    "子曰 abc 〇〇一 [MASK] x\ue3ab y",
    "學\U000f2cf4而",
    "ⅠⅡ 12:30 ＡＢ",
    "\x00\u200b天",
    "a\x00b 天",
    "ab€c 之",
    "a" * 100 + " " + "b" * 101 + "之",
    "01ⅰⅰ02ⅱⅱ03ⅴⅲ",
    "Hello, 世界 HT",
  ]
  for texts in [*wyweb_files.values(), extra]:
    for text, enc in zip(texts, tokenizer.encode_batch(texts, add_special_tokens=False)):
      assert tokenizer.encode_ids(text).tolist() == enc.ids, text


def test_offsets_point_at_the_original_characters(wyweb_files, tokenizer):
  checked = 0
  for texts in wyweb_files.values():
    for text, enc in zip(texts, tokenizer.encode_batch(texts, add_special_tokens=False)):
      normalized = tokenizer.normalize(text)
      assert len(normalized) == len(text)
      covered = np.zeros(len(text), bool)
      for token_id, (start, end) in zip(enc.ids, enc.offsets):
        token = tokenizer.vocab[token_id]
        if token_id != tokenizer.unk_id:
          assert normalized[start:end] == token.removeprefix("##")
        covered[start:end] = True
      # Every character without a token is whitespace or an invisible control character.
      uncovered = {text[i] for i in np.flatnonzero(~covered)}
      assert not any(_visible(c) for c in uncovered), uncovered
      checked += 1
  assert checked > 100_000


def test_encode_chars_gives_one_token_per_visible_character(wyweb_files, tokenizer):
  for texts in wyweb_files.values():
    for text in texts[:2000]:
      ids, index = tokenizer.encode_chars(text)
      visible = [i for i, c in enumerate(text) if _visible(c)]
      assert index.tolist() == visible
      normalized = tokenizer.normalize(text)
      for token_id, i in zip(ids, index):
        assert token_id == tokenizer.token_to_id.get(normalized[i], tokenizer.unk_id)


def test_whitespace_never_shifts_offsets():
  tokenizer = tk.Tokenizer(tk.build_vocab(["天下大勢，分久必合"]))
  text = "天下 大勢\u3000，分\t久必合 "
  enc = tokenizer.encode(text, add_special_tokens=False)
  assert [text[s:e] for s, e in enc.offsets] == ["天", "下", "大", "勢", "，", "分", "久", "必", "合"]
  ids, index = tokenizer.encode_chars(text)
  assert "".join(text[i] for i in index) == "天下大勢，分久必合"
  assert ids.tolist() == enc.ids


def test_private_use_glyphs_become_unk_instead_of_vanishing():
  tokenizer = tk.Tokenizer(tk.build_vocab(["之乎者也"]))
  text = "之\ue3ab乎\U000f2cf4者"
  enc = tokenizer.encode(text, add_special_tokens=False)
  assert enc.ids == [
    tokenizer.token_to_id["之"],
    tokenizer.unk_id,
    tokenizer.token_to_id["乎"],
    tokenizer.unk_id,
    tokenizer.token_to_id["者"],
  ]
  assert [s for s, _ in enc.offsets] == [0, 1, 2, 3, 4]


def test_t2s_is_default_and_switchable():
  vocab = tk.build_vocab(["学而时习之"])
  assert (
    tk.Tokenizer(vocab).encode("學而時習之", add_special_tokens=False).ids
    == tk.Tokenizer(vocab).encode("学而时习之", add_special_tokens=False).ids
  )
  assert tk.Tokenizer(vocab, t2s=False).encode("學", add_special_tokens=False).ids == [1]


def test_to_simplified_preserves_length_on_phrases():
  for text in ["乾隆皇帝", "後來於是", "髮鬚", "學而時習之，不亦說乎？"]:
    assert len(to_simplified(text)) == len(text)


def test_build_vocab_min_count_and_max_size():
  texts = ["甲" * 12 + "乙乙丙", "ab a"]  # (甲 so frequent that max_size 7 leaves fewer than half [UNK])
  vocab = tk.build_vocab(texts, min_count=2)
  assert vocab[:5] == list(tk.SPECIAL_TOKENS)
  assert vocab[5:] == ["甲", "a", "乙", "##a"]  # by count, then code point; ## twins last
  # A "word" character needs two slots (itself and its twin); less frequent ones never jump it.
  assert tk.build_vocab(texts, max_size=8)[5:] == ["甲", "a", "##a"]
  assert tk.build_vocab(texts, max_size=7)[5:] == ["甲"]


def test_pair_encoding_has_token_types():
  tokenizer = tk.Tokenizer(tk.build_vocab(["子曰学而"]))
  enc = tokenizer.encode("子曰", "学而")
  assert enc.ids[0] == tokenizer.cls_id and enc.ids.count(tokenizer.sep_id) == 2
  assert enc.type_ids == [0, 0, 0, 0, 1, 1, 1]


def test_save_load_round_trip(tmp_path):
  tokenizer = tk.Tokenizer(tk.build_vocab(["子曰学而时习之 abc"]), t2s=False)
  tokenizer.save(tmp_path)
  loaded = tk.Tokenizer.load(tmp_path)
  assert loaded.vocab == tokenizer.vocab and loaded.t2s is False


def test_a_vocabulary_leaving_most_characters_unknown_is_refused_and_a_lossy_one_warned(caplog):
  """prepare-corpus --max_vocab=5 built a corpus 99.75% [UNK] without a word: the 5 special tokens."""
  counts = tk.count_characters(["學而" * 20 + "時習之不亦說乎有朋" * 10 + "遠"])
  with pytest.raises(
    ValueError,
    match=re.escape(
      "a vocabulary of 0 characters (max_vocab 5, min_count 1) leaves "
      "100.00% of the text's 131 characters [UNK]; raise max_vocab "
      "(at least 6) or lower min_count"
    ),
  ):
    tk.build_vocab(counts=counts, max_size=5)
  with pytest.raises(ValueError, match=re.escape("leaves 69.47% of the text's 131 characters")):
    tk.build_vocab(counts=counts, min_count=11)
  assert "远" not in tk.build_vocab(counts=counts, min_count=2) and "leaves 0.76%" not in caplog.text
  assert len(tk.build_vocab(counts=counts, max_size=15)) == 15 and "leaves 8.40% of the text's 131" in caplog.text


def test_a_vocab_file_with_a_byte_order_mark_loads_and_a_bad_one_names_its_file(tmp_path):
  """An editor's BOM made the first token "\\ufeff[PAD]": "lacks the special tokens ['[PAD]']"."""
  tokenizer = tk.Tokenizer(tk.build_vocab(["學而時習之"]))
  tokenizer.save(tmp_path)
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_bytes(b"\xef\xbb\xbf" + vocab_file.read_bytes())
  assert tk.Tokenizer.load(tmp_path).vocab == tokenizer.vocab
  vocab_file.write_text("".join(t + "\n" for t in tokenizer.vocab[1:]), encoding="utf-8")
  with pytest.raises(ValueError, match=re.escape(f"{vocab_file}: vocabulary lacks the special tokens ['[PAD]']")):
    tk.Tokenizer.load(tmp_path)


def _published_folder(folder: pathlib.Path, vocab: list[str], tokenizer_config: dict) -> pathlib.Path:
  """A BERT folder as published Chinese checkpoints ship one: vocab.txt, config.json, tokenizer_config.json."""
  folder.mkdir()
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
  (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
  (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
  return folder


def _folded(c: str, strip_accents: bool) -> str:
  """What BERT's normaliser makes of one character, by the Unicode rules it follows."""
  if strip_accents:
    c = "".join(d for d in unicodedata.normalize("NFD", c) if unicodedata.category(d) != "Mn")
  return c.lower()


@pytest.mark.parametrize("tokenizer_config", [{"init_inputs": []}, {"do_lower_case": True, "strip_accents": False}])
def test_a_lower_casing_vocabulary_encodes_as_transformers_does(shared_data, tokenizer_config, tmp_path):
  """RoBERTa-wwm-ext's tokenizer_config.json names no do_lower_case, so transformers lower-cases
  and strips accents; wyjax read such a folder as cased, and every upper-case word of IFLYTEK
  became [UNK]. Its dev texts, Greek, accents and random characters are encoded as transformers
  encodes them, by both paths, and saved they load so again."""
  lines = (shared_data / "clue" / "iflytek" / "dev.json").read_text(encoding="utf-8").split("\n")
  iflytek = [json.loads(line)["sentence"] for line in lines if line]
  # An uncased vocabulary, as Chinese BERT's, with combining marks NFD reorders and accent stripping
  # keeps (Mn of class 230 before Mc of 9; Mc of 226 before Mc of 216).
  marks = ["\u1dfb", "\u1bf3", "\U0001d16d", "\U0001d165"]
  vocab = tk.build_vocab([t.lower() for t in iflytek], t2s=False) + marks + ["##" + m for m in marks]
  folder = _published_folder(tmp_path / "published", vocab, tokenizer_config)
  ours, theirs = tk.Tokenizer.load(folder), transformers.AutoTokenizer.from_pretrained(folder)
  strip_accents = tokenizer_config.get("strip_accents", True)
  assert ours.lowercase and ours.strip_accents == strip_accents
  rng = np.random.default_rng(0)
  pool = [chr(c) for c in range(0x20, 0x3400)]  # Latin, Greek, Cyrillic, combining marks, Hangul jamo, CJK symbols
  extra = "ΑΣ İx ǅ Ⅻ ＡＢ Émile e\u0301 \u0301a 한 [MASK]A"
  texts = [*iflytek, extra, "x\u1dfb\u1bf3", "x\U0001d16d\u200b\U0001d165"] + [
    "".join(rng.choice(pool, 100)) for _ in range(200)
  ]
  expected = theirs([ours.normalize(t) for t in texts])["input_ids"]
  fast = [[ours.cls_id, *ours.encode_ids(t), ours.sep_id] for t in texts]
  for encoded in ([e.ids for e in ours.encode_batch(texts)], fast):
    mismatches = [i for i, (a, b) in enumerate(zip(encoded, expected)) if a != b]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ, first {texts[mismatches[0]]!r}"
  cased = tk.Tokenizer(vocab, t2s=False)
  unknown = [sum(int((t.encode_ids(text) == t.unk_id).sum()) for text in iflytek) for t in (cased, ours)]
  assert unknown[0] > 1000 > 10 * unknown[1], unknown
  for text in [extra, *iflytek[:300]]:
    ids, index = ours.encode_chars(text)
    assert index.tolist() == [i for i, c in enumerate(text) if _visible(c)]
    assert ids.tolist() == [ours.token_to_id.get(_folded(text[i], strip_accents), ours.unk_id) for i in index]
  ours.save(tmp_path / "saved")
  again = transformers.AutoTokenizer.from_pretrained(tmp_path / "saved")
  assert again(texts[-1])["input_ids"] == expected[-1] and tk.Tokenizer.load(tmp_path / "saved").lowercase


def test_a_vocabulary_that_does_not_split_chinese_characters_is_refused(tmp_path):
  folder = _published_folder(tmp_path / "published", list(tk.SPECIAL_TOKENS), {"tokenize_chinese_chars": False})
  with pytest.raises(ValueError, match=re.escape(f"{folder / 'tokenizer_config.json'}: tokenize_chinese_chars false")):
    tk.Tokenizer.load(folder)

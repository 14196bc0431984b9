"""prepare-corpus's --vocab takes what names a vocabulary, refuses the rest in one line naming what was typed, and
checks [UNK] on the vocabulary it writes; a refused prepare-corpus leaves --out as it was (issue 84, items 5 and 6)."""

import json
import re
import subprocess
import sys

import pytest

from wyjax.core import checkpoints, guards
from wyjax.data import corpus_vocab, prepare
from wyjax.data import tokenizer as tk

TEXT = "學而時習之，不亦說乎？有朋自遠方來，不亦樂乎？人不知而不慍，不亦君子乎？\n"


def _texts(folder, text=TEXT):
  folder.mkdir()
  (folder / "a.txt").write_text(text, encoding="utf-8")
  return folder


def _tokenizer(tmp_path) -> tk.Tokenizer:
  """A cased tokenizer of TEXT's characters, saved in tmp_path/tokenizer."""
  tokenizer = tk.Tokenizer(tk.build_vocab([TEXT]), lowercase=False)
  tokenizer.save(tmp_path / "tokenizer")
  return tokenizer


def test_a_vocabulary_is_found_in_any_place_that_holds_one(tmp_path):
  """A vocab.txt file ("…/vocab.txt/vocab.txt: Not a directory"), a wyjax workdir, its checkpoints folder, and a
  folder with only a fast tokenizer's tokenizer.json all give the tokenizer's vocabulary."""
  tokenizer = _tokenizer(tmp_path)
  workdir = tmp_path / "workdir"
  checkpoints.write_model_info(workdir, {}, [], tokenizer)
  (workdir / "checkpoints").mkdir()
  only_json = tmp_path / "only_json"
  only_json.mkdir()
  (only_json / "tokenizer.json").write_text(tokenizer.files()["tokenizer.json"], encoding="utf-8")
  for typed in (
    tmp_path / "tokenizer",
    tmp_path / "tokenizer" / "vocab.txt",
    tmp_path / "tokenizer" / "tokenizer.json",
    workdir,
    workdir / "checkpoints",
    only_json,
  ):
    assert corpus_vocab.given(str(typed), "--vocab").vocab == tokenizer.vocab, typed
  assert corpus_vocab.given(str(only_json), "--vocab").lowercase  # no tokenizer_config.json: as transformers reads it


def test_what_names_no_vocabulary_is_one_line_naming_what_was_typed(tmp_path, monkeypatch):
  """A Hub id ("hfl/chinese-roberta-wwm-ext/vocab.txt: No such file or directory"), another file, a folder without
  a vocabulary, a missing path, and a tokenizer.json of another model each name the path as typed and the remedy."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "notes.txt").write_text("mine")
  (tmp_path / "empty").mkdir()
  (tmp_path / "finetuned" / "seed_0").mkdir(parents=True)
  (tmp_path / "finetuned" / "seed_0" / "model.json").write_text("{}")
  (tmp_path / "bpe").mkdir()
  (tmp_path / "bpe" / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}}}))
  accepted = "pass a folder holding vocab.txt or tokenizer.json"
  for typed, says in (
    (
      "hfl/chinese-roberta-wwm-ext",
      "--config.corpus.vocab hfl/chinese-roberta-wwm-ext: no such folder; a Hub model's vocabulary is read from a "
      "copy: download it (`hf download hfl/chinese-roberta-wwm-ext vocab.txt tokenizer_config.json "
      "--local-dir=DIR`) and pass --config.corpus.vocab=DIR",
    ),
    ("notes.txt", f"--config.corpus.vocab notes.txt is a file of no vocabulary wyjax reads; {accepted}"),
    ("empty", f"--config.corpus.vocab empty holds no vocabulary; {accepted}"),
    ("finetuned", f"--config.corpus.vocab finetuned holds no vocabulary; {accepted}"),
    ("/no/such/place", f"--config.corpus.vocab /no/such/place: no such file or folder; {accepted}"),
  ):
    with pytest.raises(guards.RunError) as refused:
      corpus_vocab.given(typed, "--config.corpus.vocab")
    assert str(refused.value).startswith(says) and "\n" not in str(refused.value), str(refused.value)
  with pytest.raises(guards.RunError, match=re.escape("model.json beside tokenizer/) (finetuned/seed_0 is one)")):
    corpus_vocab.given("finetuned", "--vocab")
  with pytest.raises(ValueError, match=re.escape("bpe/tokenizer.json: its model is BPE, not BERT's WordPiece")):
    corpus_vocab.given("bpe", "--vocab")


def test_the_command_refuses_a_hub_id_in_one_line_and_writes_nothing(tmp_path):
  texts, out = _texts(tmp_path / "texts"), tmp_path / "out"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source=text:{texts}",
      f"--out={out}",
      "--vocab=hfl/chinese-roberta-wwm-ext",
    ],
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert result.returncode == 1 and result.stderr.splitlines() == [
    "wyjax: error: --vocab hfl/chinese-roberta-wwm-ext: no such folder; a Hub model's vocabulary is read from a "
    "copy: download it (`hf download hfl/chinese-roberta-wwm-ext vocab.txt tokenizer_config.json "
    "--local-dir=DIR`) and pass --vocab=DIR"
  ], result.stderr
  assert not out.exists()


@pytest.mark.parametrize("max_vocab", [6, 15])
def test_the_unknown_check_of_an_extension_is_made_on_the_extended_vocabulary(tmp_path, caplog, max_vocab):
  """--vocab=X --extend_vocab --max_vocab=10 was refused ("a vocabulary of 5 characters … leaves 82.13% … [UNK]"),
  and a larger max_vocab warned of a share the written vocabulary does not leave: both counted the corpus's own
  capped vocabulary, not X extended by it."""
  tokenizer = _tokenizer(tmp_path)
  texts = _texts(tmp_path / "texts", TEXT.strip() * 20 + "\n溫故溫故新新\n")  # 6 characters of 726 that X lacks
  options = prepare.Options(
    source=f"text:{texts}", sequence_length=16, valid_fraction=0.0, extend_vocab=True, max_vocab=max_vocab
  )
  manifest = prepare.prepare_corpus(
    tmp_path / "out", options, vocab_dir=tmp_path / "tokenizer", workers=1, progress=False, log=lambda *_: None
  )
  assert manifest["vocab_size"] == len(tokenizer)  # the characters max_vocab keeps, X holds already
  assert manifest["unk_tokens"] == 6 and "[UNK]" not in caplog.text  # 0.83%: under the warning's 1%


def test_an_extension_that_leaves_most_text_unknown_is_refused():
  counts = tk.count_characters([TEXT.strip() * 20 + "\n溫故溫故新新\n"])
  with pytest.raises(ValueError, match=r"a vocabulary of 4 characters \(max_vocab 6, min_count 1\) leaves 75.21%"):
    tk.build_vocab(counts=counts, max_size=6, t2s=False, extends=["学", "而", "时"])  # and 不, max_vocab's one


def test_a_refused_build_leaves_out_as_it_was(tmp_path):
  """A refused prepare-corpus left preparing.json, tokenizer/ and a train shard in --out (no validation split), or
  removed the corpus --overwrite was to replace before a vocabulary it refused ([UNK])."""
  texts = _texts(tmp_path / "texts", TEXT + "\n溫故而知新，可以為師矣。\n")
  out = tmp_path / "out"
  options = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.1)
  with pytest.raises(guards.RunError, match="no validation sequences"):  # one document: no validation split
    prepare.prepare_corpus(out, options, workers=1, progress=False, log=lambda *_: None)
  assert not out.exists()
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  with pytest.raises(guards.RunError, match="no validation sequences"):
    prepare.prepare_corpus(out, options, workers=1, progress=False, overwrite=True, log=lambda *_: None)
  assert [p.name for p in out.iterdir()] == ["notes.txt"]
  kept = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.0)
  prepare.prepare_corpus(out, kept, workers=1, progress=False, overwrite=True, log=lambda *_: None)
  before = sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*"))
  too_few = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.0, max_vocab=5)
  with pytest.raises(ValueError, match=r"a vocabulary of 0 characters .* raise max_vocab"):
    prepare.prepare_corpus(out, too_few, workers=1, progress=False, overwrite=True, log=lambda *_: None)
  assert sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*")) == before
  with pytest.raises(guards.RunError, match=re.escape(f"--vocab {out / 'notes.txt'} is a file of no vocabulary")):
    prepare.prepare_corpus(tmp_path / "new", kept, vocab_dir=str(out / "notes.txt"), workers=1, progress=False)
  assert not (tmp_path / "new").exists()

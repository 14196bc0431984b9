"""Corpus readers on the real Daizhige sample, and the poetry reader on a package built here."""

import collections
import io
import json
import tarfile

import pytest

from wyjax.data import corpus


def test_daizhige_reader_reads_every_file_with_its_collection(shared_data):
  root = shared_data / "daizhige_sample"
  reader = corpus.DaizhigeReader(root)
  units = reader.units()
  files = sorted(p for p in root.rglob("*.txt"))
  assert len(units) == len(files) == 12
  collections_seen = set()
  for unit, path in zip(units, files):
    (doc,) = reader.read(unit)
    assert doc.meta["collection"] == path.relative_to(root).parts[0]
    assert doc.meta["path"] == str(path.relative_to(root))
    collections_seen.add(doc.meta["collection"])
  assert collections_seen == set(corpus.DAIZHIGE_COLLECTIONS)
  flat = reader.read("医藏/黄帝内经素问.txt")[0]
  assert flat.meta["category"] == "" and flat.meta["title"] == "黄帝内经素问"
  deep = reader.read("佛藏/乾隆藏/大乘五大部外重译经/佛说盂兰盆经.txt")[0]
  assert deep.meta["category"] == "乾隆藏/大乘五大部外重译经"


def test_cleaning_loses_and_invents_no_character(shared_data):
  """Per file: non-whitespace characters in = characters out; t2s only changes which."""
  reader = corpus.DaizhigeReader(shared_data / "daizhige_sample")
  total = 0
  for unit in reader.units():
    (doc,) = reader.read(unit)
    raw = (shared_data / "daizhige_sample" / unit).read_text(encoding="utf-8")
    paragraphs = corpus.clean_paragraphs(doc.paragraphs)
    raw_chars = collections.Counter(c for c in raw if not c.isspace())
    kept = collections.Counter(c for p in paragraphs for c in p if c != " ")
    assert sum(kept.values()) == sum(raw_chars.values()), unit
    untouched = corpus.clean_paragraphs(doc.paragraphs, t2s=False)
    assert collections.Counter(c for p in untouched for c in p if c != " ") == raw_chars, unit
    assert not any(p != p.strip() or "\u3000" in p for p in paragraphs)
    total += sum(raw_chars.values())
  assert total > 100_000


def test_separator_lines_and_indentation():
  paragraphs = corpus.clean_paragraphs(["\u3000\u3000钦定四库全书", "   ", "", "\u3000總　校　官", "HT 01 ab"])
  assert paragraphs == ["钦定四库全书", "总校官", "HT 01 ab"]


def test_character_filters():
  assert corpus.clean_paragraphs(["周易01ⅰ\ue3abab"], char_filter="no_ascii_alnum") == ["周易ⅰ\ue3ab"]
  assert corpus.clean_paragraphs(["周\ue3ab易"], char_filter="no_private_use") == ["周易"]


def test_split_is_deterministic_and_near_the_fraction():
  ids = [f"doc{i}" for i in range(20000)]
  valid = [i for i in ids if corpus.is_validation(i, 0.05)]
  assert valid == [i for i in ids if corpus.is_validation(i, 0.05)]
  assert 0.04 < len(valid) / len(ids) < 0.06


def test_outside_files_are_an_error(tmp_path):
  (tmp_path / "史藏").mkdir()
  (tmp_path / "史藏" / "a.txt").write_text("子曰")
  (tmp_path / "杂藏").mkdir()
  (tmp_path / "杂藏" / "b.txt").write_text("子曰")
  with pytest.raises(ValueError, match="outside the ten collections"):
    corpus.DaizhigeReader(tmp_path).units()


def test_invalid_utf8_names_file_and_line(tmp_path):
  (tmp_path / "史藏").mkdir()
  (tmp_path / "史藏" / "a.txt").write_bytes("第一行\n第二行\n".encode() + b"\xff\xfe")
  with pytest.raises(ValueError, match=r"a.txt:3: not valid UTF-8"):
    corpus.DaizhigeReader(tmp_path).read("史藏/a.txt")


def _fake_poetry_package(root):
  dist = root / "package" / "dist"
  (dist / "shijing").mkdir(parents=True)
  (dist / "shijing" / "shijing.json").write_text(
    json.dumps([{"title": "关雎", "chapter": "国风", "content": ["关关雎鸠，在河之洲。"]}], ensure_ascii=False)
  )
  (dist / "quantangshi").mkdir()
  (dist / "quantangshi" / "poet.tang.0.json").write_text(
    json.dumps([{"author": "李白", "title": "靜夜思", "paragraphs": ["床前明月光，疑是地上霜。"]}], ensure_ascii=False)
  )
  (dist / "quantangshi" / "authors.tang.json").write_text("[]")
  (dist / "mengxue").mkdir()
  (dist / "mengxue" / "qianjiashi.json").write_text(
    json.dumps(
      {
        "title": "千家詩",
        "content": [
          {"type": "五言", "content": [{"chapter": "春眠", "author": "孟浩然", "paragraphs": ["春眠不覺曉"]}]}
        ],
      },
      ensure_ascii=False,
    )
  )
  return root / "package"


def test_poetry_reader_metadata(tmp_path):
  reader = corpus.PoetryReader(_fake_poetry_package(tmp_path))
  assert reader.units() == ["mengxue/qianjiashi.json", "quantangshi/poet.tang.0.json", "shijing/shijing.json"]
  docs = {d.meta["title"]: d for u in reader.units() for d in reader.read(u)}
  assert docs["靜夜思"].meta == {
    "collection": "全唐诗",
    "dynasty": "唐",
    "title": "靜夜思",
    "author": "李白",
    "path": "quantangshi/poet.tang.0.json",
  }
  assert docs["关雎"].meta["dynasty"] == "先秦" and docs["关雎"].paragraphs == ["关关雎鸠，在河之洲。"]
  assert docs["春眠"].meta["author"] == "孟浩然" and docs["春眠"].paragraphs == ["春眠不覺曉"]


def test_poetry_integrity_check(tmp_path):
  tarball = tmp_path / "x.tgz"
  with tarfile.open(tarball, "w:gz") as tar:
    tar.add(_fake_poetry_package(tmp_path / "src"), arcname="package")
  with pytest.raises(ValueError, match="publishes"):
    corpus.check_integrity(tarball)
  import base64
  import hashlib

  good = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
  corpus.check_integrity(tarball, good)


@pytest.mark.parametrize(
  "content,message",
  [
    ('[{"title": "a", "paragraphs": ["x"]},\n {"title": "b", "paragraphs": "', r":2: invalid JSON"),
    ('[{"title": "a", "paragraphs": ["x"]}, ["not", "a", "poem"]]', r": record 1: expected a JSON object, found list"),
    ('[{"title": "a", "paragraphs": 7}]', r": record 0: field 'paragraphs' is neither a string nor a list"),
    ('[{"title": "a", "author": "b"}]', r": record 0: none of the text fields"),
  ],
)
def test_malformed_poetry_file_names_file_and_record(tmp_path, content, message):
  path = tmp_path / "package" / "dist" / "shijing" / "shijing.json"
  path.parent.mkdir(parents=True)
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError, match=rf"shijing\.json{message}"):
    corpus.PoetryReader(tmp_path / "package").read("shijing/shijing.json")


@pytest.mark.parametrize(
  "name,kind",
  [("../outside.json", tarfile.REGTYPE), ("/etc/passwd", tarfile.REGTYPE), ("package/link", tarfile.SYMTYPE)],
)
def test_unsafe_tar_members_are_refused(tmp_path, name, kind):
  tarball = tmp_path / "x.tgz"
  with tarfile.open(tarball, "w:gz") as tar:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, "/etc/passwd" if kind == tarfile.SYMTYPE else ""
    tar.addfile(member, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
  with tarfile.open(tarball) as tar, pytest.raises(ValueError, match=f"refusing to extract '{name}'"):
    corpus.safe_members(tar, tarball)

"""Pretraining corpora as documents of paragraphs: Daizhige, chinese-poetry, plain text.

A reader's `units()` lists work units (files), `read(unit)` turns one into documents (in a worker
process) and `file(unit)` is the unit's file. `special` lists the files it skipped unopened (FIFOs,
devices, sockets), `vocabularies` the tokenizer vocab.txt files it left out. Text is kept as found;
`clean_paragraphs` normalises it.
"""

import base64
import dataclasses
import hashlib
import os
import pathlib
import re
import stat
import subprocess
import tarfile
from collections.abc import Iterator

from etils import epath

from wyjax.core import storage
from wyjax.core.storage import cache_dir, read_json, read_text
from wyjax.data.normalize import to_simplified

DAIZHIGE_COLLECTIONS = ("佛藏", "儒藏", "史藏", "子藏", "艺藏", "道藏", "医藏", "诗藏", "集藏", "易藏")


@dataclasses.dataclass
class Document:
  id: str  # unique and stable: decides the train/validation split
  paragraphs: list[str]
  meta: dict


# --- normalisation ---------------------------------------------------------------------------

_SPACE_BETWEEN_NON_ASCII = re.compile(r"(?<=[^\x00-\x7f])\s+|\s+(?=[^\x00-\x7f])")
_SPACES = re.compile(r"\s+")
CHAR_FILTERS = {
  # Keep everything (the default).
  "none": None,
  # Drop ASCII letters and digits (stray Latin text and numbering in Daizhige).
  "no_ascii_alnum": re.compile(r"[A-Za-z0-9]"),
  # Drop private-use code points (glyphs with no standard encoding).
  "no_private_use": re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]"),
}


def clean_paragraphs(lines, *, t2s: bool = True, char_filter: str = "none") -> list[str]:
  """Whitespace cleanup, optional character filter, OpenCC t2s; empty paragraphs dropped.

  Whitespace (U+3000 indentation, spaces, tabs) is removed next to any non-ASCII character
  and collapsed to one space between ASCII words; separator lines (empty or spaces only)
  disappear. Every other character is kept, so the non-whitespace character count only
  changes by what `char_filter` removes (t2s preserves length).
  """
  pattern = CHAR_FILTERS[char_filter]
  paragraphs = []
  for line in lines:
    line = _SPACES.sub(" ", _SPACE_BETWEEN_NON_ASCII.sub("", line)).strip()
    if pattern is not None:
      line = pattern.sub("", line)
    if line:
      paragraphs.append(line)
  if t2s and paragraphs:  # one OpenCC call per document; it never converts across a newline
    paragraphs = to_simplified("\n".join(paragraphs)).split("\n")
  return paragraphs


def paragraph_hash(paragraph: str) -> int:
  """64-bit hash for exact de-duplication."""
  return int.from_bytes(hashlib.blake2b(paragraph.encode(), digest_size=8).digest(), "little")


def document_fraction(document_id: str) -> float:
  """A stable number in [0, 1) from a document id: splits are decided by hash, not by order or a random draw."""
  return int.from_bytes(hashlib.sha256(document_id.encode()).digest()[:8], "little") % 1_000_000 / 1_000_000


def is_validation(document_id: str, valid_fraction: float) -> bool:
  return document_fraction(document_id) < valid_fraction


# --- Daizhige --------------------------------------------------------------------------------


class DaizhigeReader:
  """A Daizhige v2 tree: <collection>/<subfolders…>/<book>.txt, one document per book.

  Lines are paragraphs (hard-wrapped lines stay separate paragraphs; packing concatenates the
  paragraphs of a document, so wrapping does not matter for pretraining).
  """

  def __init__(self, root):
    self.root = epath.Path(root)
    if not self.root.is_dir():
      raise FileNotFoundError(f"Daizhige root {self.root} is not a folder")

  def units(self) -> list[str]:
    files, self.special, self.vocabularies = text_files(self.root)
    outside = [f for f in files if f.split(os.sep)[0] not in DAIZHIGE_COLLECTIONS]
    if outside:
      raise ValueError(
        f"{self.root}: {len(outside)} .txt files outside the ten collections, "
        f"e.g. {outside[0]!r}; expected one of {DAIZHIGE_COLLECTIONS}"
      )
    if not files:
      raise ValueError(f"{self.root}: no .txt files")
    return files

  def file(self, unit: str) -> epath.Path:
    return self.root / unit

  def read(self, unit: str) -> list[Document]:
    text = read_text(self.file(unit))
    parts = pathlib.PurePath(unit).parts
    meta = {
      "collection": parts[0],
      "path": unit,
      "title": pathlib.PurePath(unit).stem,
      "category": "/".join(parts[1:-1]),
    }
    return [Document(id=f"daizhige:{unit}", paragraphs=text.splitlines(), meta=meta)]


def text_files(root: epath.Path) -> tuple[list[str], list[str], list[str]]:
  """(.txt files, special files, tokenizer vocabularies) under root (a folder or gs://…), sorted, relative to root.

  No reader reads a special file (`special_file`) or a vocab.txt beside a tokenizer_config.json (a prepared
  corpus's tokenizer/, a model's).
  """
  walk = [(os.fspath(folder), names) for folder, _, names in root.walk()]
  top = walk[0][0] if walk else ""  # walk's own spelling of root (in a bucket, without gs://)
  relative = lambda folder, name: os.path.relpath(os.path.join(folder, name), top)
  vocabularies = {
    relative(folder, "vocab.txt") for folder, names in walk if "vocab.txt" in names and "tokenizer_config.json" in names
  }
  found = sorted(relative(folder, name) for folder, names in walk for name in names if name.endswith(".txt"))
  special = {f for f in found if special_file(root / f)}
  return [f for f in found if f not in special | vocabularies], sorted(special), sorted(vocabularies)


def special_file(path) -> bool:
  """Whether `path` is a local FIFO, device or socket (or a link to one).

  Corpus readers skip such files and count them (`special`), never opening them: a FIFO may wait for a
  writer for ever, a device may never end (/dev/zero).
  """
  if not storage.is_local(path):
    return False
  try:
    mode = os.stat(path).st_mode
  except FileNotFoundError:  # a broken link: reading it names it
    return False
  return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


# --- plain text ------------------------------------------------------------------------------


class TextReader:
  """A user's own corpus: one .txt file, or every .txt under a folder; one document per file."""

  def __init__(self, path):
    self.path = epath.Path(path)
    if not self.path.exists():
      raise FileNotFoundError(f"text corpus {self.path} does not exist")
    if special_file(self.path):
      raise ValueError(f"text corpus {self.path} is neither a file nor a folder (a FIFO, a device or a socket)")
    self.special, self.vocabularies = [], []

  def units(self) -> list[str]:
    if self.path.is_file():
      return [self.path.name]
    files, self.special, self.vocabularies = text_files(self.path)
    if not files:
      raise ValueError(f"{self.path}: no .txt files")
    return files

  def file(self, unit: str) -> epath.Path:
    return self.path if self.path.is_file() else self.path / unit

  def read(self, unit: str) -> list[Document]:
    return [Document(id=f"text:{unit}", paragraphs=read_text(self.file(unit)).splitlines(), meta={"path": unit})]


# --- chinese-poetry (npm) --------------------------------------------------------------------

POETRY_PACKAGE = "chinese-poetry@2.0.1"
POETRY_TARBALL = "chinese-poetry-2.0.1.tgz"
# The registry's published dist.integrity for chinese-poetry 2.0.1.
POETRY_INTEGRITY = "sha512-KtYARvV7CWNtax0na9+Jn6PlhGgSoid7PWyDzXI4KsCEm2odZcqEQyval5koaLygZnM/EQ3lfJ//25K8p3uHNg=="

# Folder (under package/dist/) or file-name prefix → (collection, dynasty), most specific first.
POETRY_COLLECTIONS = (
  ("shijing/", "诗经", "先秦"),
  ("chuci/", "楚辞", "先秦"),
  ("lunyu/", "论语", "先秦"),
  ("sishuwujing/", "四书", "先秦"),
  ("caocaoshiji/", "曹操诗集", "汉末"),
  ("quantangshi/poet.tang.", "全唐诗", "唐"),
  ("quantangshi/唐诗三百首", "唐诗三百首", "唐"),
  ("quantangshi/唐诗补录", "唐诗补录", "唐"),
  ("yudingquantangshi/", "御定全唐诗", "唐"),
  ("shuimotangshi/", "水墨唐诗", "唐"),
  ("wudaishici/huajianji/", "花间集", "五代"),
  ("wudaishici/nantang/poetrys", "南唐二主词", "五代"),
  ("quantangshi/poet.song.", "全宋诗", "宋"),
  ("songci/ci.song.", "宋词", "宋"),
  ("yuanqu/", "元曲", "元"),
  ("nalanxingde/", "纳兰性德诗集", "清"),
  ("youmengying/", "幽梦影", "清"),
  ("mengxue/", "蒙学", None),
)
_TEXT_FIELDS = ("paragraphs", "content", "para")


def check_integrity(tarball: pathlib.Path, integrity: str = POETRY_INTEGRITY) -> None:
  algorithm, expected = integrity.split("-", 1)
  digest = base64.b64encode(hashlib.new(algorithm, tarball.read_bytes()).digest()).decode()
  if digest != expected:
    raise ValueError(f"{tarball}: {algorithm} is {digest}, but {POETRY_PACKAGE} publishes {expected}")


def fetch_poetry(cache=None) -> pathlib.Path:
  """Fetches chinese-poetry 2.0.1 into the cache once (npm pack, integrity checked); returns its `package/` folder."""
  folder = pathlib.Path(cache) if cache else cache_dir()
  tarball = folder / POETRY_TARBALL
  unpacked = folder / "chinese-poetry-2.0.1"
  if (unpacked / "package" / "package.json").exists():
    return unpacked / "package"
  if not tarball.exists():
    folder.mkdir(parents=True, exist_ok=True)
    try:
      subprocess.run(
        ["npm", "pack", POETRY_PACKAGE, "--pack-destination", str(folder)], check=True, capture_output=True, text=True
      )
    except FileNotFoundError as e:
      raise RuntimeError(
        f"fetching {POETRY_PACKAGE} needs npm on the PATH (or put {POETRY_TARBALL} in {folder})"
      ) from e
    except subprocess.CalledProcessError as e:
      raise RuntimeError(f"npm pack {POETRY_PACKAGE} failed: {e.stderr.strip()[-500:]}") from e
  check_integrity(tarball)
  partial = folder / "chinese-poetry-2.0.1.partial"
  with tarfile.open(tarball) as tar:
    data_filter = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.11.4+: the same rules
    tar.extractall(partial, members=safe_members(tar, tarball), **data_filter)
  partial.rename(unpacked)
  return unpacked / "package"


def safe_members(tar: tarfile.TarFile, source) -> list[tarfile.TarInfo]:
  """The archive's members, refused unless each is a plain file or folder inside the target.

  No absolute path, no '..', no link or device: the "data" extraction filter's rules, on every Python.
  """
  members = tar.getmembers()
  for m in members:
    parts = pathlib.PurePosixPath(m.name).parts
    if m.name.startswith(("/", "\\")) or ".." in parts or not (m.isfile() or m.isdir()):
      raise ValueError(
        f"{source}: refusing to extract {m.name!r} (absolute, outside the folder, or not a plain file or folder)"
      )
  return members


def poetry_collection(relative: str) -> tuple[str, str | None] | None:
  """(collection, dynasty) of a file path relative to the package's dist/ folder."""
  for prefix, collection, dynasty in POETRY_COLLECTIONS:
    if relative.startswith(prefix):
      return collection, dynasty
  return None


class PoetryReader:
  """The chinese-poetry npm package: one document per poem or chapter.

  Each has title, author, and the collection and dynasty its folder implies (POETRY_COLLECTIONS).
  package: the unpacked `package/` folder; fetched into the cache when not given.
  """

  def __init__(self, package=None):
    self.dist = (pathlib.Path(package) if package else fetch_poetry()) / "dist"
    if not self.dist.is_dir():
      raise FileNotFoundError(f"{self.dist}: not an unpacked chinese-poetry package")

  def units(self) -> list[str]:
    files = sorted(p.relative_to(self.dist).as_posix() for p in self.dist.rglob("*.json"))
    files = [
      f
      for f in files
      if poetry_collection(f) and "/error/" not in f and not pathlib.PurePath(f).name.startswith(("author", "intro"))
    ]
    special = {f for f in files if special_file(self.dist / f)}
    self.special, self.vocabularies = sorted(special), []
    return [f for f in files if f not in special]

  def file(self, unit: str) -> pathlib.Path:
    return self.dist / unit

  def read(self, unit: str) -> list[Document]:
    path = self.file(unit)
    data = read_json(path, object)  # an array of records, or one record
    collection, dynasty = poetry_collection(unit)
    records = data if isinstance(data, list) else [data]
    docs = []
    for i, record in enumerate(records):
      for j, (leaf, inherited) in enumerate(_leaf_records(record, {}, f"{path}: record {i}")):
        paragraphs = _poem_lines(leaf, f"{path}: record {i}")
        title = leaf.get("title") or leaf.get("chapter") or leaf.get("rhythmic") or inherited.get("title", "")
        meta = {
          "collection": collection,
          "dynasty": dynasty,
          "title": title,
          "author": leaf.get("author") or inherited.get("author", ""),
          "path": unit,
        }
        docs.append(Document(id=f"poetry:{unit}:{i}:{j}", paragraphs=paragraphs, meta=meta))
    return docs


def _leaf_records(record, inherited: dict, where: str) -> Iterator[tuple[dict, dict]]:
  """蒙学 files nest records (卷 → 章); yield the records that hold the text lines."""
  if not isinstance(record, dict):
    raise ValueError(f"{where}: expected a JSON object, found {type(record).__name__}")
  nested = [v for f in _TEXT_FIELDS if isinstance(v := record.get(f), list) and v and isinstance(v[0], dict)]
  if not nested:
    yield record, inherited
    return
  inherited = {**inherited, **{k: record[k] for k in ("title", "author") if record.get(k)}}
  for child in nested[0]:
    yield from _leaf_records(child, inherited, where)


def _poem_lines(record: dict, where: str) -> list[str]:
  for field in _TEXT_FIELDS:
    if field in record:
      value = record[field]
      if isinstance(value, str):
        return [value]
      if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
      raise ValueError(f"{where}: field {field!r} is neither a string nor a list of strings")
  raise ValueError(f"{where}: none of the text fields {_TEXT_FIELDS}")


# --- sources ---------------------------------------------------------------------------------


def content_sha256(reader, units: list[str]) -> str:
  """The SHA-256 of a source's text as a build reads it: each unit's name and its file's SHA-256, in order."""
  digest = hashlib.sha256()
  for unit in units:
    digest.update(f"{unit}\0{storage.file_sha256(reader.file(unit))}\n".encode())
  return digest.hexdigest()


def source_place(source: str) -> str:
  """`source` with its path as storage.place has it: `text:texts/` and `text:/home/me/texts` are one source."""
  kind, _, arg = source.partition(":")
  return f"{kind}:{storage.place(arg)}" if arg else source


def reader_for(source: str):
  """'daizhige:DIR', 'poetry' (or 'poetry:UNPACKED_PACKAGE_DIR'), or 'text:PATH'."""
  kind, _, arg = source.partition(":")
  if kind == "daizhige" and arg:
    return DaizhigeReader(arg)
  if kind == "poetry":
    return PoetryReader(arg or None)
  if kind == "text" and arg:
    return TextReader(arg)
  raise ValueError(f"unknown corpus source {source!r}; use daizhige:DIR, poetry or text:PATH")


_NOT_COUNTED = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def non_space_chars(text: str) -> int:
  """Characters other than whitespace and C0/C1 controls: what cleaning must preserve."""
  return len(text) - len(_NOT_COUNTED.findall(text))

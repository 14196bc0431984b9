"""Reading task files exactly as published, with errors that name the file and line.

WYWEB files mix CRLF and LF endings and usually lack a final newline; a trailing '\\r' is
line-ending residue and is removed, nothing else is altered. JSON strings must be text: a lone
surrogate escape ("\\ud800") is an error. A split is absent only when none of its names is
there: a directory or a broken link in its place, or two of its names at once, is an error
naming them.
"""
import json
import os
import pathlib
import re
from collections.abc import Iterator, Sequence

from wyjax.core.storage import FormatError, read_text


def find_split(data_dir, split: str, extensions: Sequence[str]) -> pathlib.Path | None:
  """data_dir/<split>.<ext> for the extension present, or None."""
  return first_present(data_dir, [f"{split}.{ext}" for ext in extensions])


def first_present(data_dir, names: Sequence[str]) -> pathlib.Path | None:
  """data_dir/<name> for the one of names present, or None; two present is an error (which
  one holds the split?)."""
  found = [pathlib.Path(data_dir) / name for name in names if present(pathlib.Path(data_dir) / name)]
  if len(found) > 1:
    raise ValueError(f"{data_dir}: {' and '.join(p.name for p in found)} are the same split under two names; "
                     "keep one")
  return found[0] if found else None


def present(path, folder: bool = False) -> bool:
  """Whether the file (or folder) at path is there. A broken link, or a folder where a file
  belongs (or the reverse), is an error naming it: read as absent, its split would be lost."""
  path = pathlib.Path(path)
  if path.is_symlink() and not path.exists():
    raise FileNotFoundError(f"{path}: a link to {os.readlink(path)}, which does not exist")
  if path.exists() and path.is_dir() != folder:
    raise (NotADirectoryError if folder else IsADirectoryError)(
        f"{path}: a {'folder' if path.is_dir() else 'file'}, expected a {'folder' if folder else 'file'}")
  return path.exists()


def tsv_rows(path, columns: int) -> Iterator[tuple[int, list[str]]]:
  """(line number, fields) of every line; a final empty line is allowed, other empty lines
  and lines with another number of columns are errors."""
  lines = read_text(path).split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  for number, line in enumerate(lines, 1):
    line = line.removesuffix("\r")
    fields = line.split("\t")
    if len(fields) != columns:
      found = "an empty line" if not line.strip() else f"{len(fields)} tab-separated fields"
      raise FormatError(path, number, f"expected {columns} tab-separated fields, found {found}")
    yield number, fields


def json_records(path) -> Iterator[tuple[int, dict]]:
  """(line number, object) from a JSON array file or a JSON Lines file."""
  text = read_text(path)
  stripped = text.lstrip()
  if pathlib.Path(path).suffix == ".jsonl" or not stripped.startswith("["):
    for number, line in enumerate(text.split("\n"), 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise FormatError(path, number, f"invalid JSON ({e.msg})") from e
      yield number, _checked(path, number, record)
    return
  decoder = json.JSONDecoder()
  index = text.index("[") + 1
  while True:
    index = _skip_space(text, index)
    if index < len(text) and text[index] == "]":
      _check_end(path, text, index + 1)
      return
    line = text.count("\n", 0, index) + 1
    try:
      record, index = decoder.raw_decode(text, index)
    except json.JSONDecodeError as e:
      raise FormatError(path, e.lineno, f"invalid JSON ({e.msg})") from e
    yield line, _checked(path, line, record)
    index = _skip_space(text, index)
    if index < len(text) and text[index] == ",":
      index += 1
    elif index >= len(text) or text[index] != "]":
      raise FormatError(path, text.count("\n", 0, index) + 1, "expected ',' or ']' between records")


def _check_end(path, text: str, index: int) -> None:
  """Only whitespace may follow the array's closing ']' (not a second array, not garbage)."""
  index = _skip_space(text, index)
  if index < len(text):
    raise FormatError(path, text.count("\n", 0, index) + 1,
                      f"unexpected {text[index:index + 20]!r} after the JSON array's closing ']'")


def _skip_space(text: str, index: int) -> int:
  while index < len(text) and text[index] in " \t\r\n":
    index += 1
  return index


_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked(path, line: int, record) -> dict:
  """A JSON object without lone surrogates: an escape like "\\ud800" decodes, but to no
  character, so the text could not be written out (TFDS would fail on it long after reading;
  text read as UTF-8 cannot hold one)."""
  if not isinstance(record, dict):
    raise FormatError(path, line, f"expected a JSON object, found {type(record).__name__}")
  surrogate = next((m[0] for s in _strings(record) if (m := _SURROGATE.search(s))), None)
  if surrogate:
    raise FormatError(path, line,
                      f"\\u{ord(surrogate):04x} is a lone surrogate (half of a UTF-16 pair), not a character")
  return record


def _strings(value) -> Iterator[str]:
  """Every string in a decoded JSON value, keys included."""
  if isinstance(value, str):
    yield value
  elif isinstance(value, dict):
    for key, item in value.items():
      yield key
      yield from _strings(item)
  elif isinstance(value, list):
    for item in value:
      yield from _strings(item)


def field(path, line: int, record: dict, key: str, kind: type | tuple[type, ...]):
  """record[key], checked to exist and be of `kind` (a type or a tuple of types)."""
  if key not in record:
    raise FormatError(path, line, f"missing field {key!r}")
  value = record[key]
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    raise FormatError(path, line, f"field {key!r} should be {expected}, found {type(value).__name__}")
  return value

"""Reading task files exactly as published, with errors that name the file and line.

- A trailing '\\r' (WYWEB mixes CRLF and LF endings) is removed; nothing else is altered.
- JSON strings must be text (a lone surrogate escape is an error); nesting too deep and integers too long for
  Python are errors too.
- A split is absent only when none of its names is there; a directory or broken link in its place, or two of
  its names at once, is an error.
"""

import bisect
import json
import json.scanner
import os
import pathlib
import re
from collections.abc import Callable, Iterator, Sequence

from wyjax.core.storage import FormatError, json_errors, read_text


def find_split(data_dir, split: str, extensions: Sequence[str]) -> pathlib.Path | None:
  """data_dir/<split>.<ext> for the extension present, or None."""
  return first_present(data_dir, [f"{split}.{ext}" for ext in extensions])


def first_present(data_dir, names: Sequence[str]) -> pathlib.Path | None:
  """data_dir/<name> for the one of names present, or None; two present is an error."""
  found = [pathlib.Path(data_dir) / name for name in names if present(pathlib.Path(data_dir) / name)]
  if len(found) > 1:
    raise ValueError(f"{data_dir}: {' and '.join(p.name for p in found)} are the same split under two names; keep one")
  return found[0] if found else None


def present(path, folder: bool = False) -> bool:
  """Whether the file (or folder) at path is there.

  A broken link, or a folder where a file belongs (or the reverse), is an error naming it: read as absent, its
  split would be lost.
  """
  path = pathlib.Path(path)
  if path.is_symlink() and not path.exists():
    raise FileNotFoundError(f"{path}: a link to {os.readlink(path)}, which does not exist")
  if path.exists() and path.is_dir() != folder:
    raise (NotADirectoryError if folder else IsADirectoryError)(
      f"{path}: a {'folder' if path.is_dir() else 'file'}, expected a {'folder' if folder else 'file'}"
    )
  return path.exists()


def task_text(path) -> str:
  """A task file's text (storage.read_text); a NUL byte is an error at its line.

  No task's text holds one, and a file saved as UTF-16, or a binary one, can still decode as UTF-8.
  """
  text = read_text(path)
  if (nul := text.find("\0")) >= 0:
    raise FormatError(path, text.count("\n", 0, nul) + 1, "a NUL byte: not a text file (UTF-16, or binary?)")
  return text


def tsv_rows(path, columns: int) -> Iterator[tuple[int, list[str]]]:
  """(line number, fields) of every line.

  A final empty line is allowed; other empty lines, and lines with another number of columns, are errors.
  """
  lines = task_text(path).split("\n")
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
      with json_errors(path, line, first_line=number):
        record = json.loads(line)
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
    with json_errors(path, text, start=index):
      record, index = decoder.raw_decode(text, index)
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
    raise FormatError(
      path,
      text.count("\n", 0, index) + 1,
      f"unexpected {text[index : index + 20]!r} after the JSON array's closing ']'",
    )


def _skip_space(text: str, index: int) -> int:
  while index < len(text) and text[index] in " \t\r\n":
    index += 1
  return index


_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked(path, line: int, record) -> dict:
  if not isinstance(record, dict):
    raise FormatError(path, line, f"expected a JSON object, found {type(record).__name__}")
  _whole_characters(path, line, *_strings(record))
  return record


def _strings(value) -> Iterator[str]:
  """Every string in a decoded JSON value, keys included, without recursion (JSON may nest deeper)."""
  pending = [value]
  while pending:
    value = pending.pop()
    if isinstance(value, str):
      yield value
    elif isinstance(value, dict):
      yield from value
      pending += value.values()
    elif isinstance(value, list):
      pending += value


def field(path, line: int, record: dict, key: str, kind: type | tuple[type, ...]):
  """record[key], checked to exist and be of `kind` (a type or a tuple of types)."""
  if key not in record:
    raise FormatError(path, line, f"missing field {key!r}")
  value = record[key]
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    raise FormatError(path, line, f"field {key!r} should be {expected}, found {type(value).__name__}")
  return value


def located_json(path) -> tuple[object, Callable]:
  """A JSON document and line(container, key), the line where container[key] starts.

  key is an object's key or an array's index. For files that are one document (SQuAD, C3), so that an error names
  the line of the value at fault.
  """
  text = read_text(path)
  newlines = [m.start() for m in re.finditer("\n", text)]
  line_at = lambda offset: bisect.bisect_left(newlines, offset) + 1
  starts = {}  # id(container) → {key or index: offset of its value}

  def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
    offsets = []
    pairs, end = json.decoder.JSONObject(s_and_end, strict, _recording(scan_once, offsets), None, list, memo)
    for (key, value), offset in zip(pairs, offsets):
      _whole_characters(path, line_at(offset), key, value)
    value = dict(pairs)
    starts[id(value)] = dict(zip((key for key, _ in pairs), offsets))
    return value, end

  def parse_array(s_and_end, scan_once):
    offsets = []
    value, end = json.decoder.JSONArray(s_and_end, _recording(scan_once, offsets))
    for item, offset in zip(value, offsets):
      _whole_characters(path, line_at(offset), item)
    starts[id(value)] = offsets
    return value, end

  decoder = json.JSONDecoder()
  decoder.parse_object, decoder.parse_array = parse_object, parse_array
  decoder.scan_once = json.scanner.py_make_scanner(decoder)
  with json_errors(path, text):
    document = decoder.decode(text)
  return document, lambda container, key: line_at(starts[id(container)][key])


def _whole_characters(path, line: int, *values) -> None:
  """Raises FormatError for half a UTF-16 pair (an escape like "\\ud800"), which no text can hold.

  Such a text could not be written out (TFDS would fail on it long after reading).
  """
  for value in values:
    if isinstance(value, str) and (half := _SURROGATE.search(value)):
      raise FormatError(
        path, line, f"\\u{ord(half[0]):04x} is a lone surrogate (half of a UTF-16 pair), not a character"
      )


def _recording(scan_once, offsets: list):
  """scan_once, noting where each value it reads starts."""

  def scan(text, index):
    offsets.append(index)
    return scan_once(text, index)

  return scan


def expect(path, line: int, value, kind: type, what: str):
  """value, checked to be of kind (files.field's check, for a value that is not an object's field)."""
  if not isinstance(value, kind):
    raise FormatError(path, line, f"{what} should be {kind.__name__}, found {type(value).__name__}")
  return value


def objects_of(path, array: list, line_of, what: str):
  """(object, its line) of each element of a JSON array of objects."""
  for index, value in enumerate(array):
    line = line_of(array, index)
    yield expect(path, line, value, dict, f"{what} {index}"), line

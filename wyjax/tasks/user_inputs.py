"""A user's input to `wyjax.predict`, one line at a time, made into the task's example.

- A line is a JSON object of the task's input fields (`Task.inputs`); for a task with one input field, a line
  that is not such an object is that field's plain text.
- The example's other fields (its gold labels) are blank, which every featurize reads as "unlabelled".
- A text given for a list field (FSPC's verse lines) is split at punctuation.
- A bad line is a FormatError naming its file and line.
"""

import dataclasses
import json
import re
import types
import typing

from wyjax.core.storage import json_errors
from wyjax.tasks.files import FormatError
from wyjax.tasks.task import Task

_CLAUSE_END = re.compile(r"[，。？！；：、,.?!;:\s]+")


def check_predictable(task: Task) -> None:
  if not task.inputs:
    raise ValueError(f"task {task.name} takes no raw input: its runs score another task's model")


def lines(stream):
  r"""A binary stream's lines as bytes, without their endings, so output line k answers input line k.

  Only b"\n" ends a line (b"\r\n" as one ending); a lone \r stays inside its line.
  """
  for raw in stream:
    line = raw.removesuffix(b"\n")
    yield line.removesuffix(b"\r") if len(line) < len(raw) else line


def decoded(line: str | bytes, path, number: int) -> str:
  """An input line as text (bytes are UTF-8); undecodable bytes are a FormatError naming the file and line."""
  if isinstance(line, str):
    return line
  try:
    return line.decode("utf-8")
  except UnicodeDecodeError as e:
    raise FormatError(path, number, f"not valid UTF-8 ({e.reason} at byte {e.start + 1} of the line)") from None


def describe(task: Task) -> str:
  """What an input line of the task is, for errors and --help."""
  fields = ", ".join(f'"{name}"' for name in task.inputs)
  plain = f"a line of text ({task.inputs[0]}) or " if len(task.inputs) == 1 else ""
  return f"{plain}a JSON object with {fields}"


def _blank(field: dataclasses.Field, kind):
  """The value of a field the input does not give: its default, else empty / None."""
  if field.default is not dataclasses.MISSING:
    return field.default
  origin = typing.get_origin(kind) or kind
  return {str: "", bool: False, tuple: ()}.get(origin)


def _value(name: str, value, kind):
  """`value` from JSON as the field's type; anything else of the wrong type is an error.

  Lists become tuples; a text for a list of texts is split at punctuation.
  """
  origin = typing.get_origin(kind) or kind
  if origin in (types.UnionType, typing.Union):  # `int | None`
    if value is None:
      return None
    kind = origin = next(k for k in typing.get_args(kind) if k is not type(None))
  if origin is tuple:
    if isinstance(value, str) and typing.get_args(kind)[0] is str:
      return tuple(part for part in _CLAUSE_END.split(value) if part)
    if not isinstance(value, list):
      raise ValueError(f'"{name}" must be a list')
    item_kinds = typing.get_args(kind)
    if item_kinds[-1] is Ellipsis:  # tuple[X, ...]
      item_kinds = item_kinds[:1] * len(value)
    if len(value) != len(item_kinds):
      raise ValueError(f'"{name}" must have {len(item_kinds)} items')
    return tuple(_value(name, v, k) for v, k in zip(value, item_kinds))
  if origin is bool or origin is int:
    if type(value) is not origin:
      raise ValueError(f'"{name}" must be {"true or false" if origin is bool else "an integer"}')
    return value
  if origin is str and not isinstance(value, str):
    raise ValueError(f'"{name}" must be a string')
  return value


def _as_record(text: str, field: str) -> dict:
  """A one-input task's line: JSON only when it parses as an object that gives `field`, else the text itself.

  Editors' notes in braces open many classical lines (`{注}学而时习之`).
  """
  if text.lstrip().startswith("{"):
    try:
      record = json.loads(text)
    except (ValueError, RecursionError):  # (not JSON; or nested past the parser, as no text is)
      record = None
    if isinstance(record, dict) and field in record:
      return record
  return {field: text}


def example(task: Task, text: str, path, line: int):
  """The task's example of one input line (without its line ending)."""
  if len(task.inputs) == 1:
    record = _as_record(text, task.inputs[0])
  elif text.lstrip().startswith("{"):
    with json_errors(path, text, first_line=line):
      record = json.loads(text)
  else:
    raise FormatError(path, line, f"expected {describe(task)}")
  kinds = typing.get_type_hints(task.files.example_type)
  fields = {f.name: f for f in dataclasses.fields(task.files.example_type) if f.name != "line"}
  unknown = sorted(set(record) - set(fields))
  missing = [name for name in task.inputs if name not in record]
  if unknown or missing:
    what = [f"unknown field(s) {', '.join(unknown)}"] * bool(unknown) + [f"missing {', '.join(missing)}"] * bool(
      missing
    )
    raise FormatError(path, line, f"{'; '.join(what)}: expected {describe(task)}")
  values = {name: _blank(field, kinds[name]) for name, field in fields.items()}
  try:
    values.update({name: _value(name, value, kinds[name]) for name, value in record.items()})
  except ValueError as e:
    raise FormatError(path, line, str(e)) from None
  if not any(values[name].strip() if isinstance(values[name], str) else values[name] for name in task.inputs):
    raise FormatError(path, line, "empty input")
  return task.files.example_type(line=line, **values)

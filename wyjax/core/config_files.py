"""Configs by name: `--config=tlc.py`, `--config=tlc`, `--config=pretrain/deberta_base.py:arg`.

The repository's top-level configs/ ships inside the wheel as wyjax/configs/ (setup.py), so a
name finds the same files in a checkout, an editable install and a wheel, from any directory.
A path to a real file always wins over a name.
"""

import importlib.util
import os
import pathlib
import traceback

from absl import flags
from ml_collections import config_flags

_PACKAGE = pathlib.Path(__file__).resolve().parents[1]


def root() -> pathlib.Path:
  """wyjax/configs in an installed wheel; the checkout's configs/ in a source or editable install."""
  for folder in (_PACKAGE / "configs", _PACKAGE.parent / "configs"):
    if folder.is_dir():
      return folder
  raise FileNotFoundError(f"no configs/ beside {_PACKAGE}: the installation is incomplete")


def available() -> list[str]:
  """Every packaged config's name: 'tlc', 'pretrain/deberta_base', ..."""
  folder = root()
  return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.py") if p.name != "__init__.py")


def packaged(name: str) -> pathlib.Path:
  """The packaged config file `name` ('tlc', 'tlc.py', 'configs/tlc.py', 'pretrain/deberta_base') names.

  Raises ValueError listing the packaged configs when there is none.
  """
  path = root() / (name.removeprefix("configs/").removesuffix(".py") + ".py")
  if not path.is_file():
    raise ValueError(
      f"no config {name!r}: not a file, and not a packaged config; those are {', '.join(available())} (in {root()})"
    )
  return path


def resolve(spec: str) -> str:
  """`spec` (a file, else a packaged config's name; with an optional `:argument`) as a file path."""
  name, colon, argument = spec.partition(":")
  if pathlib.Path(name).is_file():
    return spec
  return f"{packaged(name)}{colon}{argument}"


def load(spec: str):
  """get_config() (with the `:argument` if given) of a packaged config, load('ccpm:match'), or of an absolute path."""
  name, _, argument = spec.partition(":")
  path = pathlib.Path(name) if os.path.isabs(name) else packaged(name)
  module_spec = importlib.util.spec_from_file_location(f"wyjax_config_{path.stem}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(argument) if argument else module.get_config()


def _user_error(path: str, error: Exception) -> str:
  """One line for an error raised while loading the config file `path`.

  `file:line: error` when the file raised it (a syntax error, a failed import, a mistake in get_config),
  else the error alone.
  """
  if str(error).startswith("Error whilst parsing config file") and error.__context__ is not None:
    error = error.__context__
  same = lambda filename: filename is not None and os.path.abspath(filename) == os.path.abspath(path)
  if isinstance(error, SyntaxError) and same(error.filename):
    return f"{path}:{error.lineno}: {type(error).__name__}: {error.msg}"
  lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if same(frame.filename)]
  message = " ".join(str(error).split())
  return f"{path}:{lines[-1]}: {type(error).__name__}: {message}" if lines else f"{type(error).__name__}: {message}"


class _ConfigNameParser(flags.ArgumentParser):
  """config_flags' own parser, given the file a config name resolves to; an error in it is one line, not a traceback."""

  def __init__(self, config_file_parser):
    self._config_file_parser = config_file_parser

  def parse(self, argument):
    spec = resolve(argument)
    try:
      return self._config_file_parser.parse(spec)
    except Exception as e:  # pylint: disable=broad-except  # whatever the user's file raised
      raise ValueError(_user_error(spec.partition(":")[0], e)) from None


def DEFINE_config(
  name: str,
  default: str | None,
  help_string: str,
  flag_values=flags.FLAGS,  # noqa: N802
  **kwargs,
):
  """config_flags.DEFINE_config_file whose value may also be a packaged config's name."""
  holder = config_flags.DEFINE_config_file(name, default and resolve(default), help_string, flag_values, **kwargs)
  flag_values[name].parser = _ConfigNameParser(flag_values[name].parser)
  return holder


def typed(holder, flag_values=flags.FLAGS) -> tuple[str, ...]:
  """The keys of a config flag's value that the command line set (`--config.model.vocab_size=…`)."""
  return tuple(flag_values[holder.name].override_values)

"""Where an entry point's log records go: wyjax's own lines to the terminal, all else to a log file.

The terminal shows wyjax's lines (progress, phases, warnings, errors), one line each. The log file gets
the libraries' records (orbax, TFDS, JAX, grain), tracebacks, unraisable exceptions, and what C++
libraries write to stderr themselves. `--verbosity=0` (or `-v 0`) turns this off: absl's handler stays.
"""

import contextlib
import io
import logging
import os
import pathlib
import sys
import tempfile

from absl import flags
from absl import logging as absl_logging

from wyjax.core import storage

_WYJAX = str(pathlib.Path(__file__).resolve().parents[1])


def _terminal_worthy(record: logging.LogRecord) -> bool:
  return record.levelno >= logging.INFO and record.pathname.startswith(_WYJAX)


class _TerminalFormatter(logging.Formatter):
  """The message alone, without a traceback; warnings and errors say which they are."""

  def format(self, record):
    message = record.getMessage()
    return message if record.levelno < logging.WARNING else f"{record.levelname.lower()}: {message}"


class _LogFile(logging.FileHandler):
  """The log file; a record it cannot write (its disk full) is dropped, with one warning the first time."""

  failed = False

  def handleError(self, record):
    del record
    if not self.failed:
      self.failed = True
      error = sys.exc_info()[1]
      print(
        f"warning: cannot write the log {self.baseFilename} ({getattr(error, 'strerror', None) or error}); "
        "library records are dropped",
        file=sys.stderr,
      )


class _Kept(logging.Handler):
  def __init__(self):
    super().__init__()
    self.records = []

  def emit(self, record):
    self.records.append(record)


_held: list[logging.LogRecord] = []  # records held back until the log file opens


@contextlib.contextmanager
def held_back(logger_name: str):
  """The records `logger_name` logs in the block (yielded, a list), kept off the terminal for `to_file`'s log file.

  JAX logs a plugin that fails to start, with its traceback, before any command has opened its log.
  """
  logger, kept = logging.getLogger(logger_name), _Kept()
  logger.addHandler(kept)
  propagate, logger.propagate = logger.propagate, False
  try:
    yield kept.records
  finally:
    logger.removeHandler(kept)
    logger.propagate = propagate
    _held.extend(kept.records)


class _Terminal(io.TextIOWrapper):
  """sys.stderr once file descriptor 2 is the log file: a descriptor of what 2 was."""


def _c_logs_to(path: pathlib.Path) -> None:
  """Points file descriptor 2, where C++ libraries write their lines, at the log file; sys.stderr keeps the terminal.

  sys.stderr becomes a _Terminal once (a second log keeps it).
  """
  if not isinstance(sys.stderr, _Terminal):
    sys.stderr.flush()
    sys.stderr = _Terminal(
      io.BufferedWriter(io.FileIO(os.dup(2), "w")),
      encoding=sys.stderr.encoding,
      errors="backslashreplace",
      line_buffering=True,
      write_through=True,
    )
  log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  os.dup2(log, 2)
  os.close(log)


def _unraisable_to(log_file: logging.Handler):
  """A sys.unraisablehook writing to the log file (e.g. tensorstore's callbacks after a failed save)."""

  def hook(unraisable):
    record = logging.LogRecord(
      "unraisable",
      logging.WARNING,
      __file__,
      0,
      "%s: %r",
      (unraisable.err_msg or "Exception ignored", unraisable.object),
      (unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback),
    )
    log_file.handle(record)

  return hook


def _open_log(folder, program: str) -> tuple[logging.Handler, pathlib.Path, str | None]:
  """(the log file's handler, its path, why it is not in `folder` or None); an unwritable folder: the temporary one."""
  local = folder if folder and storage.is_local(folder) else storage.cache_dir() / "logs"
  path = pathlib.Path(local) / f"{program}.log"
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    return _LogFile(path, encoding="utf-8"), path, None
  except OSError as e:
    fallback = pathlib.Path(tempfile.gettempdir()) / f"wyjax-logs-{os.getuid()}" / f"{program}.log"
    fallback.parent.mkdir(parents=True, exist_ok=True)
    return _LogFile(fallback, encoding="utf-8"), fallback, f"{path}: {e.strerror}"


def to_file(folder, program: str) -> pathlib.Path | None:
  """Sends every log record (warnings, unraisable exceptions) to folder/<program>.log, and wyjax's to stderr.

  A folder in a bucket, or none, puts the file in the cache (~/.cache/wyjax/logs); one that cannot be
  written, in the temporary folder, with a warning.

  Returns:
    The log file, or None when the user chose --verbosity and absl's handler stays.
  """
  if flags.FLAGS["verbosity"].present:
    _replay_held(logging.getLogger())
    return None
  log_file, path, unwritable = _open_log(folder, program)
  log_file.setFormatter(absl_logging.PythonFormatter())
  _c_logs_to(pathlib.Path(log_file.baseFilename))
  terminal = logging.StreamHandler(sys.stderr)
  terminal.addFilter(_terminal_worthy)
  terminal.setFormatter(_TerminalFormatter())
  root = logging.getLogger()
  root.handlers[:] = [log_file, terminal]  # in place of absl's stderr handler
  root.setLevel(logging.INFO)
  absl_logging.set_verbosity(absl_logging.INFO)
  logging.captureWarnings(True)
  sys.unraisablehook = _unraisable_to(log_file)
  _replay_held(log_file)
  if unwritable:
    logging.warning("cannot write the log at %s; it goes to %s", unwritable, path)
  logging.info("library logs go to %s (--verbosity=0 shows them here)", path)
  return path


def _replay_held(handler) -> None:
  while _held:
    handler.handle(_held.pop(0))

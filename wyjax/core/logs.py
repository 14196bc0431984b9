"""Where an entry point's log records go: the terminal shows wyjax's own lines (progress, one per
phase, warnings and errors), one line each; all else goes to a log file: orbax, TFDS, JAX and
grain, their errors too (a failure that matters is raised, and ends the command with one line),
tracebacks, and exceptions raised where nothing can catch them (sys.unraisablehook). A full disk
under an async save is one line, not the traceback of every writer thread.

`--verbosity=0` (or `-v 0`) on the command line turns this off: absl then prints every record
at that level on the terminal, as it does by default.
"""
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


def _unraisable_to(log_file: logging.Handler):
  """A sys.unraisablehook writing to the log file: e.g. tensorstore's callbacks into the event
  loop orbax closed after a failed save, dozens of tracebacks on the terminal otherwise."""
  def hook(unraisable):
    record = logging.LogRecord("unraisable", logging.WARNING, __file__, 0, "%s: %r", (
        unraisable.err_msg or "Exception ignored", unraisable.object), (
        unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback))
    log_file.handle(record)
  return hook


def _open_log(folder, program: str) -> tuple[logging.Handler, pathlib.Path, str | None]:
  """(the log file's handler, its path, why it is not where it belongs, or None): a folder it
  cannot be written in (a read-only cache: predict needs it for nothing else) falls back to
  the temporary folder."""
  local = folder if folder and storage.is_local(folder) else storage.cache_dir() / "logs"
  path = pathlib.Path(local) / f"{program}.log"
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    return logging.FileHandler(path, encoding="utf-8"), path, None
  except OSError as e:
    fallback = pathlib.Path(tempfile.gettempdir()) / f"wyjax-logs-{os.getuid()}" / f"{program}.log"
    fallback.parent.mkdir(parents=True, exist_ok=True)
    return logging.FileHandler(fallback, encoding="utf-8"), fallback, f"{path}: {e.strerror}"


def to_file(folder, program: str) -> pathlib.Path | None:
  """Sends every log record (and Python warnings, and unraisable exceptions) to
  folder/<program>.log, and wyjax's own records, one line each, to stderr.

  A folder in a bucket, or none, puts the file in the cache (~/.cache/wyjax/logs); one that
  cannot be written, in the temporary folder, with a warning. Returns the log file, or None
  when the user chose --verbosity and absl's handler stays.
  """
  if flags.FLAGS["verbosity"].present:
    return None
  log_file, path, unwritable = _open_log(folder, program)
  log_file.setFormatter(absl_logging.PythonFormatter())
  terminal = logging.StreamHandler(sys.stderr)
  terminal.addFilter(_terminal_worthy)
  terminal.setFormatter(_TerminalFormatter())
  root = logging.getLogger()
  root.handlers[:] = [log_file, terminal]  # in place of absl's stderr handler
  root.setLevel(logging.INFO)
  absl_logging.set_verbosity(absl_logging.INFO)
  logging.captureWarnings(True)
  sys.unraisablehook = _unraisable_to(log_file)
  if unwritable:
    logging.warning("cannot write the log at %s; it goes to %s", unwritable, path)
  logging.info("library logs go to %s (--verbosity=0 shows them here)", path)
  return path

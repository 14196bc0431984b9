"""Where an entry point's log records go: the terminal shows wyjax's own lines (progress, one per
phase, and warnings) and anyone's errors; orbax, TFDS, JAX and grain chatter goes to a log file.

`--verbosity=0` (or `-v 0`) on the command line turns this off: absl then prints every record
at that level on the terminal, as it does by default.
"""
import logging
import pathlib
import sys

from absl import flags
from absl import logging as absl_logging

from wyjax.core import storage

_WYJAX = str(pathlib.Path(__file__).resolve().parents[1])


def _terminal_worthy(record: logging.LogRecord) -> bool:
  return record.levelno >= logging.ERROR or (record.levelno >= logging.INFO and record.pathname.startswith(_WYJAX))


class _TerminalFormatter(logging.Formatter):
  """The message alone; warnings and errors say which they are."""

  def format(self, record):
    message = super().format(record)
    return message if record.levelno < logging.WARNING else f"{record.levelname.lower()}: {message}"


def to_file(folder, program: str) -> pathlib.Path | None:
  """Sends every log record (and Python warnings) to folder/<program>.log, wyjax's own records
  and everyone's errors to stderr.

  A folder in a bucket, or none, puts the file in the cache (~/.cache/wyjax/logs). Returns the
  log file, or None when the user chose --verbosity and absl's handler stays.
  """
  if flags.FLAGS["verbosity"].present:
    return None
  local = folder if folder and storage.is_local(folder) else storage.cache_dir() / "logs"
  path = pathlib.Path(local) / f"{program}.log"
  path.parent.mkdir(parents=True, exist_ok=True)
  log_file = logging.FileHandler(path, encoding="utf-8")
  log_file.setFormatter(absl_logging.PythonFormatter())
  terminal = logging.StreamHandler(sys.stderr)
  terminal.addFilter(_terminal_worthy)
  terminal.setFormatter(_TerminalFormatter())
  root = logging.getLogger()
  root.handlers[:] = [log_file, terminal]  # in place of absl's stderr handler
  root.setLevel(logging.INFO)
  absl_logging.set_verbosity(absl_logging.INFO)
  logging.captureWarnings(True)
  logging.info("library logs go to %s (--verbosity=0 shows them here)", path)
  return path

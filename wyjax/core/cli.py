"""How every entry point starts and ends: `cli.run(main)` in place of absl's `app.run(main)`.

- A user error ends the process with one line, `wyjax: error: …` (at most a short hint), not a traceback:
  bad flags and config keys exit 2; bad input files, missing or wrong paths exit 1. `--verbosity` on the
  command line shows its traceback too.
- Modules report a user error by raising RunError, ValueError (FormatError among them) or OSError; any
  other exception is a bug and keeps its traceback.
- Ctrl-C ends any command with one line and exit 130, SIGTERM with 143 (a training loop first
  checkpoints: guards); one that comes while the command starts ends it at once (wyjax/__init__.py).
"""

import atexit
import contextlib
import gc
import glob
import importlib.metadata
import importlib.util
import math
import os
import pathlib
import re
import shutil
import signal
import sys

import jax
from absl import app, flags
from jax._src import xla_bridge

from wyjax.core import guards, host_memory, logs, storage

USER_ERRORS = (guards.RunError, ValueError, OSError)


@contextlib.contextmanager
def nothing_left_if_refused(folder, log_name: str):
  """Runs the block; a refusal in it (a user error) removes what it created in `folder` if that is only a log.

  What it created must be `log_name` and empty folders (orbax's checkpoints/); `folder` goes too, with its
  parents, if the block made them: a refused command leaves nothing behind. A block that wrote anything else
  there (a run that started work, then failed) keeps it all, its log included, to diagnose it. A folder in a
  bucket is not watched (its log is in the cache: logs.to_file).
  """
  if not folder or not storage.is_local(folder):
    yield
    return
  folder = pathlib.Path(folder)
  made = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]  # innermost first
  entries = lambda: set(os.listdir(folder)) if folder.is_dir() else set()
  before = entries()
  try:
    yield
  except USER_ERRORS:
    new = [folder / name for name in entries() - before]
    if all(p.name == log_name and p.is_file() or _empty_tree(p) for p in new):
      for path in new:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
      for path in made:
        if path.is_dir() and not any(path.iterdir()):
          path.rmdir()
    raise


def _empty_tree(path: pathlib.Path) -> bool:
  """Whether `path` is a folder holding nothing but (empty) folders."""
  return path.is_dir() and not path.is_symlink() and all(_empty_tree(p) for p in path.iterdir())


def _fail(message: str, code: int, hint: str | None = None):
  print(f"wyjax: error: {message}" + (f"\n({hint})" if hint else ""), file=sys.stderr)
  sys.exit(code)


def _missing_config_key(error: Exception, argv: list[str]) -> str:
  """ml_collections' KeyError chain for --config.<key> as one line, with its suggestion."""
  while error.__context__ is not None and not isinstance(error, KeyError):
    error = error.__context__
  reason = error.args[0] if error.args else str(error)
  missing, _, suggestion = str(reason).partition("\n")
  overrides = [a.split("=")[0] for a in argv[1:] if a.startswith("--") and "." in a.split("=")[0]]
  flag = next((o for o in overrides if missing.strip("'") in o.split(".")[1:]), " ".join(overrides))
  return f"{flag}: the config has no field {missing}" + (
    f"; {suggestion[0].lower()}{suggestion[1:]}" if suggestion else ""
  )


def _parse_flags(argv: list[str]) -> list[str]:
  try:
    rest = flags.FLAGS(argv)
  except flags.Error as e:
    _fail(str(e), 2, "--helpshort lists the flags")
  except (AttributeError, KeyError) as e:  # ml_collections: an override of a field the config lacks
    _fail(_missing_config_key(e, argv), 2)
  _refuse_non_finite(flags.FLAGS)
  _refuse_undecodable(flags.FLAGS)
  return rest


def _refuse_non_finite(flag_values) -> None:
  """Refuses a float flag that is not finite: absl's bounds let NaN through (no comparison with it is true)."""
  for name in flag_values:
    flag = flag_values[name]
    if isinstance(flag.parser, flags.FloatParser) and flag.value is not None and not math.isfinite(flag.value):
      _fail(f"flag --{name}={flag.value}: not a finite number", 2, "--helpshort lists the flags")


def _refuse_undecodable(flag_values) -> None:
  """Refuses a flag (config overrides included) whose text is not UTF-8, such as a folder named in GBK.

  Such bytes reach Python as lone surrogates, which libraries fail on far into the work.
  """
  for name in flag_values:
    flag = flag_values[name]
    config_flag = hasattr(type(flag), "override_values")  # ml_collections': its values are --config.<key>=…
    if config_flag and flag.value is None:  # (one not given, without a default, was never parsed)
      continue
    values = {f"{name}.{k}": v for k, v in flag.override_values.items()} if config_flag else {name: flag.value}
    for typed, value in values.items():
      for text in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(text, str) and _SURROGATE.search(text):
          _fail(f"flag --{typed}={_escaped(text)}: not UTF-8 (a name in GBK, say); rename it in UTF-8", 2)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _escaped(text: str) -> str:
  """`text` with the bytes its lone surrogates stand for (os reads undecodable bytes so) as \\xNN."""
  try:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
  except UnicodeEncodeError:  # a surrogate that stands for no byte
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _message(error: BaseException) -> str:
  if isinstance(error, OSError) and error.filename is not None and error.strerror:
    return f"{error.filename}: {error.strerror}"
  if isinstance(error, UnicodeEncodeError) and "surrogates" in error.reason:  # a name os read as undecodable bytes
    return f"{_undecodable_word(error)}: a file name that is not UTF-8 (GBK, say); rename it in UTF-8"
  return str(error)


def _undecodable_word(error: UnicodeEncodeError) -> str:
  """The word (up to whitespace or NUL) of the encoded text that holds the undecodable bytes, escaped."""
  word = next(m[0] for m in re.finditer(r"[^\s\0]+", error.object) if m.start() <= error.start < m.end())
  return _escaped(word)


class Terminated(BaseException):
  """SIGTERM outside a training loop, raised wherever the command is, as Ctrl-C raises KeyboardInterrupt.

  What the command was writing is removed on the way out (storage.written_whole), its workers are
  ended, and it exits with one line and 143.
  """


_received = []  # the stop signals that came while the command worked, whatever became of their exceptions


def _interrupt(signum, frame):
  """Ctrl-C: KeyboardInterrupt, as Python's own handler raises, remembered."""
  del frame
  _received.append(signum)
  raise KeyboardInterrupt


def _terminate(signum, frame):
  del frame
  _received.append(signum)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends at once a command stuck outside Python
  raise Terminated


def _stopped(signum: int):
  name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else signal.Signals(signum).name
  print(f"wyjax: stopped by {name}", file=sys.stderr)
  sys.exit(128 + signum)


def _clean_exit(main, argv):
  """Runs main(argv) and reports its end as one line.

  A stop signal ends the command with its line and code even where a library swallowed the exception
  it raised, or turned it into another.
  """
  try:
    main(argv)
  except guards.Interrupted as e:
    print(f"wyjax: {e}", file=sys.stderr)
    sys.exit(e.exit_code)
  except (KeyboardInterrupt, Terminated):  # outside a training loop
    _stopped(_received[0] if _received else signal.SIGINT)
  except app.UsageError as e:
    _fail(str(e), 2, "--helpshort lists the flags")
  except Exception as e:  # pylint: disable=broad-except
    if _received:  # what a swallowed stop became
      _stopped(_received[0])
    if not isinstance(e, USER_ERRORS) or flags.FLAGS["verbosity"].present:
      raise  # a bug keeps its traceback
    _fail(_message(e), 1)
  if _received:
    _stopped(_received[0])


# Device nodes of an accelerator: a TPU's (/dev/accel<n>, or VFIO groups /dev/vfio/<n> on newer
# TPU VMs), a GPU's (NVIDIA, NVIDIA under WSL2, AMD).
_TPU_NODES = ("/dev/accel*", "/dev/vfio/[0-9]*")
_GPU_NODES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def look_for_accelerators_only_where_they_can_be() -> None:
  """Sets JAX_PLATFORMS to the CPU where it is unset and no accelerator's device node exists.

  JAX would otherwise try every backend installed (libtpu prints warnings on a machine without a
  TPU). Child processes inherit the setting; a GPU machine keeps JAX's own search.
  """
  if jax.config.jax_platforms or any(glob.glob(p) for p in _TPU_NODES) or any(map(os.path.exists, _GPU_NODES)):
    return
  os.environ["JAX_PLATFORMS"] = "cpu"
  jax.config.update("jax_platforms", "cpu")


def runs_on_cpu() -> bool:
  """Whether JAX will compute on the CPU, told without starting JAX.

  True when JAX_PLATFORMS names the CPU alone, or no GPU or TPU plugin (a `jax_plugins` module or entry
  point, libtpu) is installed.
  """
  if jax.config.jax_platforms:
    return set(jax.config.jax_platforms.split(",")) == {"cpu"}
  plugins = importlib.util.find_spec("jax_plugins") or importlib.util.find_spec("libtpu")
  return not plugins and not importlib.metadata.entry_points(group="jax_plugins")


def start_jax_plugins() -> None:
  """Imports JAX's plugins now, while a stop request still ends the command at once.

  JAX would import them at its first array, under a bare `except:` that swallows a Ctrl-C. A platform
  JAX_PLATFORMS names that no plugin starts is one line with the plugin's own error; the plugins'
  records go to the log file (logs.held_back).
  """
  with logs.held_back(xla_bridge.logger.name) as records:
    xla_bridge._discover_and_register_pjrt_plugins()  # pylint: disable=protected-access
  started = xla_bridge._backend_factories  # pylint: disable=protected-access
  for platform in filter(None, (jax.config.jax_platforms or "").split(",")):
    if not any(p in started for p in xla_bridge.expand_platform_alias(platform)):
      failure = next((f"{r.exc_info[0].__name__}: {r.exc_info[1]}" for r in records if r.exc_info), None)
      _fail(
        f"JAX_PLATFORMS={jax.config.jax_platforms}: JAX cannot start {platform!r} on this machine ("
        f"{failure or 'no installed plugin provides it'}); unset JAX_PLATFORMS, or name a platform this "
        "machine has (cpu)",
        1,
      )


def _honour_stop_signals() -> None:
  """Makes a stop signal raise where the command is (KeyboardInterrupt, Terminated) from here on.

  A signal ignored from the start (nohup, a background job) stays ignored.
  """
  for signum, handler in ((signal.SIGINT, _interrupt), (signal.SIGTERM, _terminate)):
    if signal.getsignal(signum) != signal.SIG_IGN:
      signal.signal(signum, handler)


def _streams_that_hold_chinese() -> None:
  """Makes stderr escape what its encoding lacks, and refuses a stdout that cannot hold Chinese, before any work."""
  if hasattr(sys.stderr, "reconfigure"):
    sys.stderr.reconfigure(errors="backslashreplace")
  encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
  try:
    "文言".encode(encoding)
  except UnicodeEncodeError:
    _fail(
      f"standard output's encoding is {encoding}, which cannot hold Chinese; set PYTHONIOENCODING=utf-8 "
      "(or a UTF-8 locale)",
      2,
    )


def run(main) -> None:
  """app.run(main) with flag errors, user errors and stop signals each ending in one line."""
  # At exit, live objects are frozen out of the garbage collector: its last collections only free
  # memory the process gives back anyway, and cost most of a second.
  atexit.register(gc.freeze)
  _streams_that_hold_chinese()
  look_for_accelerators_only_where_they_can_be()
  start_jax_plugins()
  if runs_on_cpu():
    host_memory.keep_freed_memory()
  _honour_stop_signals()
  app.run(lambda argv: _clean_exit(main, argv), flags_parser=_parse_flags)

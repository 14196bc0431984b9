"""How every entry point starts and ends: `cli.run(main)` in place of absl's `app.run(main)`.

A user error ends the process with one line, `wyjax: error: …` (and at most a short hint),
not a traceback: bad flags and config keys (exit 2), bad input files, missing or wrong paths
(exit 1). wyjax's modules say "the user must fix this" by raising RunError, ValueError (the
readers' FormatError among them) or OSError; any other exception is a bug and keeps its
traceback. `--verbosity` on the command line shows the traceback of user errors too. Ctrl-C
ends any command with one line and exit 130, SIGTERM with 143 (a training loop first
checkpoints: guards).
"""
import atexit
import gc
import glob
import importlib.metadata
import importlib.util
import os
import signal
import sys

import jax
from absl import app, flags

from wyjax.core import guards, host_memory

USER_ERRORS = (guards.RunError, ValueError, OSError)


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
  flag = next((o for o in overrides if o.rsplit(".", 1)[-1] == missing.strip("'")), " ".join(overrides))
  return f"{flag}: the config has no field {missing}" + (f"; {suggestion[0].lower()}{suggestion[1:]}"
                                                         if suggestion else "")


def _parse_flags(argv: list[str]) -> list[str]:
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    _fail(str(e), 2, "--helpshort lists the flags")
  except (AttributeError, KeyError) as e:  # ml_collections: an override of a field the config lacks
    _fail(_missing_config_key(e, argv), 2)


def _message(error: BaseException) -> str:
  if isinstance(error, OSError) and error.filename is not None and error.strerror:
    return f"{error.filename}: {error.strerror}"
  return str(error)


class Terminated(BaseException):
  """SIGTERM outside a training loop, raised wherever the command is, as Ctrl-C raises
  KeyboardInterrupt: what it was writing is removed on the way out (storage.written_whole),
  its workers are ended, and it exits with one line and 143 (it died at once, leaving a hidden
  .partial file and no message)."""


def _raise_terminated(signum, frame):
  del signum, frame
  signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends at once a command stuck outside Python
  raise Terminated


def _clean_exit(main, argv):
  try:
    main(argv)
  except guards.Interrupted as e:
    print(f"wyjax: {e}", file=sys.stderr)
    sys.exit(e.exit_code)
  except KeyboardInterrupt:  # Ctrl-C outside a training loop
    print("wyjax: stopped by SIGINT (Ctrl-C)", file=sys.stderr)
    sys.exit(128 + signal.SIGINT)
  except Terminated:
    print("wyjax: stopped by SIGTERM", file=sys.stderr)
    sys.exit(128 + signal.SIGTERM)
  except app.UsageError as e:
    _fail(str(e), 2, "--helpshort lists the flags")
  except USER_ERRORS as e:
    if flags.FLAGS["verbosity"].present:
      raise
    _fail(_message(e), 1)


# Device nodes of an accelerator: a TPU's (/dev/accel<n>, or VFIO groups /dev/vfio/<n> on newer
# TPU VMs), a GPU's (NVIDIA, NVIDIA under WSL2, AMD).
_TPU_NODES = ("/dev/accel*", "/dev/vfio/[0-9]*")
_GPU_NODES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def look_for_accelerators_only_where_they_can_be() -> None:
  """With JAX_PLATFORMS unset, JAX tries every backend installed: libtpu (the test extras bring
  it) then prints its warnings and an `E0000 … TPU_WORKER_HOSTNAMES` line at the start of every
  command on a machine without a TPU. Where no accelerator's device node exists, JAX is told
  to start on the CPU alone, as it would after trying; the command's child processes inherit
  it. A GPU machine keeps JAX's own search (its plugin's platform name is JAX's to choose)."""
  if jax.config.jax_platforms or any(glob.glob(p) for p in _TPU_NODES) or any(map(os.path.exists, _GPU_NODES)):
    return
  os.environ["JAX_PLATFORMS"] = "cpu"
  jax.config.update("jax_platforms", "cpu")


def runs_on_cpu() -> bool:
  """Whether JAX will compute on the CPU, told without starting it (a multi-host run starts it
  after jax.distributed.initialize): JAX_PLATFORMS names the CPU alone, or no GPU or TPU
  plugin (a `jax_plugins` module or entry point, libtpu) is installed."""
  if jax.config.jax_platforms:
    return set(jax.config.jax_platforms.split(",")) == {"cpu"}
  plugins = importlib.util.find_spec("jax_plugins") or importlib.util.find_spec("libtpu")
  return not plugins and not importlib.metadata.entry_points(group="jax_plugins")


def run(main) -> None:
  """app.run(main) with flag errors, user errors and stop signals each ending in one line.

  At exit the objects still alive are frozen out of the garbage collector: the interpreter's
  last collections over jax, flax, orbax and grain's objects took 0.6–0.9 s of every command's
  end on 2 cores, to free memory the process gives back anyway."""
  atexit.register(gc.freeze)
  look_for_accelerators_only_where_they_can_be()
  if runs_on_cpu():
    host_memory.keep_freed_memory()
  if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # one ignored from the start stays so, as SIGINT does
    signal.signal(signal.SIGTERM, _raise_terminated)
  app.run(lambda argv: _clean_exit(main, argv), flags_parser=_parse_flags)

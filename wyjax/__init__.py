"""wyjax: JAX/Flax language models for classical Chinese (文言文).

`python -m wyjax.<command>` imports this package first. From then until the command starts its
work (`wyjax.core.cli.run`), a stop request, Ctrl-C or SIGTERM, ends it at once in one line:
nothing has started, so nothing is left half done. Importing JAX takes seconds, and a Ctrl-C
raised inside an import or inside JAX's plugin discovery was swallowed there (an ImportError,
a bare `except:`): the command ran to its end with exit 0.
"""

import os
import signal
import sys

__version__ = "0.1.0"


def stop_while_starting(signum, frame):
  """One line and 128 + the signal's number, now: the command has not started its work."""
  del frame
  name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else signal.Signals(signum).name
  os.write(2, f"wyjax: stopped by {name}\n".encode())
  os._exit(128 + signum)


if sys.argv[:1] == ["-m"]:  # python -m wyjax.<command>, while Python still locates the command
  for _signum, _default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
    if signal.getsignal(_signum) == _default:  # one ignored from the start (nohup, a background job) stays so
      signal.signal(_signum, stop_while_starting)

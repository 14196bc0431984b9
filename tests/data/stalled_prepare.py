"""`python -m wyjax.data` in which the worker that reads a text corpus's `slow.txt` first waits
on the FIFO `slow.fifo` beside it, as a worker inside a long file or a pipe would: how the tests
find prepare-corpus with a busy worker. Run as `python stalled_prepare.py prepare-corpus …`;
the spawned workers import this file as their main module, so the patch reaches them."""

from wyjax.data import corpus

_read = corpus.TextReader.read


def _read_after_the_fifo(reader, unit):
  if unit == "slow.txt":
    with open(reader.path / "slow.fifo", "rb") as fifo:
      fifo.read()
  return _read(reader, unit)


corpus.TextReader.read = _read_after_the_fifo

if __name__ == "__main__":
  from wyjax.core import cli
  from wyjax.data.__main__ import main

  cli.run(main)

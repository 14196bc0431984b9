"""Every stop request is honoured (issue 57): a Ctrl-C or SIGTERM while a command is still
starting (importing JAX, discovering its plugins) and one during fine-tuning's final
predictions each end the command within a second or so, in one line, with 130 or 143 and
nothing half written. Real processes and real signals (docs/reliability.md, "Wave 6")."""

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import as_from_a_terminal
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.tasks.wyweb_files import TLC_PERIOD_OF

LINE = {signal.SIGINT: "wyjax: stopped by SIGINT (Ctrl-C)", signal.SIGTERM: "wyjax: stopped by SIGTERM"}


def _start(command: list[str], env: dict | None = None) -> subprocess.Popen:
  """The command as a terminal starts it (SIGINT at its default, whatever the pytest worker holds)."""
  return subprocess.Popen(
    as_from_a_terminal(command), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )


def _stopped(process: subprocess.Popen, signum: int, within: float) -> str:
  """Sends signum; returns stderr once the process ended with 128 + signum within `within` s."""
  sent = time.monotonic()
  process.send_signal(signum)
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 128 + signum, stderr[-3000:]
  assert time.monotonic() - sent < within, f"{time.monotonic() - sent:.1f} s after the signal"
  return stderr


def _catches_sigterm(pid: int) -> bool:
  """Whether the process has a handler for SIGTERM (Linux's SigCgt mask): Python sets none
  itself, wyjax/__init__.py sets one as its first work."""
  status = pathlib.Path(f"/proc/{pid}/status").read_text()
  caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
  return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_while_the_command_starts_is_one_line(tmp_path, signum):
  """As soon as Python has started wyjax (its first line: about 0.05 s on 2 cores), and half a
  second later, the command is importing (4 s): a Ctrl-C there was a KeyboardInterrupt
  traceback, or was swallowed by an import (an ImportError) and export ran on to exit 0; a
  SIGTERM killed it silently. Now it is one line, at once. (Before wyjax's first line, Python's
  own start, a signal still acts as Python's default.)"""
  command = [sys.executable, "-m", "wyjax.export", f"--checkpoint={tmp_path / 'missing'}", f"--out={tmp_path / 'o'}"]
  for delay in (0, 0.5):
    process = _start(command)
    deadline = time.monotonic() + 60
    while not _catches_sigterm(process.pid):
      assert process.poll() is None and time.monotonic() < deadline
      time.sleep(0.002)
    time.sleep(delay)
    assert process.poll() is None
    assert _stopped(process, signum, within=2).splitlines() == [LINE[signum]]


def test_a_stop_while_jax_discovers_its_plugins_is_one_line(tmp_path):
  """JAX imports its plugins under a bare `except:` that swallowed a Ctrl-C. A plugin that takes
  its time (it writes a file, then sleeps) shows where discovery happens: while the command
  starts (cli.start_jax_plugins), where a stop ends it at once; a command that never touched JAX
  before failing (export of a missing folder) now discovers them too, so the test cannot pass
  without it."""
  plugin = tmp_path / "path" / "jax_plugins" / "slow_plugin"
  plugin.mkdir(parents=True)
  started = tmp_path / "started"
  (plugin / "__init__.py").write_text(
    f"import pathlib, time\ndef initialize():\n  pathlib.Path({str(started)!r}).touch()\n  time.sleep(30)\n"
  )
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "path"), str(REPO_ROOT)])}
  process = _start(
    [sys.executable, "-m", "wyjax.export", f"--checkpoint={tmp_path / 'missing'}", f"--out={tmp_path / 'o'}"], env
  )
  deadline = time.monotonic() + 120
  while not started.exists():
    assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
    time.sleep(0.02)
  assert _stopped(process, signal.SIGINT, within=2).splitlines() == [LINE[signal.SIGINT]]


def tlc_folder(folder: pathlib.Path, counts: dict[str, int]) -> pathlib.Path:
  """A TLC folder of generated lines (characters drawn from a few hundred), `counts` per split."""
  rng = random.Random(0)
  characters = [chr(0x4E00 + i) for i in range(300)]
  dynasties = sorted(TLC_PERIOD_OF)
  folder.mkdir()
  for split, count in counts.items():
    lines = []
    for _ in range(count):
      dynasty = rng.choice(dynasties)
      lines.append(f"{TLC_PERIOD_OF[dynasty]}\t{dynasty}\t{''.join(rng.choices(characters, k=rng.randint(20, 90)))}\n")
    (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
  return folder


def test_sigterm_during_the_final_test_predictions_stops_at_once(tmp_path):
  """Training ended (two steps), dev was scored: the seed then predicts a test split of 12,000
  lines (several seconds), inside the loop's stop_signals block. A SIGTERM there was taken by the
  loop's handler and never looked at again: predictions ran to the end, exit 0. Now the
  predictions honour it between batches (guards.honour_stop): 143, one line, no test predictions
  and no run.json (the rerun resumes from the last checkpoint)."""
  data = tlc_folder(tmp_path / "tlc", {"train": 64, "dev": 16, "test": 12_000})
  workdir = tmp_path / "run"
  process = _start(
    [
      sys.executable,
      "-m",
      "wyjax.finetune",
      "--config=tlc",
      f"--workdir={workdir}",
      f"--config.data_dir={data}",
      "--config.num_train_steps=2",
      "--config.batch_size=8",
      "--config.eval_every=2",
      "--config.length_buckets=1",
      "--config.eval_batch_size=32",
    ],
    pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
  )
  dev_predictions = workdir / "seed_0" / "dev_predictions.tsv"  # written just before test is predicted
  deadline = time.monotonic() + 300
  while not dev_predictions.exists():
    assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
    time.sleep(0.02)
  stderr = _stopped(process, signal.SIGTERM, within=3)
  assert stderr.splitlines()[-1] == (
    "wyjax: stopped by SIGTERM in seed_0's final predictions, its training done and checkpointed; rerun the same "
    "command to predict again"
  ), stderr[-3000:]
  assert not list((workdir / "seed_0").glob("test_predictions*")) and not (workdir / "seed_0" / "run.json").exists()

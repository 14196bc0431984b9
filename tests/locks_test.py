"""One writer per folder (wyjax.core.locks); the two-command cases with real processes are in
tests/data/prepare_test.py (prepare-corpus) and tests/train/workdir_test.py (fine-tuning)."""

import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys

import pytest

from wyjax.core import locks


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
  """The export command too: refused in one line while another holds its --out. A folder the
  lock created is removed again when nothing was written into it."""
  out = tmp_path / "out"
  with locks.held(out, "export"):
    record = json.loads((out / locks.LOCK).read_text())
    assert (record["pid"], record["host"]) == (os.getpid(), socket.gethostname())
    refusal = (
      f"{out} is being written by export (process {os.getpid()} on {socket.gethostname()}, since "
      f"{record['since']}); wait until it ends, or choose another folder"
    )
    with pytest.raises(locks.Busy) as busy:
      with locks.held(out, "prepare-corpus"):
        pass
    assert str(busy.value) == refusal
    exported = subprocess.run(
      [sys.executable, "-m", "wyjax.export", "--random_init=pretrain/deberta_tiny.py", f"--out={out}"],
      capture_output=True,
      text=True,
      timeout=300,
    )
    assert exported.returncode == 1 and exported.stderr.splitlines()[-1] == f"wyjax: error: {refusal}", exported.stderr
    assert [p.name for p in out.iterdir()] == [locks.LOCK]
  assert not out.exists()
  (tmp_path / "kept").mkdir()
  with locks.held(tmp_path / "kept", "test"):
    (tmp_path / "kept" / "file").write_text("written")
  assert [p.name for p in (tmp_path / "kept").iterdir()] == ["file"]


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path, caplog):
  """The kernel ends a flock with its process, however it ends: the next writer takes the lock
  over (the file, with the dead holder's record, is still there), never obeys it for ever."""
  folder = tmp_path / "run"
  holder = subprocess.Popen(
    [
      sys.executable,
      "-c",
      "import sys, time; from wyjax.core import locks\n"
      "with locks.held(sys.argv[1], 'test'):\n  print('held', flush=True); time.sleep(600)",
      str(folder),
    ],
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(locks.Busy, match=f"process {holder.pid} on"):
      with locks.held(folder, "test"):
        pass
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)
  assert json.loads((folder / locks.LOCK).read_text())["pid"] == holder.pid
  with caplog.at_level(logging.INFO), locks.held(folder, "test"):
    assert json.loads((folder / locks.LOCK).read_text())["pid"] == os.getpid()
  assert f"took over the lock of process {holder.pid} on {socket.gethostname()}" in caplog.text
  assert list(folder.iterdir()) == []  # released (the folder is the dead holder's: kept)


def test_a_file_system_without_flock_is_locked_as_a_bucket_is(tmp_path, monkeypatch):
  """A bucket mounted by gcsfuse has no flock (here: flock raising EOPNOTSUPP, as such a mount
  does): the lock is then the record written and read back, and the refusal says that a gone
  holder's file must be deleted by hand (its liveness is known only on its own host)."""

  def no_flock(fd, operation):
    raise OSError(errno.EOPNOTSUPP, "Operation not supported")

  monkeypatch.setattr(locks.fcntl, "flock", no_flock)
  with locks.held(tmp_path, "export"):
    assert json.loads((tmp_path / locks.LOCK).read_text())["pid"] == os.getpid()
    with pytest.raises(locks.Busy, match=rf"process {os.getpid()} on .*; .*delete {tmp_path / locks.LOCK}: a bucket"):
      with locks.held(tmp_path, "export"):
        pass
  assert not (tmp_path / locks.LOCK).exists()


def test_a_lock_that_cannot_be_written_names_its_file_and_leaves_nothing(tmp_path):
  """A full disk (a file-size limit here, `ulimit -f 0`: EFBIG, as ENOSPC) failed the lock's
  record with "[Errno 28]", naming no file, and left an empty lock file, and the folder the lock
  had created, behind."""
  script = "import sys\nfrom wyjax.core import locks\nwith locks.held(sys.argv[1], 'test'):\n  pass"
  for folder in (tmp_path / "new" / "corpus", tmp_path):  # one the lock creates, one that was there
    full = subprocess.run(
      ["bash", "-c", 'ulimit -f 0 && exec "$@"', "bash", sys.executable, "-c", script, str(folder)],
      capture_output=True,
      text=True,
    )
    assert (
      full.returncode == 1
      and full.stderr.splitlines()[-1] == f"OSError: [Errno 27] File too large: '{folder / locks.LOCK}'"
    ), full.stderr
  assert sorted(p.name for p in tmp_path.rglob("*")) == ["new"]

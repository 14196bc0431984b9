"""What storage's writes leave at a path: a complete file or the one that was there, never half
of one, and never a file in place of a pipe, a device or a symbolic link."""

import os
import stat
import subprocess
import sys
import threading

from tests.train.conftest import REPO_ROOT
from wyjax.core import storage


def test_a_fifo_is_written_as_a_stream_never_replaced(tmp_path):
  """Renaming a complete temporary file over the path replaced a FIFO (and, as root, /dev/null:
  `predict --output=/dev/null --overwrite`) with a regular file; its reader waited for ever."""
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  received = []
  reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
  reader.start()
  with storage.written_whole(fifo, "wb") as f:
    f.write(b"through the pipe")
  reader.join(timeout=30)
  assert received == [b"through the pipe"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
  assert os.listdir(tmp_path) == ["fifo"]


def test_a_symlink_is_written_through_to_its_target(tmp_path):
  """The link stays, its target (in another folder) gets the new content: the link was replaced
  by a file and the target left as it was."""
  target = tmp_path / "results" / "scores.txt"
  target.parent.mkdir()
  target.write_text("old")
  link = tmp_path / "latest.txt"
  link.symlink_to(target)
  with storage.written_whole(link) as f:
    f.write("new")
  assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "new"
  assert sorted(p.name for p in tmp_path.rglob("*")) == ["latest.txt", "results", "scores.txt"]


def test_json_written_on_a_full_disk_leaves_the_file_that_was_there(tmp_path):
  """run.json, results.json, run_config.json, model.json (storage.write_json): a write cut short
  by a full disk left a truncated file, which a rerun took for a finished seed. A full disk is a
  file-size limit here (`ulimit -f`, RLIMIT_FSIZE: EFBIG, as ENOSPC on a full disk)."""
  run = tmp_path / "run.json"
  run.write_text('{"seed": 0}')
  script = f"from wyjax.core import storage; storage.write_json({str(run)!r}, {{'dev': 'x' * 5000}})"
  full = subprocess.run(
    ["bash", "-c", 'ulimit -f 2 && exec "$@"', "bash", sys.executable, "-c", script],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert full.returncode == 1 and full.stderr.splitlines()[-1] == f"OSError: [Errno 27] File too large: '{run}'"
  assert run.read_text() == '{"seed": 0}' and os.listdir(tmp_path) == ["run.json"]

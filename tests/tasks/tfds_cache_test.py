"""wyjax's TFDS builds (<cache>/tfds): one that cannot be read is rebuilt, and a full disk while
building is one line naming the cache; a rerun with room builds. Both ended in a traceback, the
same on every rerun, with no hint of which folder to delete."""

import os
import subprocess
import sys

import pytest

from tests.train.conftest import REPO_ROOT
from wyjax.tasks import datasets
from wyjax.tasks.registry import TASKS

TLC = TASKS["tlc"].files


def _tlc(folder):
  folder.mkdir()
  (folder / "train.tsv").write_text("远古\t先秦\t子曰学而时习之\n近古\t清\t红楼梦\n", encoding="utf-8")
  (folder / "dev.tsv").write_text("远古\t先秦\t学而时习之\n", encoding="utf-8")
  return folder


def _cut_in_half(path):
  path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGES = {
  "a shard cut short": lambda build: _cut_in_half(next(build.glob("*-train.array_record*"))),
  "a missing shard": lambda build: next(build.glob("*-dev.array_record*")).unlink(),
  "a broken dataset_info.json": lambda build: (build / "dataset_info.json").write_text('{"name": '),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_build_is_rebuilt(damage, tmp_path, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  data = _tlc(tmp_path / "tlc")
  texts = lambda splits: {split: [e.text for e in examples] for split, examples in splits.items()}
  built = texts(datasets.load_splits(TLC, data))
  assert built == {"train": ["子曰学而时习之", "红楼梦"], "dev": ["学而时习之"]}
  (build,) = (p.parent for p in (tmp_path / "cache" / "tfds").glob("*/*/*/*/dataset_info.json"))
  DAMAGES[damage](build)
  assert texts(datasets.load_splits(TLC, data)) == built


def test_a_full_disk_while_building_is_one_line_naming_the_cache(tmp_path):
  """A full disk is a file-size limit (`ulimit -f`: EFBIG, as ENOSPC), below a shard's size."""
  data = _tlc(tmp_path / "tlc")
  script = (
    "import sys\nfrom wyjax.core import cli\nfrom wyjax.tasks import datasets, registry\n"
    "cli.run(lambda argv: datasets.load_splits(registry.TASKS['tlc'].files, argv[1]))"
  )
  env = {**os.environ, "WYJAX_CACHE": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
  command = [sys.executable, "-c", script, str(data)]
  full = subprocess.run(
    ["bash", "-c", 'ulimit -f 32 && exec "$@"', "bash", *command],
    env=env,
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  (build_dir,) = (tmp_path / "cache" / "tfds").iterdir()
  assert full.returncode == 1 and full.stderr.splitlines()[-1] == (
    f"wyjax: error: {build_dir}: File too large while building the dataset; free space there (or set "
    "WYJAX_CACHE to a disk with room) and rerun"
  ), full.stderr[-3000:]
  rerun = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
  assert rerun.returncode == 0, rerun.stderr[-3000:]

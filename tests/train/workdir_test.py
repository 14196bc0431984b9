"""One writer per workdir, and nothing stale in it: two fine-tunings at once, a rerun over edited
data files, a pretraining data_dir that holds no finished corpus."""
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.train.conftest import CONFIG, REPO_ROOT, pretrain_env
from wyjax.core import config_files, guards, locks, run_config
from wyjax.data import prepare
from wyjax.train import finetuning, pretraining, suite

TINY = dict(num_train_steps=2, eval_every=2, max_length=32, batch_size=8, learning_rate=1e-3)


@pytest.fixture
def tlc(shared_data, tmp_path, monkeypatch):
  """A small TLC folder (train 64 real lines, dev 16, test 16) and a private cache."""
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  lines = (shared_data / "wyweb" / "tlc" / "train.tsv").read_bytes().split(b"\n")
  folder = tmp_path / "tlc"
  folder.mkdir()
  for split, rows in (("train", slice(0, 64)), ("dev", slice(64, 80)), ("test", slice(80, 96))):
    (folder / f"{split}.tsv").write_bytes(b"\n".join(lines[rows]) + b"\n")
  return folder


def _files(folder) -> dict:
  return {p.relative_to(folder): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_a_rerun_over_edited_data_is_refused_unless_it_starts_afresh(tlc, tmp_path):
  """The same command after the dev file changed said "seed 0 finished earlier: kept as it is"
  and kept the old scores. It is refused, naming the file; --fresh_start sets the earlier runs
  aside (nothing deleted) and trains on the new files."""
  workdir = tmp_path / "run"
  first = finetuning.finetune(suite.task_config("tlc", data_dir=str(tlc), **TINY), workdir)
  recorded = json.loads((workdir / run_config.DATA).read_text())
  assert set(recorded) == {"train", "dev", "test"}
  assert recorded["dev"]["dev.tsv"]["bytes"] == (tlc / "dev.tsv").stat().st_size
  dev = (tlc / "dev.tsv").read_bytes()
  (tlc / "dev.tsv").write_bytes(dev[:dev.rindex(b"\n", 0, -1) + 1])  # the last line removed
  before = _files(workdir)
  with pytest.raises(run_config.DataChanged, match=r"(?s)other data.*\n  dev: dev.tsv changed \(.* bytes, sha256 "
                                                   r"\w{12} -> .*--fresh_start"):
    finetuning.finetune(suite.task_config("tlc", data_dir=str(tlc), **TINY), workdir)
  assert _files(workdir) == before
  finetuning.finetune(suite.task_config("tlc", data_dir=str(tlc), **TINY), workdir, fresh_start=True)
  (aside,) = workdir.glob(f"{run_config.PREVIOUS}*")
  assert json.loads((aside / "results.json").read_text())["dev"] == first["dev"]  # the earlier runs, kept whole
  assert {p.relative_to(aside) for p in aside.rglob("*")} >= set(before)
  assert json.loads((workdir / run_config.DATA).read_text())["dev"]["dev.tsv"]["bytes"] == \
      (tlc / "dev.tsv").stat().st_size < len(dev)
  assert len((workdir / "seed_0" / "dev_predictions.tsv").read_text().splitlines()) == 15  # the new dev file's


def _holder(folder) -> int | None:
  """The process id the folder's lock names; None before it is written whole."""
  try:
    return json.loads((folder / locks.LOCK).read_text()).get("pid")
  except (OSError, ValueError):
    return None


def test_two_fine_tunings_never_write_one_workdir_at_once(tlc, tmp_path, caplog):
  """Two fine-tunings into one --workdir with different learning rates both exited 0, one rate in
  run_config.json, both runs' steps in metrics.jsonl. The second is refused in one line naming
  the first (its process id and host), before it writes anything; a lock whose process was killed
  is taken over."""
  workdir = tmp_path / "run"
  command = lambda rate: [sys.executable, "-m", "wyjax.finetune", "--config=tlc", f"--workdir={workdir}",
                          f"--config.data_dir={tlc}", *(f"--config.{k}={v}" for k, v in TINY.items() if
                                                        k != "learning_rate"), f"--config.learning_rate={rate}"]
  env = pretrain_env(WYJAX_CACHE=str(tmp_path / "cache"))
  first = subprocess.Popen(command(1e-3), cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
  try:
    deadline = time.monotonic() + 120
    while _holder(workdir) != first.pid:
      assert first.poll() is None and time.monotonic() < deadline
      time.sleep(0.02)
    first.send_signal(signal.SIGSTOP)  # holding the lock, wherever it is in its run
    before = {p: v for p, v in _files(workdir).items() if p.name != "finetune.log"}
    second = subprocess.run(command(2e-3), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    since = json.loads((workdir / locks.LOCK).read_text())["since"]
    assert second.returncode == 1 and second.stderr.splitlines()[-1] == (
        f"wyjax: error: {workdir} is being written by fine-tuning (process {first.pid} on {socket.gethostname()}, "
        f"since {since}); wait until it ends, or choose another folder"), second.stderr
    assert {p: v for p, v in _files(workdir).items() if p.name != "finetune.log"} == before
  finally:
    first.kill()
    first.wait(timeout=60)
  with caplog.at_level(logging.INFO), locks.held(workdir, "test"):
    pass
  assert f"took over the lock of process {first.pid} on {socket.gethostname()}" in caplog.text
  assert not (workdir / locks.LOCK).exists()


def test_pretraining_refuses_a_workdir_another_command_writes(tmp_path):
  """Pretraining takes its workdir's lock before it reads or writes anything there."""
  config = config_files.load("pretrain/deberta_tiny")
  with locks.held(tmp_path / "run", "fine-tuning"):
    with pytest.raises(locks.Busy, match=f"{tmp_path / 'run'} is being written by fine-tuning \\(process "
                                         f"{os.getpid()} on"):
      pretraining.train_and_evaluate(config, tmp_path / "run")
    assert [p.name for p in (tmp_path / "run").iterdir()] == [locks.LOCK]


def test_pretraining_never_fills_a_data_dir_that_holds_no_corpus(tmp_path, shared_data):
  """A mistyped --config.data_dir, or one whose text: build was interrupted, was silently filled
  with the default corpus and trained on. Both are errors naming what is there; --prepare_corpus
  builds config.corpus there, but not over another source's unfinished build."""
  config = config_files.load("pretrain/deberta_tiny")
  config.data_dir = str(tmp_path / "corpsu")
  with pytest.raises(guards.RunError, match=f"--config.data_dir {config.data_dir} does not exist; prepare a corpus "
                                            r"there with `python -m wyjax.data prepare-corpus .* --prepare_corpus"):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert not (tmp_path / "corpsu").exists() and not (tmp_path / "run").exists()

  texts = tmp_path / "texts"
  texts.mkdir()
  (texts / "a.txt").write_text("學而時習之\n", encoding="utf-8")
  (texts / "gbk.txt").write_bytes("國家".encode("gbk"))  # the build stops here, as an interrupted one does
  with pytest.raises(ValueError, match="not valid UTF-8"):
    prepare.prepare_corpus(tmp_path / "corpus", prepare.Options(source=f"text:{texts}"), workers=1, log=print)
  config.data_dir = str(tmp_path / "corpus")
  unfinished = f"holds an unfinished build of text:{texts} \\(preparing.json, no manifest.json\\): interrupted"
  with pytest.raises(guards.RunError, match=f"--config.data_dir {config.data_dir} {unfinished}"):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  config.corpus.source = f"text:{shared_data / 'daizhige_sample'}"
  with pytest.raises(guards.RunError, match=f"--out {config.data_dir} {unfinished}.*--overwrite"):
    pretraining.train_and_evaluate(config, tmp_path / "run", prepare_corpus=True)
  assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [prepare.BUILDING]


def test_pretraining_resumed_over_a_rebuilt_corpus_is_refused(tiny_corpus, shared_data, tmp_path):
  """The workdir records its corpus (data_files.json): the same command over a corpus rebuilt
  under the same path with other options would resume a data iterator into other sequences."""
  data_dir = tmp_path / "corpus"
  shutil.copytree(tiny_corpus, data_dir)
  config = config_files.load(str(CONFIG))
  config.data_dir, config.num_train_steps = str(data_dir), 2
  pretraining.train_and_evaluate(config, tmp_path / "run")
  recorded = json.loads((tmp_path / "run" / run_config.DATA).read_text())
  assert list(recorded) == ["corpus"] and recorded == pretraining.corpus_fingerprint(prepare.read_manifest(data_dir))

  prepare.prepare_corpus(data_dir, prepare.Options(source=f"daizhige:{shared_data / 'daizhige_sample'}",
                                                   sequence_length=64, valid_fraction=0.3),
                         workers=1, progress=False, overwrite=True, log=lambda *_: None)
  before = _files(tmp_path / "run")  # the same command again
  with pytest.raises(run_config.DataChanged, match=r"corpus: manifest.json changed \([\d,]+ bytes, sha256 \w+ -> "
                                                   r"[\d,]+ bytes.*\nResume with the corpus the run was made from"):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert _files(tmp_path / "run") == before

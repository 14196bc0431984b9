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

import jax
import pytest

from tests.train.conftest import CONFIG, REPO_ROOT, pretrain_env
from wyjax.core import config_files, guards, locks, run_config, storage
from wyjax.data import prepare
from wyjax.data import tokenizer as tk
from wyjax.data.corpus import source_place
from wyjax.hf import export_folder, loading
from wyjax.models import EncoderConfig
from wyjax.train import finetuning, pretraining, pretraining_corpus, suite, task_model

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
  (tlc / "dev.tsv").write_bytes(dev[: dev.rindex(b"\n", 0, -1) + 1])  # the last line removed
  before = _files(workdir)
  with pytest.raises(
    run_config.DataChanged,
    match=r"(?s)other data.*\n  dev: dev.tsv changed \(.* bytes, sha256 "
    r"\w{12} -> .*--fresh_start",
  ):
    finetuning.finetune(suite.task_config("tlc", data_dir=str(tlc), **TINY), workdir)
  assert _files(workdir) == before
  finetuning.finetune(suite.task_config("tlc", data_dir=str(tlc), **TINY), workdir, fresh_start=True)
  (aside,) = workdir.glob(f"{run_config.PREVIOUS}*")
  assert json.loads((aside / "results.json").read_text())["dev"] == first["dev"]  # the earlier runs, kept whole
  assert {p.relative_to(aside) for p in aside.rglob("*")} >= set(before)
  assert (
    json.loads((workdir / run_config.DATA).read_text())["dev"]["dev.tsv"]["bytes"]
    == (tlc / "dev.tsv").stat().st_size
    < len(dev)
  )
  assert len((workdir / "seed_0" / "dev_predictions.tsv").read_text().splitlines()) == 15  # the new dev file's


def _tiny_export(folder, vocab_texts, seed: int):
  """A random tiny MLM exported to `folder` (transformers), replacing what is there."""
  tokenizer = tk.Tokenizer(tk.build_vocab(vocab_texts))
  config = EncoderConfig(**task_model.FRESH_TINY_MODEL, vocab_size=len(tokenizer))
  export_folder.export(
    loading.Model(config, loading.init_params(config, jax.random.key(seed)), tokenizer), folder, overwrite=True
  )


def test_a_workdir_that_is_a_project_folder_keeps_the_users_files(tlc, tmp_path, monkeypatch):
  """`--workdir=.` in a project folder keeps the user's files: --fresh_start sets aside only what
  fine-tuning writes (not the user's data/, notes.txt and thesis/), and a folder holding the user's
  own entries under those names (a `submission/`) is refused before the first run writes there.
  The data folder spelled otherwise (absolute, a trailing slash) is the same folder, not another
  config. A --config.init model replaced under the same path is not the same init: its weights are
  recorded by content, and a rerun over another is refused."""
  project = tmp_path / "project"
  shutil.copytree(tlc, project / "data")
  (project / "notes.txt").write_text("my notes\n")
  (project / "thesis").mkdir()
  (project / "thesis" / "chapter1.md").write_text("# 1\n")
  texts = [line.split("\t")[0] for line in (tlc / "train.tsv").read_text(encoding="utf-8").splitlines()]
  _tiny_export(tmp_path / "init", texts, seed=1)
  (project / "submission").mkdir()  # the user's, named as fine-tuning's own
  monkeypatch.chdir(project)
  config = lambda data_dir, init: suite.task_config("tlc", data_dir=data_dir, init=init, **TINY)
  with pytest.raises(
    guards.RunError,
    match=r"^--workdir \. holds submission, named as a run's own files but written "
    "by no run",
  ):
    finetuning.finetune(config("data", str(tmp_path / "init")), ".")
  (project / "submission").rename(project / "my_submission")
  first = finetuning.finetune(config("data", str(tmp_path / "init")), ".")
  again = finetuning.finetune(config(f"{project / 'data'}/", f"{tmp_path / 'init'}/"), project)
  assert again["dev"] == first["dev"]  # the same folders: the finished seed kept, not a config change

  _tiny_export(tmp_path / "init", texts, seed=2)  # another model, the same path
  with pytest.raises(run_config.DataChanged, match=r"(?s)\n  init: model.safetensors changed \(.*--fresh_start"):
    finetuning.finetune(config("data", str(tmp_path / "init")), ".")
  ours = {p.name for p in project.iterdir()} - {"data", "notes.txt", "thesis", "my_submission", locks.LOCK}
  assert ours == {"run_config.json", "data_files.json", "results.json", "submission", "seed_0"}
  finetuning.finetune(config("data", str(tmp_path / "init")), ".", fresh_start=True)
  (aside,) = project.glob(f"{run_config.PREVIOUS}*")
  assert {p.name for p in aside.iterdir()} == ours
  assert (project / "notes.txt").read_text() == "my notes\n" and (project / "thesis" / "chapter1.md").exists()
  assert sorted(p.name for p in (project / "data").iterdir()) == ["dev.tsv", "test.tsv", "train.tsv"]
  recorded = json.loads((project / run_config.DATA).read_text())["init"]["model.safetensors"]["sha256"]
  assert recorded == storage.file_sha256(tmp_path / "init" / "model.safetensors")  # trained from the new init


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
  command = lambda rate: [
    sys.executable,
    "-m",
    "wyjax.finetune",
    "--config=tlc",
    f"--workdir={workdir}",
    f"--config.data_dir={tlc}",
    *(f"--config.{k}={v}" for k, v in TINY.items() if k != "learning_rate"),
    f"--config.learning_rate={rate}",
  ]
  env = pretrain_env(WYJAX_CACHE=str(tmp_path / "cache"))
  first = subprocess.Popen(command(1e-3), cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
      f"since {since}); wait until it ends, or choose another folder"
    ), second.stderr
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
    with pytest.raises(
      locks.Busy, match=f"{tmp_path / 'run'} is being written by fine-tuning \\(process {os.getpid()} on"
    ):
      pretraining.train_and_evaluate(config, tmp_path / "run")
    assert [p.name for p in (tmp_path / "run").iterdir()] == [locks.LOCK]


def test_pretraining_never_fills_a_data_dir_that_holds_no_corpus(tmp_path, shared_data):
  """A mistyped --config.data_dir, or one whose text: build was interrupted, was silently filled
  with the default corpus and trained on. Both are errors naming what is there; --prepare_corpus
  builds config.corpus there, but not over another source's unfinished build."""
  config = config_files.load("pretrain/deberta_tiny")
  config.data_dir = str(tmp_path / "corpsu")
  with pytest.raises(
    guards.RunError,
    match=f"--config.data_dir {config.data_dir} does not exist; prepare a corpus "
    r"there with `python -m wyjax.data prepare-corpus .* --prepare_corpus",
  ):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert not (tmp_path / "corpsu").exists() and not (tmp_path / "run").exists()

  texts = tmp_path / "texts"
  texts.mkdir()
  (texts / "a.txt").write_text("學而時習之\n", encoding="utf-8")
  (tmp_path / "corpus").mkdir()  # what a build killed (SIGKILL: no cleaning up) leaves: its record
  (tmp_path / "corpus" / prepare.BUILDING).write_text(json.dumps({"source": source_place(f"text:{texts}")}))
  config.data_dir = str(tmp_path / "corpus")
  unfinished = f"holds an unfinished build of text:{texts} \\(preparing.json, no manifest.json\\): interrupted"
  with pytest.raises(guards.RunError, match=f"--config.data_dir {config.data_dir} {unfinished}"):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  config.corpus.source = f"text:{shared_data / 'daizhige_sample'}"
  with pytest.raises(
    guards.RunError,
    match=f"--config.data_dir {config.data_dir} {unfinished}.*`python -m wyjax.data prepare-corpus --overwrite`",
  ):  # not pretraining's --out, --overwrite
    pretraining.train_and_evaluate(config, tmp_path / "run", prepare_corpus=True)
  assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == [prepare.BUILDING]


def test_one_source_spelled_two_ways_is_one_cached_corpus(tmp_path, monkeypatch):
  """Pretraining without a data_dir prepares config.corpus in wyjax's cache, in a folder named
  after the source: `text:texts/` and `text:/abs/texts` were two corpora, built twice."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "texts").mkdir()
  config = config_files.load(str(CONFIG))
  folders = set()
  for source in ("text:texts/", f"text:{tmp_path / 'texts'}", "text:./texts"):
    config.corpus.source = source
    folders.add(pretraining_corpus.corpus_dir(config))
  assert len(folders) == 1, folders


def test_pretraining_resumed_over_a_rebuilt_corpus_is_refused(tiny_corpus, shared_data, tmp_path):
  """The workdir records its corpus (data_files.json): its manifest and each shard by content.
  Rebuilt under the same path from other text with the same counts (each book's lines in reverse
  order: the same characters, documents, tokens and sequences), the corpus was resumed ("resumed
  from step 2"); it is refused, naming the shards. A shard changed after its build (its manifest
  kept) is refused too."""
  data_dir = tmp_path / "corpus"
  shutil.copytree(tiny_corpus, data_dir)
  config = config_files.load(str(CONFIG))
  config.data_dir, config.num_train_steps = str(data_dir), 2
  pretraining.train_and_evaluate(config, tmp_path / "run")
  built = prepare.read_manifest(data_dir)
  recorded = json.loads((tmp_path / "run" / run_config.DATA).read_text())
  assert recorded == pretraining_corpus.corpus_fingerprint(data_dir, built)
  assert set(recorded["corpus"]) == {prepare.MANIFEST, *built["shard_sha256"]} and len(built["shard_sha256"]) == 2
  config.data_dir = f"{data_dir}/"  # the same folder: not "another config" ("would mix two trainings")
  pretraining.train_and_evaluate(config, tmp_path / "run")

  reversed_text = tmp_path / "reversed"
  for book in (shared_data / "daizhige_sample").rglob("*.txt"):
    lines = book.read_text(encoding="utf-8").splitlines()
    (reversed_text / book.relative_to(shared_data / "daizhige_sample")).parent.mkdir(parents=True, exist_ok=True)
    (reversed_text / book.relative_to(shared_data / "daizhige_sample")).write_text(
      "".join(line + "\n" for line in reversed(lines)), encoding="utf-8"
    )
  rebuilt = prepare.prepare_corpus(
    data_dir,
    prepare.Options(source=f"daizhige:{reversed_text}", sequence_length=64, valid_fraction=0.2),
    workers=1,
    progress=False,
    overwrite=True,
    log=lambda *_: None,
  )
  counts = ("documents", "vocab_size", "tokens", "sequences")
  assert {k: rebuilt[k] for k in counts} == {k: built[k] for k in counts}
  before = _files(tmp_path / "run")  # the same command again
  with pytest.raises(
    run_config.DataChanged,
    match=r"(?s)corpus: manifest.json changed .*\n  corpus: "
    r"train-00000.array_record changed \([\d,]+ bytes, sha256 \w+ -> "
    r".*\nResume with the corpus the run was made from",
  ):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert _files(tmp_path / "run") == before

  shutil.rmtree(data_dir)
  shutil.copytree(tiny_corpus, data_dir)
  shard = data_dir / built["shards"]["valid"][0]
  shard.write_bytes(shard.read_bytes()[::-1])  # its bytes, not its size
  with pytest.raises(
    run_config.DataChanged,
    match=f"{data_dir}: {shard.name} no longer match the SHA-256 its "
    "manifest.json records: the corpus changed after it was built",
  ):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert _files(tmp_path / "run") == before

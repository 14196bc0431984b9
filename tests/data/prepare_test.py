import errno
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import as_from_a_terminal
from wyjax.core import guards, locks
from wyjax.data import pipeline, prepare, worker_pool
from wyjax.data import tokenizer as tk


def _options(shared_data, **kw):
  return prepare.Options(
    **{"source": f"daizhige:{shared_data / 'daizhige_sample'}", "sequence_length": 64, "valid_fraction": 0.2, **kw}
  )


def test_prepare_corpus_manifest_and_sequences(shared_data, tmp_path):
  manifest = prepare.prepare_corpus(tmp_path, _options(shared_data), workers=2, progress=False, log=lambda *_: None)
  assert manifest["documents"]["train"] + manifest["documents"]["valid"] == 12
  assert manifest["raw_characters"] == manifest["characters"] > 100_000
  assert manifest["duplicate_paragraphs"] > 0
  tokenizer = tk.Tokenizer.load(tmp_path / "tokenizer")
  assert manifest["vocab_hash"] == prepare.vocab_hash(tokenizer)
  ds, dtype = pipeline._source(tmp_path, "train")
  rows = np.stack([np.frombuffer(ds[i], dtype) for i in range(len(ds))])
  assert rows.shape == (manifest["sequences"]["train"], 64)
  assert (rows[:, 0] == tokenizer.cls_id).all()
  content = rows[:, 1:].ravel()
  assert (content != tokenizer.pad_id).sum() == manifest["tokens"]["train"]
  assert (content == tokenizer.sep_id).sum() == manifest["documents"]["train"]  # one [SEP] per document


def test_no_sequence_mixes_train_and_validation(shared_data, tmp_path):
  prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=lambda *_: None)
  tokenizer = tk.Tokenizer.load(tmp_path / "tokenizer")
  from wyjax.data import corpus

  reader = corpus.DaizhigeReader(shared_data / "daizhige_sample")
  valid_text = set()
  for unit in reader.units():
    (doc,) = reader.read(unit)
    if corpus.is_validation(doc.id, 0.2):
      valid_text.update(p for p in corpus.clean_paragraphs(doc.paragraphs) if len(p) > 30)
  assert valid_text
  ds, dtype = pipeline._source(tmp_path, "train")
  train_text = "".join(tokenizer.vocab[i] for r in range(len(ds)) for i in np.frombuffer(ds[r], dtype))
  assert not any(p[:30] in train_text for p in valid_text)


def test_prepare_is_idempotent_and_rebuilds_on_change(shared_data, tmp_path):
  messages = []
  first = prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=messages.append)
  second = prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=messages.append)
  assert first == second and "nothing to do" in messages[-1]
  # An interrupted run: its record of the build is there, the manifest not yet; rebuilt, same result.
  (tmp_path / "manifest.json").unlink()
  (tmp_path / prepare.BUILDING).write_text(json.dumps({"fingerprint": first["fingerprint"]}))
  third = prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=messages.append)
  assert {k: v for k, v in third.items() if k not in ("seconds", "characters_per_second", "workers")} == {
    k: v for k, v in first.items() if k not in ("seconds", "characters_per_second", "workers")
  }
  assert not (tmp_path / prepare.BUILDING).exists()
  with pytest.raises(guards.RunError, match="holds a corpus prepared with other options; .* --overwrite"):
    prepare.prepare_corpus(tmp_path, _options(shared_data, sequence_length=128), workers=1, progress=False)
  assert json.loads((tmp_path / "manifest.json").read_text()) == third  # refused: untouched
  longer = prepare.prepare_corpus(
    tmp_path, _options(shared_data, sequence_length=128), workers=1, progress=False, overwrite=True, log=messages.append
  )
  assert longer["sequence_length"] == 128 and json.loads((tmp_path / "manifest.json").read_text()) == longer


def test_reusing_a_vocabulary(shared_data, tmp_path):
  first = prepare.prepare_corpus(tmp_path / "a", _options(shared_data), workers=1, progress=False, log=lambda *_: None)
  second = prepare.prepare_corpus(
    tmp_path / "b",
    _options(shared_data, sequence_length=32),
    vocab_dir=tmp_path / "a" / "tokenizer",
    workers=1,
    progress=False,
    log=lambda *_: None,
  )
  assert second["vocab_hash"] == first["vocab_hash"]


def test_train_batches_are_the_same_for_any_process_count(shared_data, tmp_path):
  prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=lambda *_: None)
  single = iter(pipeline.train_dataset(tmp_path, global_batch_size=8, seed=3))
  halves = [
    iter(pipeline.train_dataset(tmp_path, global_batch_size=8, seed=3, process_index=p, process_count=2))
    for p in range(2)
  ]
  for _ in range(5):
    np.testing.assert_array_equal(next(single), np.concatenate([next(h) for h in halves]))


def test_iterator_state_restores_position(shared_data, tmp_path):
  prepare.prepare_corpus(tmp_path, _options(shared_data), workers=1, progress=False, log=lambda *_: None)
  it = iter(pipeline.train_dataset(tmp_path, global_batch_size=4, seed=0))
  for _ in range(3):
    next(it)
  state = it.get_state()
  expected = [next(it) for _ in range(3)]
  again = iter(pipeline.train_dataset(tmp_path, global_batch_size=4, seed=0))
  again.set_state(state)
  for e in expected:
    np.testing.assert_array_equal(next(again), e)


def _write_texts(texts):
  (texts / "sub").mkdir(parents=True)
  (texts / "a.txt").write_text("學而時習之，不亦說乎？\n\n有朋自遠方來，不亦樂乎？\n" * 3, encoding="utf-8")
  (texts / "sub" / "b.txt").write_text("\u3000\u3000人不知而不慍，不亦君子乎？\n", encoding="utf-8")
  return texts


def test_plain_text_corpus(tmp_path):
  texts = _write_texts(tmp_path / "texts")
  manifest = prepare.prepare_corpus(
    tmp_path / "out",
    prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.0),
    workers=1,
    progress=False,
    log=lambda *_: None,
  )
  assert manifest["documents"]["train"] == 2 and manifest["duplicate_paragraphs"] == 4
  tokenizer = tk.Tokenizer.load(tmp_path / "out" / "tokenizer")
  assert "学" in tokenizer.token_to_id and "學" not in tokenizer.token_to_id  # t2s by default
  assert (
    manifest["tokens"]["train"] == len("学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？") + 2
  )


def test_a_lower_casing_vocabulary_prepares_a_lower_cased_corpus(tmp_path):
  """A published vocabulary that lower-cases (a tokenizer_config without do_lower_case, as
  RoBERTa-wwm-ext's) gives the corpus its casing: "Tang" reads as "tang", as its model read text,
  and extending the vocabulary appends no upper-case letter."""
  texts = tmp_path / "texts"
  texts.mkdir()
  (texts / "a.txt").write_text("Tang 唐 TANG tang\n", encoding="utf-8")
  vocab = tmp_path / "vocab"
  vocab.mkdir()
  (vocab / "vocab.txt").write_text(
    "".join(t + "\n" for t in [*tk.SPECIAL_TOKENS, "唐", "t", "##a", "##n", "##g"]), encoding="utf-8"
  )
  (vocab / "tokenizer_config.json").write_text('{"init_inputs": []}')
  for extend in (False, True):
    out = tmp_path / f"out_{extend}"
    options = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.0, extend_vocab=extend)
    manifest = prepare.prepare_corpus(out, options, vocab_dir=vocab, workers=1, progress=False, log=lambda *_: None)
    tokenizer = tk.Tokenizer.load(out / "tokenizer")
    # t ##a ##n ##g thrice, 唐, [SEP]; read as cased, "Tang" and "TANG" were [UNK]
    assert manifest["unk_tokens"] == 0 and manifest["tokens"]["train"] == 3 * 4 + 1 + 1
    assert tokenizer.lowercase and not any(t.isupper() for t in tokenizer.vocab[len(tk.SPECIAL_TOKENS) :])
  assert tokenizer.vocab[:9] == [*tk.SPECIAL_TOKENS, "唐", "t", "##a", "##n"] and len(tokenizer) == 14


def test_prepare_corpus_command(tmp_path):
  """`python -m wyjax.data prepare-corpus` hands every flag to prepare_corpus."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source=text:{texts}",
      f"--out={out}",
      "--sequence_length=16",
      "--valid_fraction=0",
      "--no_t2s",
      "--char_filter=no_ascii_alnum",
      "--min_count=2",
      "--max_vocab=20",
      "--shard_sequences=2",
      "--workers=1",
    ],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr
  manifest = json.loads((out / "manifest.json").read_text())
  assert manifest["options"] == {
    "source": f"text:{texts}",
    "sequence_length": 16,
    "valid_fraction": 0.0,
    "t2s": False,
    "char_filter": "no_ascii_alnum",
    "min_count": 2,
    "max_vocab": 20,
    "shard_sequences": 2,
    "extend_vocab": False,
  }
  assert manifest["workers"] == 1 and len(manifest["shards"]["train"]) > 1


def test_prepare_corpus_command_refuses_bad_usage(tmp_path):
  out = tmp_path / "out"
  common = ["--source=poetry", f"--out={out}"]
  for args, message in (
    (["bogus", *common], "expected one command (prepare-corpus), got: bogus"),
    (["prepare-corpus", *common, "--daizhige=DIR"], "Unknown command line flag 'daizhige'"),
    (["prepare-corpus", "--source=poetry"], "prepare-corpus needs --source and --out"),
  ):
    result = subprocess.run([sys.executable, "-m", "wyjax.data", *args], capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
  assert not out.exists()


@pytest.mark.parametrize("source", ["text", "daizhige"])
def test_a_bad_file_ends_the_command_in_one_line_with_the_default_workers(tmp_path, source):
  """A worker's error reaches the main process whole: one line, in seconds (it hung for ever)."""
  bad = tmp_path / "corpus" / ("史藏/正史" if source == "daizhige" else "") / "gbk.txt"
  bad.parent.mkdir(parents=True)
  bad.write_bytes("國家".encode("gbk"))
  assert os.cpu_count() > 1  # the default: a worker per core
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source={source}:{tmp_path / 'corpus'}",
      f"--out={tmp_path / 'out'}",
    ],
    capture_output=True,
    text=True,
    timeout=90,
  )
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
  assert result.stderr.splitlines() == [f"wyjax: error: {bad}:1: not valid UTF-8 (invalid start byte at byte 0)"]


def test_a_full_disk_is_one_line_and_leaves_no_partial_shard(shared_data, tmp_path):
  """A full disk is simulated by a file-size limit (`ulimit -f`, RLIMIT_FSIZE: a write beyond it
  fails with EFBIG as ENOSPC does): ArrayRecord's writer failed with a 20-line traceback and
  left its partial shard."""
  out = tmp_path / "out"
  result = subprocess.run(
    [
      "bash",
      "-c",
      'ulimit -f 200 && exec "$@"',
      "bash",
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source=daizhige:{shared_data / 'daizhige_sample'}",
      f"--out={out}",
      "--sequence_length=64",
      "--workers=1",
    ],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
  assert result.stderr.splitlines()[-1] == (
    f"wyjax: error: {out}: File too large while writing the corpus's shards; "
    "free space there and rerun (the shards written so far were removed)"
  )
  assert not list(out.glob("*.array_record")) and not (out / "manifest.json").exists()


STALLED = pathlib.Path(__file__).with_name("stalled_prepare.py")


def _stalled(texts, out, *args):
  """prepare-corpus of `texts` into `out` with the default workers (one per core), started as a
  terminal starts it, in its own process group, once a worker waits inside slow.txt (on the FIFO
  beside it: stalled_prepare); returns (the process, the FIFO's write end, held open)."""
  (texts / "slow.txt").write_text("")  # no text: the corpus's documents are the others
  fifo = texts / "slow.fifo"
  os.mkfifo(fifo)
  assert os.cpu_count() > 1
  process = subprocess.Popen(
    as_from_a_terminal(
      [sys.executable, str(STALLED), "prepare-corpus", f"--source=text:{texts}", f"--out={out}", *args]
    ),
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
  )
  deadline = time.monotonic() + 120
  while True:  # until a worker has the FIFO open to read it
    try:
      return process, os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
      assert e.errno == errno.ENXIO and process.poll() is None and time.monotonic() < deadline, e
      time.sleep(0.05)


def _children(pid: int) -> list[int]:
  """The processes whose parent is `pid` (from /proc)."""
  out = []
  for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
    try:
      fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:  # ended meanwhile
      continue
    if int(fields[1]) == pid:
      out.append(int(stat.parent.name))
  return out


def _running(pid: int) -> bool:
  try:
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def test_ctrl_c_with_the_default_workers_ends_in_one_line_and_the_rerun_builds(tmp_path):
  """Ctrl-C (SIGINT to the process group, as a terminal sends it) while a worker is inside a unit:
  one line, exit 130, in seconds; the workers are ended (the pool waited for the unit to finish:
  a long file, or a pipe that stays open, for ever); the rerun builds the corpus."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  process, writer = _stalled(texts, out, "--sequence_length=16", "--valid_fraction=0.2")
  try:
    os.killpg(process.pid, signal.SIGINT)
    stderr = process.communicate(timeout=30)[1]
  finally:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
  assert process.returncode == 130 and stderr.splitlines() == ["wyjax: stopped by SIGINT (Ctrl-C)"], stderr
  with pytest.raises(BrokenPipeError):  # no worker reads it any more
    os.write(writer, "學".encode())
  os.close(writer)
  rerun = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source=text:{texts}",
      f"--out={out}",
      "--sequence_length=16",
      "--valid_fraction=0.2",
      "--workers=1",
    ],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert rerun.returncode == 0 and json.loads((out / "manifest.json").read_text())["documents"] == {
    "train": 1,
    "valid": 1,
  }, rerun.stderr


def test_sigkill_of_prepare_corpus_leaves_no_worker_alive(tmp_path):
  """SIGKILL (what the out-of-memory killer sends) to prepare-corpus while a worker reads a pipe
  and another waits for work: both end within seconds (they lived on with parent 1, blocked on
  their pipes, 80 s later and on), and the multiprocessing helper with them."""
  process, writer = _stalled(_write_texts(tmp_path / "texts"), tmp_path / "out")
  children = _children(process.pid)
  try:
    assert len(children) >= 2, children  # the workers (one per core), and multiprocessing's resource tracker
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while (alive := [pid for pid in children if _running(pid)]) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert alive == [], [pathlib.Path(f"/proc/{pid}/cmdline").read_bytes() for pid in alive]
  finally:
    for pid in children:
      if _running(pid):
        os.kill(pid, signal.SIGKILL)
    os.close(writer)


def test_two_commands_never_write_one_corpus_at_once(tmp_path):
  """A second prepare-corpus into an --out another is writing is refused in one line naming the
  first (its process id and host), and leaves the folder as it was (two at once left a manifest
  of sequences of 512 over shards of 256, exit 0 both). Once the first is killed, its lock is
  taken over: the second builds a corpus whose manifest matches its shards."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  first, writer = _stalled(texts, out, "--sequence_length=32")
  second = [
    sys.executable,
    "-m",
    "wyjax.data",
    "prepare-corpus",
    f"--source=text:{texts}",
    f"--out={out}",
    "--sequence_length=16",
    "--valid_fraction=0",
    "--workers=1",
  ]
  try:
    before = sorted((p.name, p.stat().st_size) for p in out.iterdir())
    refused = subprocess.run(second, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stderr.splitlines() == [
      f"wyjax: error: {out} is being written by prepare-corpus (process {first.pid} on {socket.gethostname()}, "
      f"since {json.loads((out / locks.LOCK).read_text())['since']}); wait until it ends, or choose another "
      "folder"
    ], refused.stderr
    assert sorted((p.name, p.stat().st_size) for p in out.iterdir()) == before
  finally:
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    os.close(writer)
  assert (out / locks.LOCK).exists()  # left by the killed command
  rebuilt = subprocess.run(second, capture_output=True, text=True, timeout=120)
  assert rebuilt.returncode == 0, rebuilt.stderr
  manifest = json.loads((out / "manifest.json").read_text())
  ds, dtype = pipeline._source(out, "train")
  assert manifest["sequence_length"] == 16 and len(ds) == manifest["sequences"]["train"] > 0
  assert {len(np.frombuffer(ds[i], dtype)) for i in range(len(ds))} == {16}
  assert not (out / locks.LOCK).exists()


def test_special_files_are_skipped_and_counted_never_opened(tmp_path):
  """A FIFO (it hung prepare-corpus, silent), a socket and a link to a device among a corpus's
  .txt files: skipped, named in the output and the manifest, never opened (the FIFO has no
  writer: opening it would wait for ever)."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  os.mkfifo(texts / "fifo.txt")
  with socket.socket(socket.AF_UNIX) as server:
    server.bind(str(texts / "sub" / "socket.txt"))
    (texts / "zero.txt").symlink_to("/dev/zero")
    result = subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.data",
        "prepare-corpus",
        f"--source=text:{texts}",
        f"--out={out}",
        "--sequence_length=16",
        "--valid_fraction=0",
        "--workers=1",
      ],
      capture_output=True,
      text=True,
      timeout=120,
    )
  assert result.returncode == 0, result.stderr
  assert (
    f"text:{texts}: skipped 3 special files (FIFOs, devices, sockets: never opened), e.g. fifo.txt" in result.stdout
  )
  manifest = json.loads((out / "manifest.json").read_text())
  assert manifest["skipped_special_files"] == ["fifo.txt", "sub/socket.txt", "zero.txt"]
  assert manifest["documents"]["train"] == 2
  with pytest.raises(ValueError, match="is neither a file nor a folder"):
    prepare.prepare_corpus(tmp_path / "out2", prepare.Options(source=f"text:{texts / 'fifo.txt'}"), workers=1)


def test_a_worker_that_dies_ends_the_run():
  """multiprocessing.Pool waits for ever on a task whose worker died; the pool here raises."""
  with worker_pool.processes(2, int, ()) as pool:
    with pytest.raises(guards.RunError, match="reading: A process in the process pool was terminated abruptly"):
      list(worker_pool.ordered_map(pool, os._exit, [1, 2], False, "reading"))


def test_prepare_never_deletes_what_it_did_not_make(tmp_path):
  """A folder of the user's files is refused, and kept whole even with --overwrite."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  options = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.0)
  with pytest.raises(guards.RunError, match="holds files that are not this corpus"):
    prepare.prepare_corpus(out, options, workers=1, progress=False, log=lambda *_: None)
  assert [p.name for p in out.iterdir()] == ["notes.txt"]
  prepare.prepare_corpus(out, options, workers=1, progress=False, overwrite=True, log=lambda *_: None)
  assert (out / "notes.txt").read_text() == "mine" and (out / "manifest.json").exists()
  with pytest.raises(guards.RunError, match="is a file, not a folder"):
    prepare.prepare_corpus(out / "notes.txt", options, workers=1, progress=False)


def test_no_validation_sequences_is_an_error_and_the_rerun_with_other_options_works(tmp_path):
  """Pretraining evaluates on the validation split: an empty one is refused here, not when
  pretraining starts, and leaves nothing; a folder that holds something else is refused."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"  # two documents, at fractions 0.38 and 0.15
  few = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.1)
  with pytest.raises(guards.RunError, match=r"no validation sequences: none of its 2 documents .*\(valid_fraction 0.1"):
    prepare.prepare_corpus(out, few, workers=1, progress=False, log=lambda *_: None)
  assert not out.exists()
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  more = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0.2)
  with pytest.raises(guards.RunError, match="holds files that are not this corpus"):
    prepare.prepare_corpus(out, more, workers=1, progress=False)
  (out / "notes.txt").unlink()
  manifest = prepare.prepare_corpus(out, more, workers=1, progress=False, log=lambda *_: None)
  assert manifest["documents"] == {"train": 1, "valid": 1} and manifest["sequences"]["valid"] == 1


@pytest.mark.parametrize(
  "change, message",
  [
    ({"sequence_length": 0}, "at least 8 tokens"),
    ({"valid_fraction": 2.0}, r"a fraction in \[0, 1\)"),
    ({"min_count": 0}, "min_count is 0; allowed: an integer ≥ 1"),
  ],
)
def test_options_are_checked(change, message):
  with pytest.raises(ValueError, match=message):
    prepare.Options(source="text:x", **change)


def test_a_corpus_without_characters_is_an_error(tmp_path):
  (tmp_path / "texts").mkdir()
  (tmp_path / "texts" / "empty.txt").write_text("\n \n")
  with pytest.raises(guards.RunError, match="no text to train on .0 characters read"):
    prepare.prepare_corpus(
      tmp_path / "out",
      prepare.Options(source=f"text:{tmp_path / 'texts'}"),
      workers=1,
      progress=False,
      log=lambda *_: None,
    )
  assert not (tmp_path / "out" / "manifest.json").exists()


# --- provenance by content, a corpus inside its source, a read-only disk --------------------------------


def _prepare_command(source, out, *flags, wrap=(), cwd=None):
  return subprocess.run(
    [
      *wrap,
      sys.executable,
      "-m",
      "wyjax.data",
      "prepare-corpus",
      f"--source={source}",
      f"--out={out}",
      "--sequence_length=16",
      "--valid_fraction=0",
      "--workers=1",
      *flags,
    ],
    capture_output=True,
    text=True,
    cwd=cwd,
  )


def test_a_change_of_the_source_text_is_seen_even_with_the_same_options(tmp_path):
  """The fingerprint covered the options only: after a source file changed, the same command
  (even with --overwrite) said "already prepared; nothing to do". It covers each file's content:
  refused without --overwrite, rebuilt with it. A source spelled otherwise (a trailing slash, a
  relative path) or copied elsewhere is the same source."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  first = _prepare_command(f"text:{texts}", out)
  assert first.returncode == 0, first.stderr
  built = json.loads((out / "manifest.json").read_text())
  shutil.copytree(texts, tmp_path / "copy")
  for source, cwd in ((f"text:{texts}/", None), ("text:texts", tmp_path), (f"text:{tmp_path / 'copy'}", None)):
    again = _prepare_command(source, out, cwd=cwd)
    assert again.returncode == 0 and "nothing to do" in again.stderr + again.stdout, (source, again.stderr)
  (texts / "sub" / "b.txt").write_text("\u3000\u3000人不知而不慍，不亦君子乎？\n溫故而知新\n", encoding="utf-8")
  refused = _prepare_command(f"text:{texts}", out)
  assert refused.returncode == 1 and refused.stderr.splitlines()[-1] == (
    f"wyjax: error: --out {out} holds a corpus prepared from other text (the source's files changed since); choose "
    "an empty or new folder, or pass --overwrite to replace the corpus files there"
  ), refused.stderr
  assert json.loads((out / "manifest.json").read_text()) == built
  rebuilt = _prepare_command(f"text:{texts}", out, "--overwrite")
  assert rebuilt.returncode == 0 and "nothing to do" not in rebuilt.stderr + rebuilt.stdout, rebuilt.stderr
  manifest = json.loads((out / "manifest.json").read_text())
  assert manifest["source_sha256"] != built["source_sha256"] and manifest["tokens"]["train"] == built["tokens"][
    "train"
  ] + len("温故而知新")


def test_an_out_in_its_own_source_is_refused_and_a_corpus_inside_a_source_never_read_as_text(tmp_path):
  """A corpus --out inside its own text: folder was left out only by the build that wrote it: the
  next build from that folder into another --out read its tokenizer/vocab.txt as a document. An
  --out that is the source called the user's texts "files of --out", ended in "no text to train
  on" and left a tokenizer/vocab.txt among them. Both are refused before anything is written,
  --overwrite or not; a corpus (or a model's tokenizer) found inside a source is never its text."""
  texts = _write_texts(tmp_path / "texts")
  options = prepare.Options(source=f"text:{texts}", sequence_length=16, valid_fraction=0)
  for out, where in ((texts / "corpus", "lies inside"), (texts, "is")):
    with pytest.raises(
      guards.RunError,
      match=re.escape(
        f"--out {out} {where} --source {texts}, which prepare-corpus reads; writing there would change what it reads: "
        "choose another --out"
      ),
    ):
      prepare.prepare_corpus(out, options, workers=1, progress=False, overwrite=True)
  assert sorted(p.relative_to(texts).as_posix() for p in texts.rglob("*")) == ["a.txt", "sub", "sub/b.txt"]
  alone = prepare.prepare_corpus(tmp_path / "alone", options, workers=1, progress=False, log=lambda *_: None)
  shutil.copytree(tmp_path / "alone", texts / "corpus")  # a corpus inside a source (copied, or built before)
  messages = []
  again = prepare.prepare_corpus(tmp_path / "again", options, workers=1, progress=False, log=messages.append)
  assert again["documents"]["train"] == 2 and again["fingerprint"] == alone["fingerprint"]  # the same text
  assert messages[0] == (
    f"text:{texts}: left out 1 tokenizer vocabularies (a prepared corpus's or a model's: no "
    "text), e.g. corpus/tokenizer/vocab.txt"
  )


def test_a_finished_corpus_on_a_read_only_disk_is_found_again(tmp_path):
  """The same command again over a finished corpus on a read-only disk failed on its lock
  ("…/.wyjax.lock: Read-only file system"): a corpus that needs no writing is read without it.
  One that would need building is still refused there, naming the lock. The disk is a read-only
  bind mount in a user and mount namespace (`unshare`), as a user without privileges makes one."""
  texts, out = _write_texts(tmp_path / "texts"), tmp_path / "out"
  assert _prepare_command(f"text:{texts}", out).returncode == 0
  read_only = [
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "sh",
    "-c",
    f'mount --bind -o ro "{out}" "{out}" && exec "$@"',
    "sh",
  ]
  if subprocess.run([*read_only, "true"], capture_output=True).returncode != 0:
    pytest.skip("this kernel lets no user make a mount namespace (unshare)")
  again = _prepare_command(f"text:{texts}", out, wrap=read_only)
  assert again.returncode == 0 and "nothing to do" in again.stderr + again.stdout, again.stderr
  other = _prepare_command(f"text:{texts}", out, "--min_count=2", "--overwrite", wrap=read_only)
  assert (
    other.returncode == 1
    and other.stderr.splitlines()[-1] == f"wyjax: error: {out / locks.LOCK}: Read-only file system"
  ), other.stderr

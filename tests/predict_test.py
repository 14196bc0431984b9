"""`wyjax.predict` on real dev texts of four fine-tuned runs (PUNC from the Daizhige sample,
C-CLUE NER, TLC, CMRC 2018): its outputs score exactly the run's recorded dev score, equal the
transformers model (pipeline) on the run's export, and a 200,000-character text is punctuated
whole, every character kept in order. It never writes over its input, leaves no half-written
output (full disk, Ctrl-C), keeps lines and grapheme clusters whole, and refuses damaged or
non-finite weights and a copied run without its seeds in one line."""

import concurrent.futures
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import unicodedata

import flax.linen as nn
import jax
import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file, save_file

from tests.conftest import as_from_a_terminal
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.data import tokenizer as tk
from wyjax.hf import task_models
from wyjax.models import EncoderConfig
from wyjax.tasks import clue_reading, punctuation, spans, wyweb_files
from wyjax.tasks.builders import punc
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, inference, suite, task_model

SMALL = dict(
  num_train_steps=30, eval_every=30, batch_size=16, eval_batch_size=32, learning_rate=1e-3, length_buckets=1
)  # one train step to compile per run
# C-CLUE NER's seven tags need longer: at 30 steps a fresh model may still tag everything O.
# CMRC 2018's 18 train questions are an epoch of one step, and a run evaluates and checkpoints at
# each epoch's end: 4 steps (its exact answers are rare at 30 too), not 30 evaluations.
PER_TASK = {"cclue_ner": dict(num_train_steps=60, eval_every=60), "cmrc2018": dict(num_train_steps=4, eval_every=4)}


def _punc_data(shared_data, out):
  """PUNC built from the Daizhige sample's history books, paragraphs of ≤ 62 characters (one
  window of max_length 64); dev: the first 60 test paragraphs."""
  built = out / "built"
  punc.build_punc(shared_data / "daizhige_sample", built, dev_fraction=0.3, test_fraction=0.3)
  for split, source, rows in (("train", "train", 400), ("dev", "test", 60)):
    lines = [
      line
      for line in (built / f"{source}.tsv").read_text(encoding="utf-8").splitlines()
      if len(line.split("\t")[0]) <= 62
    ]
    (out / f"{split}.tsv").write_text("\n".join(lines[:rows]) + "\n", encoding="utf-8")
  return out


def _ner_data(shared_data, out):
  """300 train sentences; dev: the first 60 of ≤ 62 characters (one window of max_length 64)."""
  out.mkdir()
  for split, rows in (("train", 300), ("dev", 60)):
    read = lambda suffix: (shared_data / "cclue" / "ner" / f"{split}{suffix}").read_text(encoding="utf-8").splitlines()
    pairs = [
      (text, tags)
      for text, tags in zip(read(".txt"), read("-label.txt"))
      if split == "train" or len(text.split()) <= 62
    ][:rows]
    for suffix, lines in zip((".txt", "-label.txt"), zip(*pairs)):
      (out / f"{split}{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
  return out


def _tlc_data(shared_data, out):
  out.mkdir()
  lines = (shared_data / "wyweb" / "tlc" / "train.tsv").read_bytes().split(b"\n")
  (out / "train.tsv").write_bytes(b"\n".join(lines[:400]))
  (out / "dev.tsv").write_bytes(b"\n".join(lines[400:460]))
  return out


def _cmrc_data(shared_data, out):
  out.mkdir()
  for split, documents in (("train", 4), ("dev", 1)):
    squad = json.loads((shared_data / "clue" / "cmrc2018" / f"cmrc2018_{split}.json").read_text(encoding="utf-8"))
    squad["data"] = squad["data"][:documents]
    (out / f"cmrc2018_{split}.json").write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
  return out


DATA = {"punc": _punc_data, "cclue_ner": _ner_data, "tlc": _tlc_data, "cmrc2018": _cmrc_data}
MAX_LENGTH = 64  # short programs to compile


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory):
  """{task: (fine-tuning workdir, its results, dev examples)}: fresh tiny models, 30 steps each (NER 60, CMRC 4)."""
  root = tmp_path_factory.mktemp("predict")
  out = {}
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))
    for name, write in DATA.items():
      data_dir = write(shared_data, root / f"{name}_data")
      config = suite.task_config(name, data_dir=str(data_dir), max_length=MAX_LENGTH, **SMALL | PER_TASK.get(name, {}))
      results = finetuning.finetune(config, root / name)
      out[name] = root / name, results, TASKS[name].files.read_split(data_dir, "dev")
  return out


def _input_line(name, example) -> str:
  if name == "punc":  # the gold punctuation put back: wyjax.predict removes it first
    return "".join(c + (t[2:] if t != "O" else "") for c, t in zip(example.text, example.labels))
  if name == "cmrc2018":
    return json.dumps({"context": example.context, "question": example.question}, ensure_ascii=False)
  return example.text


def _prediction(name, example, output: str):
  """The task's prediction, read back from wyjax.predict's output line."""
  if name == "punc":  # the mark after each character
    marks = wyweb_files.PUNC_MARKS
    return [
      f"S-{output[i + 1]}" if output[i + 1 : i + 2] in marks and output[i + 1 : i + 2] else "O"
      for i, c in enumerate(output)
      if c not in marks
    ]
  record = json.loads(output)
  return {
    "cclue_ner": lambda: tuple(record["tags"].split()),
    "tlc": lambda: (record["period"], record["dynasty"]),
    "cmrc2018": lambda: record["answer"],
  }[name]()


@pytest.mark.parametrize("name", list(DATA))
def test_predict_on_the_dev_texts_scores_the_runs_dev_score(runs, name, tmp_path):
  workdir, results, dev = runs[name]
  lines = [_input_line(name, e) for e in dev]
  if name == "punc":  # through the command line, as a user runs it
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.predict",
        f"--model={workdir}",
        f"--input={tmp_path / 'in.txt'}",
        f"--output={tmp_path / 'out.txt'}",
      ],
      cwd=REPO_ROOT,
      env=pretrain_env(),
      capture_output=True,
      text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
  else:
    outputs = list(inference.Predictor(task_models.load(workdir)).outputs(lines))
  assert len(outputs) == len(dev)
  predictions = [_prediction(name, e, o) for e, o in zip(dev, outputs)]
  scores = TASKS[name].score(dev, predictions)
  main = TASKS[name].main_metric
  assert scores[main] == pytest.approx(results["dev"][main], abs=1e-12), (scores, results["dev"])
  assert 0 < results["dev"][main] or name == "cmrc2018"  # (CMRC 2018's 4 steps rarely give an exact answer)


def _pipeline(kind, folder):
  return transformers.pipeline(kind, model=str(folder), tokenizer=str(folder), device="cpu")


@pytest.mark.parametrize("name", list(DATA))
def test_the_export_answers_as_wyjax_predict_does(runs, name, tmp_path):
  workdir, _, dev = runs[name]
  model = task_models.load(workdir)
  folder = task_models.export(model, tmp_path / "hf")
  exported = task_models.load(folder)
  dev = dev[:24]
  ours = list(inference.Predictor(exported).outputs([_input_line(name, e) for e in dev]))
  assert ours == list(inference.Predictor(model).outputs([_input_line(name, e) for e in dev]))
  simplify = model.tokenizer.normalize  # the card's advice: transformers' tokenizer does not simplify
  if name in ("punc", "cclue_ner"):
    tagger = _pipeline("token-classification", folder)
    for example, output in zip(dev, ours):
      text = example.text
      theirs = ["O"] * len(text)
      for token in tagger(simplify(text)):
        theirs[token["start"]] = token["entity"]
      expected = _prediction(name, example, output) if name == "punc" else list(json.loads(output)["tags"].split())
      assert theirs == list(expected), text
  elif name == "tlc":
    classifier = _pipeline("text-classification", folder)
    for example, output in zip(dev, ours):
      record = json.loads(output)
      theirs = {
        r["label"]: r["score"]
        for r in classifier(simplify(example.text), top_k=None, truncation=True, max_length=MAX_LENGTH)
      }
      assert max(theirs, key=theirs.get) == record["dynasty"]
      for label, p in record["probabilities"].items():
        assert theirs[label] == pytest.approx(p, abs=1e-5)
  else:  # CMRC 2018: transformers' QA model on wyjax's windows, decoded by the task
    hf_model = transformers.AutoModelForQuestionAnswering.from_pretrained(str(folder)).eval()
    task = TASKS[name]
    for example, output in zip(dev, ours):
      features, _ = task.featurize(example, model.tokenizer, model.max_length)
      ids = torch.tensor(features["input_ids"])
      with torch.no_grad():
        out = hf_model(
          input_ids=ids,
          attention_mask=(ids != model.tokenizer.pad_id).long(),
          token_type_ids=torch.tensor(features["token_type_ids"]),
        )
      logits = np.stack([out.start_logits.numpy(), out.end_logits.numpy()], axis=1)
      logits = np.where(features["input_ids"][:, None, :] != model.tokenizer.pad_id, logits, -1e9)
      span, _ = spans.best_span(features, logits, max_answer_length=clue_reading.MAX_ANSWER_TOKENS)
      assert json.loads(output)["answer"] == ("" if span is None else example.context[span[0] : span[1]])


def test_a_200000_character_text_is_punctuated_whole(runs, shared_data):
  """Real unpunctuated text, one line: every character comes back in order, with nothing but
  punctuation marks between."""
  workdir, _, _ = runs["punc"]
  text = _unpunctuated(shared_data, 200_000)
  predictor = inference.Predictor(task_models.load(workdir), batch_size=64)
  (output,) = predictor.outputs([text])
  assert "".join(c for c in output if c not in wyweb_files.PUNC_MARKS) == text
  assert len(output) > len(text)  # and it did punctuate


def _unpunctuated(shared_data, characters: int) -> str:
  books = sorted((shared_data / "daizhige_sample").rglob("*.txt"))
  text = "".join(
    c
    for book in books
    for c in book.read_text(encoding="utf-8")
    if not c.isspace() and not unicodedata.category(c).startswith("P")
  )
  return (text * (characters // len(text) + 1))[:characters]


def _random_punc_model(text: str, max_length: int) -> task_models.FineTuned:
  """PUNC on the fresh tiny model (fine-tuning's default architecture), random weights: as a
  trained model of its size computes and allocates, without the training."""
  tokenizer = tk.Tokenizer(tk.build_vocab([text]))
  config = EncoderConfig(**task_model.FRESH_TINY_MODEL, vocab_size=len(tokenizer))
  task = TASKS["punc"]
  head = task_models.HEADS[task.head].build(config, len(task.labels))
  params = nn.unbox(head.init(jax.random.key(0), np.ones((1, 8), np.int32))["params"])
  return task_models.FineTuned(task, config, jax.device_get(params), tokenizer, max_length=max_length)


def _peak_bytes(command: list[str]) -> int:
  """The largest resident memory of `command`, run to its end (exit 0) as the one child of a
  process that then reports its children's peak (kilobytes on Linux)."""
  peak = (
    "import resource, subprocess, sys\nsubprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
  )
  result = subprocess.run(
    [sys.executable, "-c", peak, *command], cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True
  )
  assert result.returncode == 0, result.stderr[-2000:]
  return int(result.stdout) * 1024


def test_memory_is_bounded_by_the_window_not_by_the_length_of_a_line(shared_data, tmp_path):
  """A 2 MB line with no newline took 6.1 GB at 512 tokens a window (1.6 GB now). Each step's
  scratch went to the one arena that wyjax's CPU allocator keeps (host_memory) and was not reused
  by the next step amid predict's own work between steps: about half a step's scratch more with
  every batch, for a file of short lines too. A 20,000-character line (three batches of 512-token
  windows) took 1.2 GB more than one batch of one-window lines; it now takes at most 300 MB more."""
  text = _unpunctuated(shared_data, 20_000)
  folder = task_models.export(_random_punc_model(text, max_length=512), tmp_path / "punc")
  peaks = {}
  one_batch = "\n".join(text[i : i + 500] for i in range(0, 32 * 500, 500))  # predict's --batch_size: 32
  for name, lines in (("one batch", one_batch), ("three batches", text)):
    (tmp_path / "in.txt").write_text(lines + "\n", encoding="utf-8")
    peaks[name] = _peak_bytes(
      [
        sys.executable,
        "-m",
        "wyjax.predict",
        f"--model={folder}",
        f"--input={tmp_path / 'in.txt'}",
        f"--output={tmp_path / name}",
      ]
    )
  assert peaks["three batches"] - peaks["one batch"] < 300 << 20, peaks


def test_a_long_texts_windows_are_predicted_a_chunk_at_a_time(shared_data, monkeypatch):
  """A long line's windows were all cut, featurized and predicted at once (their features and
  logits held together: gigabytes for megabytes of text); they are cut and predicted a chunk's
  worth of tokens at a time, stitched as they come, with the same output."""
  text = _unpunctuated(shared_data, 20_000)
  predictor = inference.Predictor(_random_punc_model(text, max_length=64))
  (whole,) = predictor.outputs([text])
  predicted = []
  predict = predictor._model.predict
  monkeypatch.setattr(
    predictor._model,
    "predict",
    lambda params, features: predicted.append(sum(f["input_ids"].size for f in features)) or predict(params, features),
  )
  monkeypatch.setattr(inference, "CHUNK_CHARACTERS", 4096)
  assert list(predictor.outputs([text])) == [whole]
  assert len(predicted) > 5 and max(predicted) < 4096 + 64, predicted


def test_a_bad_line_is_one_error_line_or_skipped_and_counted(runs, tmp_path):
  workdir, _, _ = runs["tlc"]
  (tmp_path / "in.txt").write_text('子曰學而時習之\n{"text": ["學"]}\n有朋自遠方來\n', encoding="utf-8")
  command = [
    sys.executable,
    "-m",
    "wyjax.predict",
    f"--model={workdir}",
    f"--input={tmp_path / 'in.txt'}",
    f"--output={tmp_path / 'out.jsonl'}",
  ]
  failed = subprocess.run(command, cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True)
  assert failed.returncode != 0 and "Traceback" not in failed.stderr
  assert f"wyjax: error: {tmp_path / 'in.txt'}:2: \"text\" must be a string" in failed.stderr
  skipped = subprocess.run(
    command + ["--skip_bad_lines", "--overwrite"], cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True
  )
  assert skipped.returncode == 0, skipped.stderr[-2000:]
  first, bad, last = (tmp_path / "out.jsonl").read_text(encoding="utf-8").split("\n")[:3]
  assert bad == "" and json.loads(first)["dynasty"] and json.loads(last)["dynasty"]
  assert "1 bad line(s) of 3 left empty" in skipped.stderr
  refused = subprocess.run(command, cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True)
  assert refused.returncode != 0 and "exists; choose another --output or pass --overwrite" in refused.stderr


def test_a_batch_larger_than_the_input_is_the_input(runs, tmp_path):
  """--batch_size=1000000000 (killed at 22.6 GB: a billion rows of padding) predicts three lines
  in one batch of at most four (TaskModel.eval_batch_size), within a few GB."""
  workdir, _, _ = runs["tlc"]
  (tmp_path / "in.txt").write_text("子曰學而時習之\n有朋自遠方來\n人不知而不慍\n", encoding="utf-8")
  measured = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
  )
  result = subprocess.run(
    [
      sys.executable,
      "-c",
      measured,
      sys.executable,
      "-m",
      "wyjax.predict",
      f"--model={workdir}",
      f"--input={tmp_path / 'in.txt'}",
      f"--output={tmp_path / 'out.jsonl'}",
      "--batch_size=1000000000",
    ],
    cwd=REPO_ROOT,
    env=pretrain_env(),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert len((tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 3
  assert int(result.stderr.splitlines()[-1]) < 3 << 20  # KB


# --- what predict never does: destroy its input, leave half an output, split a line or a character ---


def _predict(workdir, *flags, file_size_kb: int | None = None, **popen):
  """wyjax.predict on the run as a user starts it; the cache (its log) is the test's own."""
  command = [sys.executable, "-m", "wyjax.predict", f"--model={workdir}", *flags]
  if file_size_kb:  # the shell's limit on the size of any file the command writes (RLIMIT_FSIZE)
    command = ["bash", "-c", f'ulimit -f {file_size_kb} && exec "$@"', "bash", *command]
  env = pretrain_env(WYJAX_CACHE=str(popen.pop("cache")))
  if popen.pop("background", False):  # to be interrupted
    return subprocess.Popen(
      as_from_a_terminal(command), cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True, **popen
    )
  return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, **popen)


def _left_over(folder, name):
  return sorted(p.name for p in folder.iterdir() if p.name.startswith((name, f".{name}")))


def test_predict_never_writes_over_its_input_even_with_overwrite(runs, tmp_path):
  """The same path, a symbolic link to it and a hard link (another name, the same inode): refused."""
  workdir, _, _ = runs["punc"]
  book = tmp_path / "book.txt"
  book.write_text("子曰學而時習之\n", encoding="utf-8")
  (tmp_path / "link.txt").symlink_to(book)
  (tmp_path / "hard.txt").hardlink_to(book)
  outputs = [book, tmp_path / "link.txt", tmp_path / "hard.txt"]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = pool.map(
      lambda out: _predict(workdir, f"--input={book}", f"--output={out}", "--overwrite", cache=tmp_path / "cache"),
      outputs,
    )
    for out, result in zip(outputs, results):
      assert result.returncode == 1 and result.stderr.splitlines()[-1] == (
        f"wyjax: error: --output {out} is the input file {book}; writing it would destroy the input "
        "(--overwrite never does): choose another --output"
      ), result.stderr[-2000:]
  assert book.read_text(encoding="utf-8") == "子曰學而時習之\n"


def test_standard_input_or_output_that_is_the_input_or_output_file_is_refused(runs, tmp_path):
  """`--output=in.txt --overwrite < in.txt` replaced in.txt with its predictions, exit 0: the
  same-file check looked at --input alone. Standard output appended to the input file (`>> in.txt`)
  is the same case."""
  workdir, _, _ = runs["punc"]
  book = tmp_path / "in.txt"
  book.write_text("子曰學而時習之\n", encoding="utf-8")
  with book.open("rb") as stdin:
    into_stdin = _predict(workdir, f"--output={book}", "--overwrite", stdin=stdin, cache=tmp_path / "cache")
  assert into_stdin.returncode == 1 and into_stdin.stderr.splitlines()[-1] == (
    f"wyjax: error: --output {book} is the file on standard input; writing it would destroy the input (--overwrite "
    "never does): choose another --output"
  ), into_stdin.stderr[-2000:]
  with book.open("ab") as stdout:
    into_stdout = subprocess.run(
      [sys.executable, "-m", "wyjax.predict", f"--model={workdir}", f"--input={book}"],
      cwd=REPO_ROOT,
      env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
      stdout=stdout,
      stderr=subprocess.PIPE,
      text=True,
    )
  assert into_stdout.returncode == 1 and into_stdout.stderr.splitlines()[-1] == (
    f"wyjax: error: standard output is the input file {book}; writing it would destroy the input (--overwrite never "
    "does): write to another file with --output"
  ), into_stdout.stderr[-2000:]
  assert book.read_text(encoding="utf-8") == "子曰學而時習之\n"


def test_a_file_that_appears_while_predict_runs_is_never_replaced(runs, tmp_path):
  """Two predicts onto one --output, neither with --overwrite, both exited 0 and the second
  replaced the first's finished file. The check is made by the rename itself (no replacing
  rename): the later one is refused in one line, its own output removed."""
  workdir, _, dev = runs["punc"]
  out = tmp_path / "out.txt"
  waiting = _predict(workdir, f"--output={out}", cache=tmp_path / "cache", background=True, stdin=subprocess.PIPE)
  waiting.stdin.write(dev[0].text + "\n")
  waiting.stdin.flush()
  while not _left_over(tmp_path, "out.txt"):  # its temporary output is open: it passed every check
    assert waiting.poll() is None, waiting.stderr.read()[-2000:]
    time.sleep(0.05)
  (tmp_path / "in.txt").write_text(dev[1].text + "\n", encoding="utf-8")
  first = _predict(workdir, f"--input={tmp_path / 'in.txt'}", f"--output={out}", cache=tmp_path / "cache")
  assert first.returncode == 0, first.stderr[-2000:]
  finished = out.read_bytes()
  with waiting:
    waiting.stdin.close()  # its input ends: it renames its output
    waiting.wait(timeout=120)
    stderr = waiting.stderr.read()
  assert waiting.returncode == 1 and stderr.splitlines()[-1] == (
    f"wyjax: error: --output {out} appeared while predict ran (another command wrote it) and was not replaced; "
    "choose another --output, or pass --overwrite"
  ), stderr[-2000:]
  assert out.read_bytes() == finished and _left_over(tmp_path, "out.txt") == ["out.txt"]


def test_a_full_disk_or_ctrl_c_leaves_no_output_and_the_rerun_needs_no_overwrite(runs, tmp_path):
  """A full disk is simulated by a file-size limit (`ulimit -f`, RLIMIT_FSIZE): a write beyond it
  fails with EFBIG as one on a full disk fails with ENOSPC (Python ignores SIGXFSZ); the same
  write fails at the same byte on every run. Ctrl-C (SIGINT), then SIGTERM, is sent while predict
  writes its output (the temporary file exists) and waits for more input: a pipe that stays open."""
  workdir, _, dev = runs["punc"]
  lines = [e.text for e in dev] * 4  # 27 kB: beyond the limit below
  (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  out = tmp_path / "out.txt"
  flags = (f"--input={tmp_path / 'in.txt'}", f"--output={out}")
  full = _predict(workdir, *flags, file_size_kb=16, cache=tmp_path / "cache")
  assert full.returncode == 1 and full.stderr.splitlines()[-1] == f"wyjax: error: {out}: File too large", full.stderr[
    -2000:
  ]
  assert _left_over(tmp_path, "out.txt") == []

  stops = ((signal.SIGINT, "wyjax: stopped by SIGINT (Ctrl-C)"), (signal.SIGTERM, "wyjax: stopped by SIGTERM"))
  for signum, line in stops:
    interrupted = _predict(
      workdir, "--input=-", f"--output={out}", cache=tmp_path / "cache", background=True, stdin=subprocess.PIPE
    )
    interrupted.stdin.write(lines[0] + "\n")
    interrupted.stdin.flush()
    while not _left_over(tmp_path, "out.txt"):
      assert interrupted.poll() is None, interrupted.stderr.read()[-2000:]
      time.sleep(0.05)
    interrupted.send_signal(signum)
    with interrupted:  # (closes its pipes: stdin once it has ended)
      interrupted.wait(timeout=120)
      stderr = interrupted.stderr.read()
    assert interrupted.returncode == 128 + signum and stderr.splitlines()[-1] == line, stderr
    assert "Traceback" not in stderr and _left_over(tmp_path, "out.txt") == []  # SIGTERM left a hidden .partial

  rerun = _predict(workdir, *flags, cache=tmp_path / "cache")  # no --overwrite: the failures left nothing
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert len(out.read_text(encoding="utf-8").splitlines()) == len(lines)


def test_lines_are_kept_exactly_and_undecodable_ones_named_or_skipped(runs, tmp_path):
  """Only \\n ends a line (\\r\\n is one ending); a lone \\r stays inside its line, a blank line
  comes back as it was, invalid UTF-8 is an error at its line or, with --skip_bad_lines, an
  empty line, reported and counted."""
  workdir, _, _ = runs["punc"]
  source = tmp_path / "in.txt"
  source.write_bytes(
    "子曰學而時習之\r不亦說乎\r\n \t \n".encode() + "有朋自遠方來".encode()[:7] + b"\xff\n" + "人不知而不慍\n".encode()
  )
  out = tmp_path / "out.txt"
  failed = _predict(workdir, f"--input={source}", f"--output={out}", cache=tmp_path / "cache")
  assert failed.returncode == 1 and "Traceback" not in failed.stderr
  assert (
    failed.stderr.splitlines()[-2] == f"wyjax: error: {source}:3: not valid UTF-8 (invalid continuation byte "
    "at byte 7 of the line)"
  ), failed.stderr[-2000:]
  assert not out.exists()
  skipped = _predict(workdir, f"--input={source}", f"--output={out}", "--skip_bad_lines", cache=tmp_path / "cache")
  assert skipped.returncode == 0, skipped.stderr[-2000:]
  assert f"{source}:3: not valid UTF-8" in skipped.stderr and "1 bad line(s) of 4 left empty" in skipped.stderr
  with out.open(encoding="utf-8", newline="") as f:
    written = f.read().split("\n")
  bare = lambda text: "".join(c for c in text if c not in wyweb_files.PUNC_MARKS)
  assert [bare(line) for line in written] == ["子曰學而時習之\r不亦說乎", " \t ", "", "人不知而不慍", ""]


@pytest.mark.parametrize(
  "text, after",
  [
    ("葛\U000e0100", "葛\U000e0100"),  # an ideographic variation selector
    ("學\ufe0f", "學\ufe0f"),  # an emoji variation selector
    ("👍🏽", "👍🏽"),  # a skin-tone modifier
    ("e\u0301", "e\u0301"),  # a combining accent
    ("👨\u200d👩\u200d👧", "👨\u200d👩\u200d👧"),  # a ZWJ sequence
    ("🇨🇳", "🇨🇳"),  # a flag: a pair of regional indicators
    ("\u1112\u1161\u11ab", "\u1112\u1161\u11ab"),  # Hangul jamo: leading, vowel, trailing (한)
    ("하\u11ab", "하\u11ab"),  # a precomposed syllable and a trailing jamo
  ],
)
def test_a_mark_never_goes_inside_a_grapheme_cluster(text, after):
  """Whichever character of the cluster the model marks, the mark follows the whole cluster."""
  for marked in range(len(text)):
    tags = ["O"] * (len(text) + 1)
    tags[marked] = "S-，"
    assert punctuation.punctuated(text + "之", tags) == after + "，之", marked
  assert punctuation.punctuated(text + "。", ["S-，"] * (len(text) + 1)) == text + "。"  # a mark already there: none


def test_regional_indicators_pair_from_the_start_of_their_run():
  """Two flags in a row are two clusters, and a lone indicator after a flag is one of its own."""
  assert punctuation.punctuated("🇨🇳🇯🇵之", ["O", "S-，", "S-。", "O", "O"]) == "🇨🇳，🇯🇵。之"
  assert punctuation.punctuated("🇨🇳🇯之", ["O", "O", "S-，", "O"]) == "🇨🇳🇯，之"


def test_damaged_or_non_finite_weights_are_one_error_naming_the_file(runs, tmp_path):
  workdir, _, _ = runs["punc"]
  exported = task_models.export(task_models.load(workdir), tmp_path / "hf")
  damaged = {}
  for name in ("truncated", "two", "nan"):
    damaged[name] = tmp_path / name
    shutil.copytree(exported, damaged[name])
  weights = damaged["truncated"] / "model.safetensors"
  weights.write_bytes(weights.read_bytes()[:5000])
  config = json.loads((exported / "config.json").read_text())
  (damaged["two"] / "config.json").write_text(json.dumps({**config, "num_hidden_layers": "two"}))
  tensors = load_file(exported / "model.safetensors")
  tensors["deberta.encoder.layer.1.output.dense.weight"][3, 5] = np.nan
  save_file(tensors, damaged["nan"] / "model.safetensors", metadata={"format": "pt"})
  for name, message in (
    ("truncated", f"{weights}: not a readable safetensors file"),
    ("two", f"{damaged['two'] / 'config.json'}: num_hidden_layers is 'two'; it must be an integer"),
    ("nan", f"{damaged['nan']}: 1 weight tensor(s) hold NaN or Inf"),
  ):
    with pytest.raises(ValueError, match=re.escape(message)):
      task_models.load(damaged[name])
  (tmp_path / "in.txt").write_text("子曰學而時習之\n", encoding="utf-8")
  refused = _predict(damaged["nan"], f"--input={tmp_path / 'in.txt'}", cache=tmp_path / "cache")
  assert refused.returncode == 1 and refused.stderr.splitlines()[-1].startswith(
    f"wyjax: error: {damaged['nan']}: 1 weight tensor(s) hold NaN"
  )


def test_a_copied_run_loads_its_own_seeds_never_the_originals(runs, tmp_path):
  """results.json names its best run by an absolute path; a copy finds it inside itself, and a
  copy without its seed folders is an error, not a silent load of the original run."""
  workdir, _, _ = runs["punc"]
  shutil.copytree(workdir, tmp_path / "copy")
  assert task_models.load(tmp_path / "copy").run_dir == tmp_path / "copy" / "seed_0"
  (tmp_path / "bare").mkdir()
  for name in ("results.json", "run_config.json"):
    shutil.copy(workdir / name, tmp_path / "bare" / name)
  with pytest.raises(FileNotFoundError, match=f"its best run seed_0 is not in {tmp_path / 'bare'}"):
    task_models.load(tmp_path / "bare")

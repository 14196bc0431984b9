"""`wyjax.predict` on real dev texts of four fine-tuned runs (PUNC from the Daizhige sample,
C-CLUE NER, TLC, CMRC 2018): its outputs score exactly the run's recorded dev score, equal the
transformers model (pipeline) on the run's export, and a 200,000-character text is punctuated
whole, every character kept in order."""
import json
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import torch
import transformers

from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.hf import task_models
from wyjax.tasks import clue_reading, spans, wyweb_files
from wyjax.tasks.builders import punc
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, inference, suite

SMALL = dict(num_train_steps=30, eval_every=30, batch_size=16, eval_batch_size=32, learning_rate=1e-3)
# C-CLUE NER's seven tags need longer: at 30 steps a fresh model may still tag everything O.
LONGER = {"cclue_ner": dict(num_train_steps=60, eval_every=60)}


def _punc_data(shared_data, out):
  """PUNC built from the Daizhige sample's history books, paragraphs of ≤ 62 characters (one
  window of max_length 64); dev: the first 60 test paragraphs."""
  built = out / "built"
  punc.build_punc(shared_data / "daizhige_sample", built, dev_fraction=0.3, test_fraction=0.3)
  for split, source, rows in (("train", "train", 400), ("dev", "test", 60)):
    lines = [line for line in (built / f"{source}.tsv").read_text(encoding="utf-8").splitlines()
             if len(line.split("\t")[0]) <= 62]
    (out / f"{split}.tsv").write_text("\n".join(lines[:rows]) + "\n", encoding="utf-8")
  return out


def _ner_data(shared_data, out):
  """300 train sentences; dev: the first 60 of ≤ 62 characters (one window of max_length 64)."""
  out.mkdir()
  for split, rows in (("train", 300), ("dev", 60)):
    read = lambda suffix: (shared_data / "cclue" / "ner" / f"{split}{suffix}").read_text(encoding="utf-8").splitlines()
    pairs = [(text, tags) for text, tags in zip(read(".txt"), read("-label.txt"))
             if split == "train" or len(text.split()) <= 62][:rows]
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
MAX_LENGTH = 64  # three length buckets to compile


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory):
  """{task: (fine-tuning workdir, its results, dev examples)}: fresh tiny models, 30 steps each (NER 60)."""
  root = tmp_path_factory.mktemp("predict")
  out = {}
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))
    for name, write in DATA.items():
      data_dir = write(shared_data, root / f"{name}_data")
      config = suite.task_config(name, data_dir=str(data_dir), max_length=MAX_LENGTH, **SMALL | LONGER.get(name, {}))
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
    return [f"S-{output[i + 1]}" if output[i + 1:i + 2] in marks and output[i + 1:i + 2] else "O"
            for i, c in enumerate(output) if c not in marks]
  record = json.loads(output)
  return {"cclue_ner": lambda: tuple(record["tags"].split()), "tlc": lambda: (record["period"], record["dynasty"]),
          "cmrc2018": lambda: record["answer"]}[name]()


@pytest.mark.parametrize("name", list(DATA))
def test_predict_on_the_dev_texts_scores_the_runs_dev_score(runs, name, tmp_path):
  workdir, results, dev = runs[name]
  lines = [_input_line(name, e) for e in dev]
  if name == "punc":  # through the command line, as a user runs it
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "wyjax.predict", f"--model={workdir}", f"--input={tmp_path / 'in.txt'}",
                             f"--output={tmp_path / 'out.txt'}"], cwd=REPO_ROOT, env=pretrain_env(),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
  else:
    outputs = list(inference.Predictor(task_models.load(workdir)).outputs(lines))
  assert len(outputs) == len(dev)
  predictions = [_prediction(name, e, o) for e, o in zip(dev, outputs)]
  scores = TASKS[name].score(dev, predictions)
  main = TASKS[name].main_metric
  assert scores[main] == pytest.approx(results["dev"][main], abs=1e-12), (scores, results["dev"])
  assert 0 < results["dev"][main] or name == "cmrc2018"  # (30 steps learn something, but rarely an exact answer)


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
      theirs = {r["label"]: r["score"] for r in classifier(simplify(example.text), top_k=None, truncation=True,
                                                           max_length=MAX_LENGTH)}
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
        out = hf_model(input_ids=ids, attention_mask=(ids != model.tokenizer.pad_id).long(),
                       token_type_ids=torch.tensor(features["token_type_ids"]))
      logits = np.stack([out.start_logits.numpy(), out.end_logits.numpy()], axis=1)
      logits = np.where(features["input_ids"][:, None, :] != model.tokenizer.pad_id, logits, -1e9)
      span, _ = spans.best_span(features, logits, max_answer_length=clue_reading.MAX_ANSWER_TOKENS)
      assert json.loads(output)["answer"] == ("" if span is None else example.context[span[0]:span[1]])


def test_a_200000_character_text_is_punctuated_whole(runs, shared_data):
  """Real unpunctuated text, one line: every character comes back in order, with nothing but
  punctuation marks between."""
  workdir, _, _ = runs["punc"]
  books = sorted((shared_data / "daizhige_sample").rglob("*.txt"))
  text = "".join(c for book in books for c in book.read_text(encoding="utf-8")
                 if not c.isspace() and not unicodedata.category(c).startswith("P"))
  text = (text * (200_000 // len(text) + 1))[:200_000]
  predictor = inference.Predictor(task_models.load(workdir), batch_size=64)
  output, = predictor.outputs([text])
  assert "".join(c for c in output if c not in wyweb_files.PUNC_MARKS) == text
  assert len(output) > len(text)  # and it did punctuate


def test_a_bad_line_is_one_error_line_or_skipped_and_counted(runs, tmp_path):
  workdir, _, _ = runs["tlc"]
  (tmp_path / "in.txt").write_text('子曰學而時習之\n{"text": \n有朋自遠方來\n', encoding="utf-8")
  command = [sys.executable, "-m", "wyjax.predict", f"--model={workdir}", f"--input={tmp_path / 'in.txt'}",
             f"--output={tmp_path / 'out.jsonl'}"]
  failed = subprocess.run(command, cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True)
  assert failed.returncode != 0 and "Traceback" not in failed.stderr
  assert f"wyjax: error: {tmp_path / 'in.txt'}:2: invalid JSON" in failed.stderr
  skipped = subprocess.run(command + ["--skip_bad_lines", "--overwrite"], cwd=REPO_ROOT, env=pretrain_env(),
                           capture_output=True, text=True)
  assert skipped.returncode == 0, skipped.stderr[-2000:]
  first, bad, last = (tmp_path / "out.jsonl").read_text(encoding="utf-8").split("\n")[:3]
  assert bad == "" and json.loads(first)["dynasty"] and json.loads(last)["dynasty"]
  assert "1 bad line(s) of 3 left empty" in skipped.stderr
  refused = subprocess.run(command, cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True)
  assert refused.returncode != 0 and "exists; choose another --output or pass --overwrite" in refused.stderr

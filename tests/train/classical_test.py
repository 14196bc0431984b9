"""CCPM, C-CLUE NER and relations, and AC-EVAL end to end in one benchmark run of a fresh tiny
model, from folders named as published: each trains a few steps and writes its submission in
its published format; AC-EVAL runs transfer from the CCPM softmax run and dev fine-tuning by
cross-validation; a task with a broken file fails alone, listed on the leaderboard."""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest

from tests.conftest import assert_plot
from tests.train.conftest import REPO_ROOT, pretrain_env, tiny_checkpoint
from wyjax.core import checkpoints
from wyjax.tasks import aceval, cclue_files, ccpm
from wyjax.train import finetuning, suite, task_model

TASKS = ["ccpm", "ccpm_softmax", "cclue_ner", "cclue_re", "cclue_spo", "cclue_re_given_entities", "aceval"]


def _ner_folder(shared_data, out):
  """The real C-CLUE NER files cut to 160 train and 40 dev sentences, and 12 dev sentences as
  an unlabelled test split, under C-CLUE's own file names (data_ner/)."""
  out.mkdir()
  source = shared_data / "cclue" / "ner"
  for name, original, rows in (
    ("source.txt", "train.txt", slice(0, 160)),
    ("target.txt", "train-label.txt", slice(0, 160)),
    ("dev.txt", "dev.txt", slice(0, 40)),
    ("dev-lable.txt", "dev-label.txt", slice(0, 40)),
    ("test1.txt", "dev.txt", slice(40, 52)),
  ):
    lines = (source / original).read_text(encoding="utf-8").split("\n")[rows]
    (out / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
  return out


@pytest.fixture(scope="module")
def board(shared_data, classical_dirs, tmp_path_factory):
  with pytest.MonkeyPatch.context() as patch:  # TFDS builds go to the session's cache
    patch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))
    yield _run_benchmark(shared_data, classical_dirs, tmp_path_factory)


def _run_benchmark(shared_data, classical_dirs, tmp_path_factory):
  root = tmp_path_factory.mktemp("classical_data")
  for dataset in ("ccpm", "cclue_re", "aceval"):
    (root / dataset).symlink_to(classical_dirs[dataset])
  _ner_folder(shared_data, root / "cclue_ner")
  (root / "glner").mkdir()  # a broken task: its failure must not stop the others
  (root / "glner" / "train.jsonl").write_text('{"text": "子曰", "label": [[0, 3, "noun_other"]]}\n', encoding="utf-8")
  (root / "glner" / "dev.jsonl").write_text('{"text": "子曰", "label": []}\n', encoding="utf-8")
  out = tmp_path_factory.mktemp("classical_out")
  board = suite.run(
    init="",
    data_root=root,
    out=out,
    tasks=["glner", *TASKS],
    name="tiny",
    num_train_steps=2,
    eval_every=2,
    batch_size=8,
    max_length=64,
    learning_rate=1e-3,
  )
  return root, out, board


def test_benchmark_command_lists_a_failed_task_and_exits_1(tmp_path):
  (tmp_path / "data" / "tlc").mkdir(parents=True)
  (tmp_path / "data" / "tlc" / "train.tsv").write_text("远古\t唐\t床前明月光\n", encoding="utf-8")
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.benchmark",
      f"--data_root={tmp_path / 'data'}",
      f"--out={tmp_path / 'out'}",
      "--tasks=tlc",
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
  )
  assert result.returncode == 1, result.stderr[-2000:]
  assert "period '远古' does not contain dynasty '唐'" in (tmp_path / "out" / "leaderboard.md").read_text()
  assert "wyjax: 1 tasks failed: tlc" in result.stderr
  # One line for the failed task on the terminal (it printed a 28-41-line traceback); the traceback is in the log.
  assert "Traceback" not in result.stderr and "Traceback" in (tmp_path / "out" / "benchmark.log").read_text()
  assert [line for line in result.stderr.splitlines() if "tlc" in line and "failed" in line] == [
    f"error: tlc failed: FormatError: {tmp_path / 'data' / 'tlc' / 'train.tsv'}:1: period '远古' does not contain "
    "dynasty '唐' (expected '中古')",
    "wyjax: 1 tasks failed: tlc",
  ], result.stderr


def test_every_task_is_on_the_leaderboard(board):
  _, out, result = board
  assert list(result["tasks"]) == TASKS
  assert list(result["failed"]) == ["glner"] and "train.jsonl:1: span [0, 3)" in result["failed"]["glner"]
  markdown = (out / "leaderboard.md").read_text(encoding="utf-8")
  assert "## Other classical benchmarks" in markdown and "## WYWEB" not in markdown
  assert (
    "| Model | CCPM (Cls) | CCPM (softmax) | C-CLUE NER | C-CLUE RE | C-CLUE triples "
    "| C-CLUE RE (given entities) | AC-EVAL |"
  ) in markdown
  assert (
    "| Model | General Historical Knowledge | Short Text Understanding | Long Text Understanding | Average |"
    in markdown
  )
  for row in (
    "| transfer |",
    "| dev_finetune |",
    "| chance | 25.00 | 25.00 | 25.00 | 25.00 |",
    "## Failed\n\n- GLNER: FormatError: ",
  ):
    assert row in markdown
  for task in TASKS:
    assert_plot(out / "plots" / f"{task}_confusion.png")


@pytest.mark.parametrize("task", ["ccpm", "ccpm_softmax"])
def test_ccpm_submission_is_the_test_file_with_answers(board, task):
  root, out, _ = board
  test = ccpm.read_split(root / "ccpm", "test")
  submitted = ccpm.read_ccpm(out / task / "submission" / "CCPM.jsonl")
  assert [(e.translation, e.choices) for e in submitted] == [(e.translation, e.choices) for e in test]
  assert all(e.answer in range(4) for e in submitted)
  results = json.loads((out / task / "results.json").read_text(encoding="utf-8"))
  # The reported dev accuracy is that of the written dev predictions against the dev answers.
  predicted = ccpm.read_ccpm(out / task / "seed_0" / "dev_predictions.jsonl")
  gold = ccpm.read_split(root / "ccpm", "dev")
  assert [e.translation for e in predicted] == [e.translation for e in gold]
  assert results["test"] is None
  assert results["dev"]["accuracy"] == pytest.approx(np.mean([p.answer == g.answer for p, g in zip(predicted, gold)]))


def test_cclue_ner_submission_is_a_label_file_for_test1_txt(board):
  root, out, _ = board
  submitted = cclue_files.read_ner(root / "cclue_ner" / "test1.txt", out / "cclue_ner" / "submission" / "cclue_ner.txt")
  assert [e.text for e in submitted] == [
    e.text for e in cclue_files.read_split("cclue_ner", root / "cclue_ner", "test")
  ]
  results = json.loads((out / "cclue_ner" / "results.json").read_text(encoding="utf-8"))
  assert results["test"] is None
  predicted_file = out / "cclue_ner" / "seed_0" / "dev_predictions.txt"
  predicted = cclue_files.read_ner(root / "cclue_ner" / "dev.txt", predicted_file)
  gold = cclue_files.read_split("cclue_ner", root / "cclue_ner", "dev")
  # C-CLUE's main score from the written dev labels: token macro P/R/F1 over B/I-LOC, ORG, PER.
  from sklearn.metrics import precision_recall_fscore_support

  tags = lambda path: [t for line in path.read_text(encoding="utf-8").splitlines() for t in line.split()]
  scores = precision_recall_fscore_support(
    tags(root / "cclue_ner" / "dev-lable.txt"),
    tags(predicted_file),
    labels=list(cclue_files.SCORED_NER_LABELS),
    average="macro",
    zero_division=0,
  )
  assert (results["dev"]["precision"], results["dev"]["recall"], results["dev"]["f1"]) == pytest.approx(scores[:3])
  # Entity micro P/R/F1 beside it, counted here from the span sets.
  pairs = [({(i, *s) for s in p.spans}, {(i, *s) for s in g.spans}) for i, (p, g) in enumerate(zip(predicted, gold))]
  tp, n_pred, n_gold = (sum(len(p & g) for p, g in pairs), sum(len(p) for p, _ in pairs), sum(len(g) for _, g in pairs))
  assert n_gold > 0
  assert results["dev"]["entity_precision"] == pytest.approx(tp / n_pred if n_pred else 0.0)
  assert results["dev"]["entity_recall"] == pytest.approx(tp / n_gold)
  assert results["dev"]["entity_f1"] == pytest.approx(2 * tp / (n_pred + n_gold))


def test_cclue_re_submissions(board):
  root, out, _ = board
  test = cclue_files.read_split("cclue_re", root / "cclue_re", "test")
  # Predicate classification: predicate_predict.txt, one of the 25 predicates per record.
  submitted = (out / "cclue_re" / "submission" / "predicate_predict.txt").read_text(encoding="utf-8").splitlines()
  results = json.loads((out / "cclue_re" / "results.json").read_text(encoding="utf-8"))
  assert results["labels"] == list(cclue_files.PREDICATES) and len(submitted) == len(test)
  assert all(p in cclue_files.PREDICATES for p in submitted)
  predicted = (out / "cclue_re" / "seed_0" / "dev_predictions.txt").read_text(encoding="utf-8").splitlines()
  gold = [e.predicate for e in cclue_files.read_split("cclue_re", root / "cclue_re", "dev")]
  # evaluate_classifiction.py: the lines whose predicate set equals the gold one.
  assert results["dev"]["accuracy"] == pytest.approx(np.mean([{p} == {g} for p, g in zip(predicted, gold)]))
  # Given entities: C-CLUE triples, spo_list a list, one record per text.
  records = [
    json.loads(line)
    for line in (out / "cclue_re_given_entities" / "submission" / "cclue_re_given_entities.json")
    .read_text(encoding="utf-8")
    .splitlines()
  ]
  assert [r["text"] for r in records] == list(dict.fromkeys(e.text for e in test))
  assert sorted((r["text"], t["subject"], t["object"]) for r in records for t in r["spo_list"]) == sorted(
    (e.text, e.subject, e.object) for e in test
  )
  assert "triple_f1" in json.loads((out / "cclue_re_given_entities" / "results.json").read_text())["dev"]


def test_cclue_spo_labels_the_predicted_predicates(board):
  """C-CLUE's pipeline: the labeller's dev and test inputs are the cclue_re run's predicates;
  its dev triple scores are evaluate_labeling.py's on its written triple file."""
  from tests.tasks.fidelity_test import evaluate_labeling

  root, out, _ = board
  results = json.loads((out / "cclue_spo" / "results.json").read_text(encoding="utf-8"))
  assert results["config"]["predicates_from"] == str(out / "cclue_re")
  predicates = (out / "cclue_re" / "seed_0" / "dev_predictions.txt").read_text(encoding="utf-8").splitlines()
  written = (out / "cclue_spo" / "seed_0" / "dev_predictions.json").read_text(encoding="utf-8").splitlines()
  triples = [t for line in written for t in json.loads(line)["spo_list"]]
  assert {t["predicate"] for t in triples} <= set(predicates)  # every triple has a predicted predicate
  gold = (root / "cclue_re" / "dev_data.json").read_text(encoding="utf-8").splitlines()
  expected = evaluate_labeling(gold, written)
  assert (
    results["dev"]["triple_precision"],
    results["dev"]["triple_recall"],
    results["dev"]["triple_f1"],
  ) == pytest.approx(expected)
  test_texts = [e.text for e in cclue_files.read_split("cclue_re", root / "cclue_re", "test")]
  submitted = (out / "cclue_spo" / "submission" / "cclue_spo.json").read_text(encoding="utf-8").splitlines()
  assert [json.loads(line)["text"] for line in submitted] == list(dict.fromkeys(test_texts))


def test_aceval_transfer_and_dev_finetune_submissions(board):
  root, out, _ = board
  results = json.loads((out / "aceval" / "results.json").read_text(encoding="utf-8"))
  ccpm_results = json.loads((out / "ccpm_softmax" / "results.json").read_text(encoding="utf-8"))
  assert results["transfer_init"] == ccpm_results["best_run"]  # from the CCPM softmax run
  test = aceval.read_split(root / "aceval", "test")
  expected_ids = {s: [q.row_id for q in test if q.subject == s] for s in aceval.SUBJECTS}
  for name in ("aceval.json", "aceval_transfer.json"):
    submission = json.loads((out / "aceval" / "submission" / name).read_text(encoding="utf-8"))
    assert list(submission) == list(aceval.SUBJECTS)
    assert {s: list(answers) for s, answers in submission.items()} == expected_ids
    assert all(a in aceval.LETTERS for answers in submission.values() for a in answers.values())
  for protocol in ("transfer", "dev_finetune"):
    scores = results[protocol]
    assert set(scores) == {
      "accuracy",
      "average",
      *(f"category/{c}" for c in aceval.CATEGORIES),
      *(f"subject/{s}" for s in aceval.SUBJECTS),
    }
    categories = [scores[f"category/{c}"] for c in aceval.CATEGORIES]
    assert scores["average"] == pytest.approx(sum(categories) / 3)
    lines = (out / "aceval" / f"dev_predictions_{protocol}.jsonl").read_text(encoding="utf-8").splitlines()
    answers = {(r["subject"], r["id"]): r["answer"] for r in map(json.loads, lines)}
    dev = aceval.read_split(root / "aceval", "dev")
    assert len(answers) == len(lines) == len(dev)
    correct = [answers[q.subject, q.row_id] == q.answer for q in dev]
    assert scores["accuracy"] == pytest.approx(sum(correct) / len(dev))  # every dev question answered once
  assert results["dev"] == results["dev_finetune"]


def test_pretrained_encoder_is_grafted_into_the_match_head(classical_dirs, tmp_path, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  texts = [
    t
    for split in ("train", "dev", "test")
    for e in ccpm.read_split(classical_dirs["ccpm"], split)
    for t in task_model.example_texts(e)
  ]
  params = tiny_checkpoint(tmp_path, texts)
  # Learning rate 0: the best checkpoint must hold exactly the pretrained encoder.
  config = suite.task_config(
    "ccpm_match",
    data_dir=str(classical_dirs["ccpm"]),
    init=str(tmp_path / "hf"),
    num_train_steps=2,
    eval_every=1,
    batch_size=8,
    learning_rate=0.0,
    max_length=64,
  )
  results = finetuning.finetune(config, tmp_path / "run")
  _, tuned = checkpoints.restore_model(tmp_path / "run" / "seed_0")
  assert set(tuned) == {"encoder", "candidate_encoder"}  # two encoders, no head parameters
  for encoder in tuned.values():  # both start from the pretrained one
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6), encoder, params["encoder"])
  assert results["dev"]["accuracy"] > 0.25  # untrained cosine matching already beats chance on this fixture

"""CCPM (both models), C-CLUE NER and relations, and AC-EVAL end to end in one benchmark run of
a fresh tiny model: each trains a few steps and writes its submission in its published format;
AC-EVAL runs zero-shot from the CCPM run and few-shot by cross-validation."""
import json

import jax
import numpy as np
import pytest

from tests.conftest import assert_plot
from tests.train.conftest import tiny_checkpoint
from wyjax.tasks import aceval, cclue, ccpm
from wyjax.train import benchmark, checkpoints, finetune

TASKS = ["ccpm", "ccpm_match", "cclue_ner", "cclue_re", "aceval"]


def _ner_folder(shared_data, out):
  """The real C-CLUE NER files cut to 160 train and 40 dev sentences, and a test.txt of 12
  dev sentences without labels."""
  out.mkdir()
  source = shared_data / "cclue" / "ner"
  for name, split, rows in (("train", "train", slice(0, 160)), ("dev", "dev", slice(0, 40)),
                            ("test", "dev", slice(40, 52))):
    for suffix in (".txt", "-label.txt") if name != "test" else (".txt",):
      lines = (source / f"{split}{suffix}").read_text(encoding="utf-8").split("\n")[rows]
      (out / f"{name}{suffix}").write_text("\n".join(lines) + "\n", encoding="utf-8")
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
  out = tmp_path_factory.mktemp("classical_out")
  board = benchmark.run(init="", data_root=root, out=out, tasks=TASKS, name="tiny", num_train_steps=2,
                        eval_every=2, batch_size=8, max_length=64, learning_rate=1e-3)
  return root, out, board


def test_every_task_is_on_the_leaderboard(board):
  _, out, result = board
  assert list(result["tasks"]) == TASKS
  markdown = (out / "leaderboard.md").read_text(encoding="utf-8")
  assert "## Other classical benchmarks" in markdown and "## WYWEB" not in markdown
  assert "| CCPM (Cls) | CCPM (Match) | C-CLUE NER | C-CLUE RE | AC-EVAL |" in markdown
  assert "| Model | General Historical Knowledge | Short Text Understanding | Long Text Understanding | Average |" \
         in markdown
  for row in ("| zero-shot |", "| few-shot |", "| chance | 25.00 | 25.00 | 25.00 | 25.00 |"):
    assert row in markdown
  for task in TASKS:
    assert_plot(out / "plots" / f"{task}_confusion.png")


@pytest.mark.parametrize("task", ["ccpm", "ccpm_match"])
def test_ccpm_submission_is_the_test_file_with_answers(board, task):
  root, out, _ = board
  test = ccpm.read_split(root / "ccpm", "test")
  submitted = ccpm.read_ccpm(out / task / "submission" / f"{task}.jsonl")
  assert [(e.translation, e.choices) for e in submitted] == [(e.translation, e.choices) for e in test]
  assert all(e.answer in range(4) for e in submitted)
  results = json.loads((out / task / "results.json").read_text(encoding="utf-8"))
  # The reported dev accuracy is that of the written dev predictions against the dev answers.
  predicted = ccpm.read_ccpm(out / task / "seed_0" / "dev_predictions.jsonl")
  gold = ccpm.read_split(root / "ccpm", "dev")
  assert [e.translation for e in predicted] == [e.translation for e in gold]
  assert results["test"] is None
  assert results["dev"]["accuracy"] == pytest.approx(np.mean([p.answer == g.answer for p, g in zip(predicted, gold)]))


def test_cclue_ner_submission_is_a_label_file_for_test_txt(board):
  root, out, _ = board
  submitted = cclue.read_ner(root / "cclue_ner" / "test.txt", out / "cclue_ner" / "submission" / "cclue_ner.txt")
  assert [e.text for e in submitted] == [e.text for e in cclue.read_split("cclue_ner", root / "cclue_ner", "test")]
  results = json.loads((out / "cclue_ner" / "results.json").read_text(encoding="utf-8"))
  assert results["test"] is None
  # Entity micro P/R/F1 of the written dev labels, counted here from the span sets.
  predicted = cclue.read_ner(root / "cclue_ner" / "dev.txt", out / "cclue_ner" / "seed_0" / "dev_predictions.txt")
  gold = cclue.read_split("cclue_ner", root / "cclue_ner", "dev")
  pairs = [({(i, *s) for s in p.spans}, {(i, *s) for s in g.spans}) for i, (p, g) in enumerate(zip(predicted, gold))]
  tp, n_pred, n_gold = (sum(len(p & g) for p, g in pairs), sum(len(p) for p, _ in pairs), sum(len(g) for _, g in pairs))
  assert n_gold > 0
  assert results["dev"]["precision"] == pytest.approx(tp / n_pred if n_pred else 0.0)
  assert results["dev"]["recall"] == pytest.approx(tp / n_gold)
  assert results["dev"]["f1"] == pytest.approx(2 * tp / (n_pred + n_gold))


def test_cclue_re_submission_fills_the_predicates(board):
  root, out, _ = board
  test = cclue.read_split("cclue_re", root / "cclue_re", "test")
  submitted = cclue.read_relations(out / "cclue_re" / "submission" / "cclue_re.jsonl")
  results = json.loads((out / "cclue_re" / "results.json").read_text(encoding="utf-8"))
  assert results["labels"] == ["任职", "位于", "同名于", "隶属于"]  # the fixture's predicates, sorted
  assert [(e.text, e.subject, e.object) for e in submitted] == [(e.text, e.subject, e.object) for e in test]
  assert all(e.predicate in results["labels"] for e in submitted)
  from sklearn.metrics import f1_score
  predicted = [e.predicate for e in cclue.read_relations(out / "cclue_re" / "seed_0" / "dev_predictions.jsonl")]
  gold = [e.predicate for e in cclue.read_split("cclue_re", root / "cclue_re", "dev")]
  assert results["dev"]["accuracy"] == pytest.approx(np.mean(np.array(predicted) == np.array(gold)))
  assert results["dev"]["macro_f1"] == pytest.approx(
      f1_score(gold, predicted, labels=results["labels"], average="macro", zero_division=0))


def test_aceval_zero_and_few_shot_submissions(board):
  root, out, _ = board
  results = json.loads((out / "aceval" / "results.json").read_text(encoding="utf-8"))
  ccpm_results = json.loads((out / "ccpm" / "results.json").read_text(encoding="utf-8"))
  assert results["zero_shot_init"] == ccpm_results["best_run"]  # the transfer: from the CCPM run
  test = aceval.read_split(root / "aceval", "test")
  expected_ids = {s: [q.row_id for q in test if q.subject == s] for s in aceval.SUBJECTS}
  for name in ("aceval.json", "aceval_zero_shot.json"):
    submission = json.loads((out / "aceval" / "submission" / name).read_text(encoding="utf-8"))
    assert list(submission) == list(aceval.SUBJECTS)
    assert {s: list(answers) for s, answers in submission.items()} == expected_ids
    assert all(a in aceval.LETTERS for answers in submission.values() for a in answers.values())
  for protocol in ("zero_shot", "few_shot"):
    scores = results[protocol]
    assert set(scores) == {"accuracy", "average", *(f"category/{c}" for c in aceval.CATEGORIES),
                           *(f"subject/{s}" for s in aceval.SUBJECTS)}
    categories = [scores[f"category/{c}"] for c in aceval.CATEGORIES]
    assert scores["average"] == pytest.approx(sum(categories) / 3)
    lines = (out / "aceval" / f"dev_predictions_{protocol}.jsonl").read_text(encoding="utf-8").splitlines()
    answers = {(r["subject"], r["id"]): r["answer"] for r in map(json.loads, lines)}
    dev = aceval.read_split(root / "aceval", "dev")
    assert len(answers) == len(lines) == len(dev)
    correct = [answers[q.subject, q.row_id] == q.answer for q in dev]
    assert scores["accuracy"] == pytest.approx(sum(correct) / len(dev))  # every dev question answered once
  assert results["dev"] == results["few_shot"]


def test_pretrained_encoder_is_grafted_into_the_match_head(classical_dirs, tmp_path, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  texts = [t for split in ("train", "dev", "test") for e in ccpm.read_split(classical_dirs["ccpm"], split)
           for t in finetune.example_texts(e)]
  params = tiny_checkpoint(tmp_path, texts)
  # Learning rate 0: the best checkpoint must hold exactly the pretrained encoder.
  config = benchmark.task_config("ccpm_match", data_dir=str(classical_dirs["ccpm"]), init=str(tmp_path / "hf"),
                                 num_train_steps=2, eval_every=1, batch_size=8, learning_rate=0.0, max_length=64)
  results = finetune.finetune(config, tmp_path / "run")
  _, tuned = checkpoints.restore_model(tmp_path / "run" / "seed_0")
  assert set(tuned) == {"encoder"}  # the Match model has no head parameters
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6), tuned["encoder"],
                         params["encoder"])
  assert results["dev"]["accuracy"] > 0.25  # untrained cosine matching already beats chance on this fixture

"""The linear baseline: far above the majority class on TLC's and C-CLUE NER's real dev splits,
exact where the answer is known by construction (classes, punctuation marks), on dev and test,
and its own row on the leaderboard, beside the same model without pretraining."""

import numpy as np

from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.tasks import cclue, clue, datasets, leaderboard, linear_baseline, wyweb
from wyjax.tasks.registry import majority_baseline
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.wyweb_files import PuncExample


def _featurized(task, splits: dict, tokenizer) -> dict:
  return {
    s: (examples, task.featurize_all(examples, tokenizer, task.max_length, s)[0]) for s, examples in splits.items()
  }


def test_tlc_dev_far_above_the_majority_class(shared_data):
  splits = {s: wyweb.TLC.files.read_split(shared_data / "wyweb" / "tlc", s) for s in ("train", "dev")}
  data = _featurized(wyweb.TLC, splits, Tokenizer(build_vocab(e.text for e in splits["train"])))
  scores = linear_baseline.scores(wyweb.TLC, data)
  majority = majority_baseline(wyweb.TLC, splits["train"], splits["dev"])
  assert scores["test"] is None and set(scores["dev"]) == set(majority)  # the task's own metrics: dynasty and period
  # Measured: dynasty accuracy 57.01 (majority class 14.84), period accuracy 72.43 (42.41).
  assert scores["dev"]["accuracy"] > 0.55 and scores["dev"]["accuracy"] > majority["accuracy"] + 0.35
  assert scores["dev"]["period_accuracy"] > 0.70


def test_cclue_ner_dev_far_above_the_majority_tag(shared_data):
  """Tagging: every character from the n-grams around it, scored by C-CLUE's own token macro F1."""
  splits = datasets.load_splits(cclue.NER.files, shared_data / "cclue" / "ner")
  data = _featurized(cclue.NER, splits, Tokenizer(build_vocab(e.text for e in splits["train"])))
  scores = linear_baseline.scores(cclue.NER, data)["dev"]
  majority = majority_baseline(cclue.NER, splits["train"], splits["dev"])
  # Measured: token macro F1 43.90 (majority tag 21.50), entity micro F1 36.57 (11.23).
  assert scores["f1"] > 0.40 and scores["f1"] > majority["f1"] + 0.15
  assert scores["entity_f1"] > majority["entity_f1"] + 0.15


def _pair(line, a, b, label):
  return clue.ClueExample(line, line, a, b, label)


def test_classes_of_disjoint_characters_are_told_apart_exactly():
  # AFQMC's pairs: label 1 written with 甲乙丙, label 0 with 丁戊己; the dev pairs are new combinations.
  train = [
    _pair(1, "甲乙", "丙甲", 1),
    _pair(2, "乙丙", "甲", 1),
    _pair(3, "丙丙", "乙甲", 1),
    _pair(4, "丁戊", "己丁", 0),
    _pair(5, "戊己", "丁", 0),
    _pair(6, "己己", "戊丁", 0),
    _pair(7, "丁丁", "戊戊", None),
  ]  # unlabelled (NLI's "-"): left out, or its IGNORE would be a class
  dev = [_pair(1, "丙乙", "乙", 1), _pair(2, "己戊", "丁己", 0), _pair(3, "甲甲", "丙", 1), _pair(4, "丁丁", "戊戊", 0)]
  task = clue.TASKS[0]
  assert task.name == "afqmc"
  tokenizer = Tokenizer(build_vocab(["甲乙丙丁戊己"]))
  data = _featurized(task, {"train": train, "dev": dev}, tokenizer)
  data["test"] = data["dev"]
  assert linear_baseline.scores(task, data) == {
    "dev": {"accuracy": 1.0, "macro_f1": 1.0},
    "test": {"accuracy": 1.0, "macro_f1": 1.0},
  }
  one_class = data["train"][1][:3]
  assert list(linear_baseline.predicted_classes(one_class, data["dev"][1])) == [1, 1, 1, 1]


def _punctuated(line: int, text: str) -> PuncExample:
  """PUNC's example of a punctuated text: each mark the label of the character before it."""
  chars, labels = [], []
  for c in text:
    if c in "，。":
      labels[-1] = f"S-{c}"
    else:
      chars.append(c)
      labels.append("O")
  return PuncExample(line, "".join(chars), tuple(labels))


def _marks_after_characters():
  """(PUNC's splits, tokenizer): a comma after 曰 and a full stop after 也, in texts of random
  characters; the dev and test texts are new ones."""
  rng = np.random.default_rng(0)
  texts = [
    "".join(c + {"曰": "，", "也": "。"}.get(c, "") for c in rng.choice(list("子曰学也孟仁义之乎者而"), 12))
    for _ in range(240)
  ]
  splits = {"train": texts[:200], "dev": texts[200:220], "test": texts[220:]}
  splits = {split: [_punctuated(i, t) for i, t in enumerate(texts, 1)] for split, texts in splits.items()}
  return splits, Tokenizer(build_vocab(["子曰学也孟仁义之乎者而"]))


def test_marks_told_by_the_characters_around_them_exactly():
  # A test split without labels is left unscored.
  splits, tokenizer = _marks_after_characters()
  data = _featurized(wyweb.PUNC, splits, tokenizer)
  assert linear_baseline.scores(wyweb.PUNC, data) == {
    "dev": {"precision": 1.0, "recall": 1.0, "f1": 1.0},
    "test": {"precision": 1.0, "recall": 1.0, "f1": 1.0},
  }
  unlabelled = [PuncExample(1, e.text, ()) for e in splits["test"]]
  data |= _featurized(wyweb.PUNC, {"test": unlabelled}, tokenizer)
  assert linear_baseline.scores(wyweb.PUNC, data)["test"] is None


def test_a_rerun_scores_the_kept_predictions_and_other_labels_are_fitted_anew(tmp_path, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path))
  splits, tokenizer = _marks_after_characters()
  data = _featurized(wyweb.PUNC, splits, tokenizer)
  first = linear_baseline.scores(wyweb.PUNC, data)
  (kept,) = (tmp_path / "linear_baseline").glob("*.npz")
  # What a rerun scores is what was kept: no mark anywhere, written over it, recalls nothing.
  with np.load(kept) as predictions:
    np.savez(kept, **{split: np.full_like(p, wyweb.PUNC.labels.index("O")) for split, p in predictions.items()})
  assert linear_baseline.scores(wyweb.PUNC, data)["dev"]["recall"] == 0
  # One label changed is other train data: fitted again, kept beside the first.
  examples, features = data["train"]
  labels = features[0]["labels"].copy()
  first_labelled = np.flatnonzero(labels != IGNORE)[0]
  labels[first_labelled] = 1 - labels[first_labelled]  # another of the first two classes
  data["train"] = examples, [{**features[0], "labels": labels}] + features[1:]
  assert linear_baseline.scores(wyweb.PUNC, data) == first
  assert len(list((tmp_path / "linear_baseline").glob("*.npz"))) == 2


def test_only_sequence_and_token_heads_have_one():
  assert linear_baseline.scores(cclue.TASKS[0], {"train": ([], []), "dev": ([], [])}) == {"dev": None, "test": None}
  assert linear_baseline.scores(wyweb.IRC, {"train": ([], []), "dev": ([], [])}) is None  # multiple choice


def _result(score, majority, linear="absent", metric="accuracy", test=None):
  """results.json as wyjax.finetune writes it ("absent": as AC-EVAL's run writes it, without the
  linear baseline; linear: its dev score, or (dev, test)); TLC's note reads period_accuracy."""
  result = {
    "dev": {metric: score, "period_accuracy": 0.9},
    "main_metric": metric,
    "dev_mean": score,
    "dev_std": 0.0,
    "test": test and {metric: test},
    "majority_baseline": {metric: majority},
  }
  if linear == "absent":
    return result
  dev, test = linear if isinstance(linear, tuple) else (linear, None)
  return {**result, "linear_baseline": linear and {"dev": {metric: dev}, "test": test and {metric: test}}}


def test_leaderboard_row_beside_the_majority_class(tmp_path):
  results = {
    "punc": _result(0.5, 0.0, 0.39, "f1"),
    "tlc": _result(0.44, 0.15, 0.6),
    "ccpm": _result(0.3, 0.25, None),
    "afqmc": _result(0.7, 0.69, 0.72),
    "cmrc2018": _result(0.02, 0.0, None, "em"),
  }
  board = leaderboard.write(tmp_path, "m", results)
  assert board["linear_baseline"] == {
    "punc": {"dev": {"f1": 0.39}, "test": None},
    "tlc": {"dev": {"accuracy": 0.6}, "test": None},
    "afqmc": {"dev": {"accuracy": 0.72}, "test": None},
  }
  markdown = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  # WYWEB: tagging and classification; no row on a board with neither; no test tables without test scores.
  assert (
    "# m: dev scores (×100)\n\n## WYWEB\n\n| Model | Avg. (WYWMT apart) | PUNC | TLC |\n|---|---|---|---|\n"
    "| m | 47.00 | 50.00 | 44.00 |\n| majority class | 7.50 | 0.00 | 15.00 |\n"
    f"| {leaderboard.LINEAR} | 49.50 | 39.00 | 60.00 |\n\n"
    "## Other classical benchmarks\n\n| Model | CCPM (Cls) |\n|---|---|\n| m | 30.00 |\n| majority class | 25.00 |\n\n"
    "## CLUE"
  ) in markdown
  # CLUE: the classification score over AFQMC, none over reading comprehension.
  assert (
    "| Model | CLUE 1.1 classification (partial: 1 of 6) | CLUE reading comprehension (partial: 1 of 3) "
    "| AFQMC | CMRC 2018 |\n|---|---|---|---|---|\n| m | 70.00 | 2.00 | 70.00 | 2.00 |\n"
    "| majority class | 69.00 | 0.00 | 69.00 | 0.00 |\n"
    f"| {leaderboard.LINEAR} | 72.00 | – | 72.00 | – |\n"
  ) in markdown
  assert f"- {leaderboard.LINEAR}: {linear_baseline.NOTE}\n" in markdown
  assert "test split" not in markdown and leaderboard.TWIN not in markdown


def test_no_row_without_a_linear_baseline(tmp_path):
  leaderboard.write(tmp_path, "m", {"irc": _result(0.5, 0.25, None), "ccpm": _result(0.3, 0.25)})
  assert leaderboard.LINEAR not in (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  assert leaderboard.average({"punc": 0.5, "tlc": None}, "wyweb") is None


def _seeds(dev: dict, test: dict, majority=0.1, linear=None) -> dict:
  """results.json of several seeds: {task: [score per seed]} on dev and test, the best-dev seed's on top."""
  results = {}
  for t, scores in dev.items():
    metric = "accuracy" if t == "tlc" else "f1"
    best = max(range(len(scores)), key=scores.__getitem__)
    results[t] = {
      **_result(scores[best], majority, linear and linear[t], metric, test[t][best]),
      "runs": [{"seed": k, "dev": {metric: v}, "test": {metric: w}} for k, (v, w) in enumerate(zip(scores, test[t]))],
    }
  return results


def test_several_seeds_add_their_mean_and_std(tmp_path):
  """The best-dev seed's row, then the seeds' mean ± std (population), the average per seed."""
  results = _seeds(
    {"tlc": [0.40, 0.44, 0.42], "punc": [0.50, 0.56, 0.53]}, {"tlc": [0.41, 0.43, 0.45], "punc": [0.52, 0.55, 0.58]}
  )
  leaderboard.write(tmp_path, "m", results)
  markdown = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  # Averages per seed: 0.45, 0.50, 0.475 → mean 47.50, std 2.04; TLC std 1.63, PUNC 2.45.
  assert (
    "| m | 50.00 | 56.00 | 44.00 |\n| m: mean ± std of 3 seeds | 47.50 ± 2.04 | 53.00 ± 2.45 | 42.00 ± 1.63 |\n"
    "| majority class |"
  ) in markdown
  assert "the mean ± std (population) of the 3 seeds' scores" in markdown
  # Test: the best-dev seed's (seed 1: the submission), then the seeds' 0.465, 0.49, 0.515 → 49.00 ± 2.04.
  assert (
    "## WYWEB: test split\n\n| Model | Avg. (WYWMT apart) | PUNC | TLC |\n|---|---|---|---|\n"
    "| m | 49.00 | 55.00 | 43.00 |\n| m: mean ± std of 3 seeds | 49.00 ± 2.04 | 55.00 ± 2.45 | 43.00 ± 1.63 |\n\n"
  ) in markdown


def test_the_same_model_without_pretraining_beside_it_on_dev_and_test(tmp_path):
  linear = {"tlc": (0.6, 0.58), "punc": (0.39, 0.41)}
  results = _seeds(
    {"tlc": [0.70, 0.74], "punc": [0.80, 0.76]}, {"tlc": [0.69, 0.71], "punc": [0.79, 0.77]}, linear=linear
  )
  twin = _seeds({"tlc": [0.50, 0.54], "punc": [0.60, 0.62]}, {"tlc": [0.48, 0.56], "punc": [0.63, 0.59]})
  board = leaderboard.write(tmp_path, "m", results, no_pretraining=twin)
  assert board["no_pretraining_baseline"] == {
    "punc": {"dev": {"f1": 0.62, "period_accuracy": 0.9}, "test": {"f1": 0.59}, "dev_mean_std": [0.62, 0.0]},
    "tlc": {"dev": {"accuracy": 0.54, "period_accuracy": 0.9}, "test": {"accuracy": 0.56}, "dev_mean_std": [0.54, 0.0]},
  }
  assert board["linear_baseline"]["tlc"] == {"dev": {"accuracy": 0.6}, "test": {"accuracy": 0.58}}
  markdown = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  assert (
    "# m: dev and test scores (×100)\n\n## WYWEB\n\n| Model | Avg. (WYWMT apart) | PUNC | TLC |\n|---|---|---|---|\n"
    "| m | 77.00 | 80.00 | 74.00 |\n| m: mean ± std of 2 seeds | 75.00 ± 0.00 | 78.00 ± 2.00 | 72.00 ± 2.00 |\n"
    f"| {leaderboard.TWIN} | 58.00 | 62.00 | 54.00 |\n"
    f"| {leaderboard.TWIN}: mean ± std of 2 seeds | 56.50 ± 1.50 | 61.00 ± 1.00 | 52.00 ± 2.00 |\n"
    f"| majority class | 10.00 | 10.00 | 10.00 |\n| {leaderboard.LINEAR} | 49.50 | 39.00 | 60.00 |\n\n"
    "## WYWEB: test split\n\n| Model | Avg. (WYWMT apart) | PUNC | TLC |\n|---|---|---|---|\n"
    "| m | 75.00 | 79.00 | 71.00 |\n| m: mean ± std of 2 seeds | 74.00 ± 0.00 | 78.00 ± 1.00 | 70.00 ± 1.00 |\n"
    f"| {leaderboard.TWIN} | 57.50 | 59.00 | 56.00 |\n"
    f"| {leaderboard.TWIN}: mean ± std of 2 seeds | 56.50 ± 1.00 | 61.00 ± 2.00 | 52.00 ± 4.00 |\n"
    f"| {leaderboard.LINEAR} | 49.50 | 41.00 | 58.00 |\n"
  ) in markdown
  assert f"- {leaderboard.TWIN}: m fine-tuned from random weights" in markdown

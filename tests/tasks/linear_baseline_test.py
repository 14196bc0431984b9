"""The linear baseline: far above the majority class on TLC's real dev split, exact where the
answer is known by construction, and its own row on the leaderboard."""
from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.tasks import clue, leaderboard, linear_baseline, wyweb
from wyjax.tasks.registry import majority_baseline


def _featurized(task, splits: dict, tokenizer) -> dict:
  return {s: (examples, task.featurize_all(examples, tokenizer, task.max_length, s)[0])
          for s, examples in splits.items()}


def test_tlc_dev_far_above_the_majority_class(shared_data):
  splits = {s: wyweb.TLC.files.read_split(shared_data / "wyweb" / "tlc", s) for s in ("train", "dev")}
  data = _featurized(wyweb.TLC, splits, Tokenizer(build_vocab(e.text for e in splits["train"])))
  scores = linear_baseline.dev_metrics(wyweb.TLC, data["train"], data["dev"])
  majority = majority_baseline(wyweb.TLC, splits["train"], splits["dev"])
  assert set(scores) == set(majority)  # the task's own metrics: dynasty and period
  # Measured: dynasty accuracy 57.01 (majority class 14.84), period accuracy 72.43 (42.41).
  assert scores["accuracy"] > 0.55 and scores["accuracy"] > majority["accuracy"] + 0.35
  assert scores["period_accuracy"] > 0.70


def _pair(line, a, b, label):
  return clue.ClueExample(line, line, a, b, label)


def test_classes_of_disjoint_characters_are_told_apart_exactly():
  # AFQMC's pairs: label 1 written with 甲乙丙, label 0 with 丁戊己; the dev pairs are new combinations.
  train = [_pair(1, "甲乙", "丙甲", 1), _pair(2, "乙丙", "甲", 1), _pair(3, "丙丙", "乙甲", 1),
           _pair(4, "丁戊", "己丁", 0), _pair(5, "戊己", "丁", 0), _pair(6, "己己", "戊丁", 0),
           _pair(7, "丁丁", "戊戊", None)]  # unlabelled (NLI's "-"): left out, or its IGNORE would be a class
  dev = [_pair(1, "丙乙", "乙", 1), _pair(2, "己戊", "丁己", 0), _pair(3, "甲甲", "丙", 1), _pair(4, "丁丁", "戊戊", 0)]
  task = clue.TASKS[0]
  assert task.name == "afqmc"
  tokenizer = Tokenizer(build_vocab(["甲乙丙丁戊己"]))
  data = _featurized(task, {"train": train, "dev": dev}, tokenizer)
  assert linear_baseline.dev_metrics(task, data["train"], data["dev"]) == {"accuracy": 1.0, "macro_f1": 1.0}
  one_class = data["train"][1][:3]
  assert list(linear_baseline.predicted_classes(one_class, data["dev"][1])) == [1, 1, 1, 1]


def test_only_sequence_heads_have_one():
  assert linear_baseline.dev_metrics(wyweb.PUNC, ([], []), ([], [])) is None


def _result(score, majority, linear="absent", metric="accuracy"):
  """results.json as wyjax.finetune writes it ("absent": as AC-EVAL's run writes it, without the key);
  TLC's note reads period_accuracy."""
  result = {"dev": {metric: score, "period_accuracy": 0.9}, "main_metric": metric, "dev_mean": score, "dev_std": 0.0,
            "test": None, "majority_baseline": {metric: majority}}
  return result if linear == "absent" else {**result, "linear_baseline": linear and {metric: linear}}


def test_leaderboard_row_beside_the_majority_class(tmp_path):
  results = {"punc": _result(0.5, 0.0, None, "f1"), "tlc": _result(0.44, 0.15, 0.6), "ccpm": _result(0.3, 0.25),
             "afqmc": _result(0.7, 0.69, 0.72), "cmrc2018": _result(0.02, 0.0, None, "em")}
  board = leaderboard.write(tmp_path, "m", results)
  assert board["linear_baseline"] == {"tlc": {"accuracy": 0.6}, "afqmc": {"accuracy": 0.72}}
  markdown = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  # WYWEB: no average over PUNC, which it lacks; no row on a board without a classification task.
  assert ("| Model | Avg. (WYWMT apart) | PUNC | TLC |\n|---|---|---|---|\n| m | 47.00 | 50.00 | 44.00 |\n"
          "| majority class | 7.50 | 0.00 | 15.00 |\n| TF-IDF + logistic regression | – | – | 60.00 |\n\n"
          "## Other classical benchmarks\n\n| Model | CCPM (Cls) |\n|---|---|\n| m | 30.00 |\n| majority class | 25.00 |\n\n"
          "## CLUE") in markdown
  # CLUE: the classification score over AFQMC, none over reading comprehension.
  assert ("| Model | CLUE 1.1 classification (partial: 1 of 6) | CLUE reading comprehension (partial: 1 of 3) "
          "| AFQMC | CMRC 2018 |\n|---|---|---|---|---|\n| m | 70.00 | 2.00 | 70.00 | 2.00 |\n"
          "| majority class | 69.00 | 0.00 | 69.00 | 0.00 |\n"
          "| TF-IDF + logistic regression | 72.00 | – | 72.00 | – |\n") in markdown
  assert f"- TF-IDF + logistic regression: {linear_baseline.NOTE}\n" in markdown


def test_no_row_without_a_linear_baseline(tmp_path):
  leaderboard.write(tmp_path, "m", {"punc": _result(0.5, 0.0, None, "f1"), "ccpm": _result(0.3, 0.25)})
  assert "TF-IDF" not in (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  assert leaderboard.average({"punc": 0.5, "tlc": None}, "wyweb") is None


def test_several_seeds_add_their_mean_and_std(tmp_path):
  """The best-dev seed's row, then the seeds' mean ± std (population), the average per seed."""
  seeds = {"tlc": [0.40, 0.44, 0.42], "punc": [0.50, 0.56, 0.53]}
  results = {t: {**_result(max(s), 0.1, metric="accuracy" if t == "tlc" else "f1"),
                 "runs": [{"seed": k, "dev": {"accuracy" if t == "tlc" else "f1": v}} for k, v in enumerate(s)]}
             for t, s in seeds.items()}
  leaderboard.write(tmp_path, "m", results)
  markdown = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  # Averages per seed: 0.45, 0.50, 0.475 → mean 47.50, std 2.04; TLC std 1.63, PUNC 2.45.
  assert ("| m | 50.00 | 56.00 | 44.00 |\n| m: mean ± std of 3 seeds | 47.50 ± 2.04 | 53.00 ± 2.45 | 42.00 ± 1.63 |\n"
          "| majority class |") in markdown
  assert "the mean ± std (population) of the 3 seeds' dev scores" in markdown

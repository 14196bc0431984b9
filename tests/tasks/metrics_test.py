"""Our metrics against seqeval and scikit-learn on hand-made cases."""
import numpy as np
import pytest
import seqeval.metrics
from sklearn.metrics import accuracy_score, f1_score

from wyjax.tasks import metrics

NER_CASES = [
    ([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-LOC"]]),
    ([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]]),
    ([["O", "I-PER", "I-PER", "O", "I-LOC", "B-LOC"]], [["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC"]]),
    ([["B-PER", "I-LOC", "I-LOC", "O"]], [["B-PER", "B-LOC", "I-LOC", "O"]]),
    ([["S-PER", "B-LOC", "E-LOC", "O", "S-LOC"]], [["S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]]),
    ([["B-noun_other", "I-noun_other", "B-noun_bookname"], ["O", "O"]],
     [["B-noun_other", "I-noun_other", "I-noun_bookname"], ["B-noun_other", "O"]]),
    ([["O", "O", "O"]], [["B-PER", "O", "O"]]),
    ([["B-PER", "O"]], [["O", "O"]]),
]


@pytest.mark.parametrize("gold,pred", NER_CASES)
def test_entity_scores_equal_seqeval(gold, pred):
  ours = metrics.entity_scores(pred, gold)
  assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, pred, zero_division=0))
  assert ours["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, pred, zero_division=0))
  assert ours["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, pred, zero_division=0))
  report = seqeval.metrics.classification_report(gold, pred, output_dict=True, zero_division=0)
  for kind, scores in report.items():
    if kind not in ("micro avg", "macro avg", "weighted avg"):
      assert ours.get(f"f1_{kind}", 0.0) == pytest.approx(scores["f1-score"]), kind


def test_punctuation_f1_equals_seqeval_on_s_tags():
  rng = np.random.default_rng(0)
  tags = ["O", "S-。", "S-，", "S-？"]
  gold = rng.choice(4, 500, p=[0.7, 0.1, 0.15, 0.05])
  pred = np.where(rng.random(500) < 0.7, gold, rng.choice(4, 500))
  ours = metrics.punctuation_f1(pred, gold)
  theirs = seqeval.metrics.f1_score([[tags[i] for i in gold]], [[tags[i] for i in pred]])
  assert ours["f1"] == pytest.approx(theirs)


def test_accuracy_and_macro_f1_equal_scikit_learn():
  rng = np.random.default_rng(1)
  gold = rng.integers(0, 7, 300)
  pred = np.where(rng.random(300) < 0.6, gold, rng.integers(0, 7, 300))
  pred[pred == 6] = 5  # one class never predicted
  assert metrics.accuracy(pred, gold) == pytest.approx(accuracy_score(gold, pred))
  assert metrics.macro_f1(pred, gold, 7) == pytest.approx(
      f1_score(gold, pred, average="macro", labels=list(range(7)), zero_division=0))

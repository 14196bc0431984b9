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
  (
    [["B-noun_other", "I-noun_other", "B-noun_bookname"], ["O", "O"]],
    [["B-noun_other", "I-noun_other", "I-noun_bookname"], ["B-noun_other", "O"]],
  ),
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
    f1_score(gold, pred, average="macro", labels=list(range(7)), zero_division=0)
  )


def test_translation_scores_count_characters():
  """Hand-counted: hypothesis 我们走吧 against reference 咱们走吧。 shares 3 of its 4 characters
  with the reference's 5, 2 of its 3 bigrams with the reference's 4, and the LCS 们走吧 (3);
  TER: one substitution and one insertion over 5 reference characters."""
  scores = metrics.translation_scores(["我们走吧"], ["咱们走吧。"])
  f1 = lambda p, r: 2 * p * r / (p + r)
  assert scores["rouge1"] == pytest.approx(f1(3 / 4, 3 / 5))
  assert scores["rouge2"] == pytest.approx(f1(2 / 3, 2 / 4))
  assert scores["rougeL"] == pytest.approx(f1(3 / 4, 3 / 5))
  # The toolkit's ROUGE (the `rouge` package) counts distinct n-grams: a repeated character
  # counts once, so 好好好 against 好 is a perfect unigram match (rouge-score would give P 1/3).
  assert metrics.translation_scores(["好好好"], ["好"])["rouge1"] == pytest.approx(1.0)
  assert scores["ter"] == pytest.approx(2 / 5)
  # BLEU over characters: 3/4 unigrams, 2/3 bigrams, 1/2 trigrams, no 4-gram (sacrebleu's
  # 'exp' smoothing halves it: 1/2 of 1 count over 1), brevity penalty exp(1 - 5/4).
  precisions = [3 / 4, 2 / 3, 1 / 2, 1 / 2]
  expected = np.exp(1 - 5 / 4) * np.exp(np.mean(np.log(precisions)))
  assert scores["bleu"] == pytest.approx(expected, rel=1e-6)
  perfect = metrics.translation_scores(["你不要再说了。", "走"], ["你不要再说了。", "走"])
  assert perfect["bleu"] == pytest.approx(1.0) and perfect["chrf"] == pytest.approx(1.0) and perfect["ter"] == 0


def test_translation_scores_reject_unequal_lengths():
  with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
    metrics.translation_scores(["a", "b"], ["a"])

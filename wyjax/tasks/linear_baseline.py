"""The linear baseline beside the majority class: character n-gram TF-IDF + logistic regression.

It shows on the leaderboard whether a fine-tuned model is worth anything: a tiny model can
score far above the majority class and still below a bag of character n-grams. It reads what
the model reads, each example's features from the task's own featurize (input_ids: one token
per character, [SEP] between the two texts of a pair, the same truncation) and their labels, so
a task needs nothing new: every task with a "sequence" head gets it. Its predicted classes go
through the task's decode (one-hot logits) and score, so its metrics are the task's own.

Fixed settings: TF-IDF over the token 1–3-grams found in at least 2 train examples, with
sublinear term frequency (1 + log count), fitted on the train split (its examples without a
label left out); multinomial logistic regression, C=10, Newton-CG (deterministic), at most
1,000 iterations; scored on dev. On a 2-core CPU: 1–2 s for TLC's 3,424 lines, 16–40 s for
IFLYTEK's 3,024 and 119 classes (leaving out the rare n-grams makes that 4× faster, at ±1 point).
"""
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task

NGRAMS = 3  # token 1- to NGRAMS-grams
MIN_EXAMPLES = 2  # an n-gram counts when at least this many train examples have it
C = 10.0  # inverse L2 strength
NOTE = (f"character 1–{NGRAMS}-grams of the model's input tokens (those in ≥ {MIN_EXAMPLES} train examples), TF-IDF "
        f"with sublinear tf, and multinomial logistic regression (C={C:g}), fitted on the train split; on the tasks "
        "with a sequence head (classification)")


def _ngrams(ids: np.ndarray) -> list[tuple[int, ...]]:
  ids = ids.tolist()
  return [tuple(ids[i:i + n]) for n in range(1, NGRAMS + 1) for i in range(len(ids) - n + 1)]


def predicted_classes(train_features, dev_features) -> np.ndarray:
  """The label index predicted for every dev example, from the labelled train examples."""
  labelled = [f for f in train_features if int(f["label"]) != IGNORE]
  gold = np.array([int(f["label"]) for f in labelled])
  if len(np.unique(gold)) == 1:  # nothing to tell apart (a toy split)
    return np.full(len(dev_features), gold[0])
  vectorizer = TfidfVectorizer(analyzer=_ngrams, min_df=MIN_EXAMPLES, sublinear_tf=True)
  train = vectorizer.fit_transform([f["input_ids"] for f in labelled])
  model = LogisticRegression(C=C, solver="newton-cg", max_iter=1000).fit(train, gold)
  return model.predict(vectorizer.transform([f["input_ids"] for f in dev_features]))


def dev_metrics(task: Task, train, dev) -> dict | None:
  """The dev metrics of the linear baseline, train and dev each (examples, features); None
  for a task whose head is not "sequence"."""
  if task.head != "sequence":
    return None
  examples, features = dev
  logits = np.eye(len(task.labels))[predicted_classes(train[1], features)]
  return task.score(examples, [task.decode(e, f, l) for e, f, l in zip(examples, features, logits)])

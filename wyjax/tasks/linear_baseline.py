"""The linear baseline beside the majority class: logistic regression over character n-grams.

It reads what the model reads (the task's featurize: one token per character, the same truncation) and scores
through the task's decode and score, on dev and, where it has gold labels, test.

- Sequence heads: TF-IDF over token 1–NGRAMS-grams, sublinear tf; multinomial logistic regression, Newton-CG.
- Token heads: each labelled character, by the 1–TAG_NGRAMS-grams within WINDOW tokens either side, keyed by
  offset; logistic regression, SAGA with a fixed seed, on at most MAX_CHARACTERS characters.

The predictions are cached under a hash of what decides them, so a rerun on the same data only scores them.
"""

import hashlib
import importlib.metadata
import logging
import pathlib
import zipfile

import numpy as np

from wyjax.core import storage
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task

NGRAMS = 3  # sequence heads: token 1- to NGRAMS-grams
MIN_EXAMPLES = 2  # an n-gram counts when at least this many train examples (tagging: characters) have it
C = 10.0  # sequence heads' inverse L2 strength
WINDOW, TAG_NGRAMS, TAG_C = 3, 3, 1.0  # token heads: tokens either side, n-gram length, inverse L2 strength
MAX_CHARACTERS = 300_000  # token heads: labelled train characters fitted on, at most
NOTE = (
  f"logistic regression over character n-grams of the model's input tokens, fitted on the train split; "
  f"classification: TF-IDF of each text's 1–{NGRAMS}-grams (those in ≥ {MIN_EXAMPLES} train examples, "
  f"sublinear tf; C={C:g}); tagging: each character's 1–{TAG_NGRAMS}-grams within {WINDOW} tokens either "
  f"side, keyed by offset (those in ≥ {MIN_EXAMPLES} train characters; C={TAG_C:g}; at most "
  f"{MAX_CHARACTERS:,} train characters)"
)


def _ngrams(ids: np.ndarray) -> list[tuple[int, ...]]:
  ids = ids.tolist()
  return [tuple(ids[i : i + n]) for n in range(1, NGRAMS + 1) for i in range(len(ids) - n + 1)]


def _gold(features) -> np.ndarray:
  return np.asarray(features["label"] if "label" in features else features["labels"])


def predicted_classes(train_features, dev_features) -> np.ndarray:
  """Sequence heads: the label index predicted for every dev example, from the labelled train examples."""
  from sklearn.feature_extraction.text import TfidfVectorizer  # pylint: disable=g-import-not-at-top
  from sklearn.linear_model import LogisticRegression  # pylint: disable=g-import-not-at-top

  labelled = [f for f in train_features if int(f["label"]) != IGNORE]
  gold = np.array([int(f["label"]) for f in labelled])
  if len(np.unique(gold)) == 1:  # nothing to tell apart (a toy split)
    return np.full(len(dev_features), gold[0])
  vectorizer = TfidfVectorizer(analyzer=_ngrams, min_df=MIN_EXAMPLES, sublinear_tf=True)
  train = vectorizer.fit_transform([f["input_ids"] for f in labelled])
  model = LogisticRegression(C=C, solver="newton-cg", max_iter=1000).fit(train, gold)
  return model.predict(vectorizer.transform([f["input_ids"] for f in dev_features]))


def window_keys(features, base: int) -> np.ndarray:
  """[tokens of all examples, templates] int64: one key per (offset, n-gram) template of each token's window.

  A key holds the n-gram's ids and the template in one number. In the n-grams 0 stands past a text's ends, id + 1
  for a token, and base - 1 for an id the train split never had (> base - 3).
  """
  ids = [np.minimum(np.asarray(f["input_ids"], np.int64) + 1, base - 1) for f in features]
  edge = np.zeros(WINDOW, np.int64)
  stream = np.concatenate([part for x in ids for part in (edge, x)] + [edge])
  lengths = [len(x) for x in ids]
  positions = np.arange(sum(lengths)) + np.repeat(WINDOW * np.arange(1, len(ids) + 1), lengths)  # in stream
  templates = [(offset, n) for n in range(1, TAG_NGRAMS + 1) for offset in range(-WINDOW, WINDOW - n + 2)]
  keys = np.empty((len(positions), len(templates)), np.int64)
  for t, (offset, n) in enumerate(templates):
    code = np.zeros(len(positions), np.int64)
    for j in range(n):
      code = code * base + stream[positions + offset + j]
    keys[:, t] = code * len(templates) + t
  return keys


def _one_hot_matrix(keys: np.ndarray, vocabulary: np.ndarray):
  """Rows of keys as binary rows of a SciPy CSR matrix over the sorted vocabulary (other keys dropped)."""
  import scipy.sparse  # pylint: disable=g-import-not-at-top

  index = np.minimum(np.searchsorted(vocabulary, keys), len(vocabulary) - 1)
  known = vocabulary[index] == keys
  rows = np.broadcast_to(np.arange(len(keys))[:, None], keys.shape)
  return scipy.sparse.csr_matrix(
    (np.ones(known.sum(), np.float32), (rows[known], index[known])), shape=(len(keys), len(vocabulary))
  )


def fitted_tagger(train_features):
  """Token heads: features → one class per token of all of them, in order, fitted on the labelled characters.

  At most MAX_CHARACTERS of them: whole examples sampled with a fixed seed.
  """
  from sklearn.linear_model import LogisticRegression  # pylint: disable=g-import-not-at-top

  order = np.random.default_rng(0).permutation(len(train_features))
  characters = np.cumsum([np.sum(_gold(train_features[i]) != IGNORE) for i in order])
  count = max(1, int(np.searchsorted(characters, MAX_CHARACTERS, side="right")))
  if count < len(order):
    logging.warning(
      "linear baseline: fitted on %d of the %d train examples (%d of %d labelled characters)",
      count,
      len(order),
      characters[count - 1],
      characters[-1],
    )
  kept = [train_features[i] for i in np.sort(order[:count])]
  base = max(int(np.max(f["input_ids"])) for f in kept) + 3
  gold = np.concatenate([_gold(f) for f in kept])
  keys = window_keys(kept, base)[gold != IGNORE]
  gold = gold[gold != IGNORE]
  found, times = np.unique(keys, return_counts=True)
  vocabulary = found[times >= MIN_EXAMPLES]
  classes = np.unique(gold)
  model = None
  if len(classes) > 1:
    model = LogisticRegression(C=TAG_C, solver="saga", tol=1e-3, max_iter=200, random_state=0)
    model.fit(_one_hot_matrix(keys, vocabulary), gold)

  def predict(features) -> np.ndarray:
    if model is None:
      return np.full(sum(len(f["input_ids"]) for f in features), classes[0])
    return model.predict(_one_hot_matrix(window_keys(features, base), vocabulary))

  return predict


def scores(task: Task, data: dict) -> dict | None:
  """{"dev": metrics, "test": metrics or None} of the baseline fitted on data's train split.

  data: wyjax.train.task_model.load_task_data's splits. test is None where absent or without gold labels.
  Returns None for a head it does not cover (multiple choice, spans, generation).
  """
  if task.head not in ("sequence", "token"):
    return None
  splits = [s for s in ("dev", "test") if s in data and any(np.any(_gold(f) != IGNORE) for f in data[s][1])]
  train = data["train"][1]
  out = {"dev": None, "test": None}
  if not splits:
    return out
  per_split = _predictions(task.head, train, [data[s][1] for s in splits])
  eye = np.eye(len(task.labels))
  for split, predicted in zip(splits, per_split):
    examples, features = data[split]
    out[split] = task.score(examples, [task.decode(e, f, eye[p]) for e, f, p in zip(examples, features, predicted)])
  return out


def _fitted_predictions(head: str, train, evaluated: list[list]) -> list[np.ndarray]:
  """Each evaluated split's predicted classes: one per example (token heads: per token, in one array)."""
  if head == "sequence":
    predicted = predicted_classes(train, [f for features in evaluated for f in features])
    return np.split(predicted, np.cumsum([len(features) for features in evaluated])[:-1])
  predict = fitted_tagger(train)
  return [predict(features) for features in evaluated]


def _key(head: str, train, evaluated: list[list]) -> str:
  digest = hashlib.sha256(pathlib.Path(__file__).read_bytes())
  digest.update(" ".join([head] + [importlib.metadata.version(p) for p in ("scikit-learn", "scipy", "numpy")]).encode())
  for features, with_gold in [(train, True)] + [(split, False) for split in evaluated]:
    digest.update(np.int64(len(features)).tobytes())
    for f in features:
      ids = np.asarray(f["input_ids"], np.int64)
      digest.update(np.int64(ids.size).tobytes() + ids.tobytes())
      if with_gold:
        digest.update(np.asarray(_gold(f), np.int64).tobytes())
  return digest.hexdigest()


def _predictions(head: str, train, evaluated: list[list]) -> list[np.ndarray]:
  """_fitted_predictions, from wyjax's cache where an earlier run fitted the same; one array per example."""
  path = storage.cache_dir() / "linear_baseline" / f"{_key(head, train, evaluated)}.npz"
  try:
    with np.load(path) as cached:
      per_split = [cached[str(i)] for i in range(len(evaluated))]
  except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):  # not there yet, or unreadable: fit again
    per_split = _fitted_predictions(head, train, evaluated)
    path.parent.mkdir(parents=True, exist_ok=True)
    with storage.written_whole(path, "wb") as f:
      np.savez(f, **{str(i): predicted for i, predicted in enumerate(per_split)})
  if head == "sequence":
    return per_split
  return [
    np.split(predicted, np.cumsum([len(f["input_ids"]) for f in features])[:-1])
    for predicted, features in zip(per_split, evaluated)
  ]

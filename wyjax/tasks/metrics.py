"""Task metrics as the WYWEB paper computes them.

- accuracy, and macro-F1 over the task's label set;
- entity-level micro precision/recall/F1 over BIO/BIOES chunks by seqeval's default (conlleval) rules: an I-X
  after O or after another type starts a chunk;
- PUNC F1: micro over positions whose label is not O (equal to seqeval's F1 there);
- translation: sacrebleu's BLEU, chrF2 and TER, and ROUGE by the `rouge` package the toolkit calls;
- CMRC 2018's exact match and F1, as its official cmrc2018_evaluate.py computes them.

tests/tasks/metrics_test.py checks the written-out ones against seqeval and scikit-learn.
"""

from collections.abc import Sequence

import numpy as np
import rouge
import sacrebleu


def accuracy(predictions, labels) -> float:
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  return float((predictions == labels).mean()) if labels.size else 0.0


def macro_f1(predictions, labels, num_classes: int) -> float:
  """Mean over all classes of one-vs-rest F1 (0 for a class never predicted nor present)."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  scores = []
  for c in range(num_classes):
    tp = np.sum((predictions == c) & (labels == c))
    fp = np.sum((predictions == c) & (labels != c))
    fn = np.sum((predictions != c) & (labels == c))
    scores.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
  return float(np.mean(scores))


def chunks(tags: Sequence[str]) -> set[tuple[str, int, int]]:
  """(type, start, end inclusive) of each chunk in one tag sequence, seqeval's default rules."""
  found, start, kind = set(), None, None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, _, tag_type = tag.partition("-")
    ends = start is not None and (prefix in ("B", "S", "O") or tag_type != kind or prefix not in ("I", "E"))
    if ends:
      found.add((kind, start, i - 1))
      start = kind = None
    if prefix in ("B", "S") or (prefix in ("I", "E") and start is None):
      start, kind = i, tag_type
    if prefix in ("S", "E") and start is not None:
      found.add((kind, start, i))
      start = kind = None
  return found


def entity_scores(predictions: Sequence[Sequence[str]], labels: Sequence[Sequence[str]]) -> dict:
  """Micro precision, recall, F1 over chunks, and F1 per entity type."""
  tp = n_pred = n_gold = 0
  per_type = {}
  for pred, gold in zip(predictions, labels, strict=True):
    p, g = chunks(pred), chunks(gold)
    tp += len(p & g)
    n_pred += len(p)
    n_gold += len(g)
    for kind in {c[0] for c in p | g}:
      counts = per_type.setdefault(kind, [0, 0, 0])
      counts[0] += len({c for c in p & g if c[0] == kind})
      counts[1] += len({c for c in p if c[0] == kind})
      counts[2] += len({c for c in g if c[0] == kind})

  def prf(tp, n_pred, n_gold):
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)

  precision, recall, f1 = prf(tp, n_pred, n_gold)
  return {
    "precision": precision,
    "recall": recall,
    "f1": f1,
    **{f"f1_{kind}": prf(*counts)[2] for kind, counts in sorted(per_type.items())},
  }


def punctuation_f1(predictions, labels, outside: int = 0) -> dict:
  """Micro precision/recall/F1 over positions whose label is not `outside` (O)."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  tp = np.sum((predictions == labels) & (labels != outside))
  n_pred, n_gold = np.sum(predictions != outside), np.sum(labels != outside)
  precision = tp / n_pred if n_pred else 0.0
  recall = tp / n_gold if n_gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


def _spaced(text: str) -> str:
  """The characters of text (whitespace dropped) joined by single spaces."""
  return " ".join(c for c in text if not c.isspace())


def rouge_f(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
  """The toolkit's ROUGE-1/2/L F: `rouge.Rouge().get_scores` on space-separated tokens, averaged over sentences.

  That package refuses an empty hypothesis; one scores 0 here.
  """
  scored = [i for i, h in enumerate(hypotheses) if h]
  per_sentence = (
    rouge.Rouge().get_scores([hypotheses[i] for i in scored], [references[i] for i in scored]) if scored else []
  )
  names = {"rouge1": "rouge-1", "rouge2": "rouge-2", "rougeL": "rouge-l"}
  return {
    name: sum(s[key]["f"] for s in per_sentence) / len(hypotheses) if hypotheses else 0.0 for name, key in names.items()
  }


def translation_scores(hypotheses: Sequence[str], references: Sequence[str], *, tokenized: bool = False) -> dict:
  """Corpus BLEU, chrF2, TER and the toolkit's ROUGE-1/2/L F, all in [0, 1] (TER: lower is better).

  BLEU uses sacrebleu's tokenize='zh' (one token per CJK character). TER and ROUGE split on spaces: texts are
  spaced into characters first, unless `tokenized` says they are space-separated tokens already (as the toolkit's
  teacher-forced strings are).
  """
  hypotheses, references = list(hypotheses), list(references)
  if len(hypotheses) != len(references):
    raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
  spaced = (lambda texts: texts) if tokenized else (lambda texts: [_spaced(t) for t in texts])
  return {
    "bleu": sacrebleu.BLEU(tokenize="zh").corpus_score(hypotheses, [references]).score / 100,
    "chrf": sacrebleu.CHRF().corpus_score(hypotheses, [references]).score / 100,
    "ter": sacrebleu.TER().corpus_score(spaced(hypotheses), [spaced(references)]).score / 100,
    **rouge_f(spaced(hypotheses), spaced(references)),
  }


# The official evaluation's punctuation (cmrc2018_evaluate.py's sp_char): its '……' entry is
# two characters and never equals one, so '…' is kept, as there.
CMRC_PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")


def _words(text: str) -> list[str]:
  """NLTK's word_tokenize, as the official script splits the runs between Chinese characters.

  Without its sentence splitter (preserve_line), which needs punkt data; the two differ only on a sentence-ending
  period inside a run. NLTK is imported here, as only CMRC 2018's scores need it (it takes seconds).
  """
  from nltk.tokenize import word_tokenize

  return word_tokenize(text, preserve_line=True)


def cmrc_segments(text: str) -> list[str]:
  """The official mixed segmentation, punctuation removed: lower case, each Chinese character a segment.

  Chinese characters are U+4E00–U+9FA5; the runs between them are split by NLTK's tokenizer ('364.6', '2,400' and
  "n't" are one word each).
  """
  segments, run = [], ""
  for char in text.lower().strip():
    if char in CMRC_PUNCTUATION:
      continue
    if "\u4e00" <= char <= "\u9fa5":
      segments += _words(run) + [char]
      run = ""
    else:
      run += char
  return segments + _words(run)


def _longest_common_run(a: list[str], b: list[str]) -> int:
  """Length of the longest common contiguous run of segments (the official find_lcs)."""
  best, previous = 0, [0] * (len(b) + 1)
  for x in a:
    current = [0] * (len(b) + 1)
    for j, y in enumerate(b):
      if x == y:
        current[j + 1] = previous[j] + 1
        best = max(best, current[j + 1])
    previous = current
  return best


def _without_punctuation(text: str) -> str:
  return "".join(c for c in text.lower().strip() if c not in CMRC_PUNCTUATION)


def cmrc_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict:
  """CMRC 2018's exact match and F1 (×1, not ×100), and their mean, the official AVERAGE.

  Each is the maximum over the references, averaged over the questions.
  """
  em = f1 = 0.0
  for prediction, answers in zip(predictions, references, strict=True):
    em += max(_without_punctuation(a) == _without_punctuation(prediction) for a in answers)
    predicted = cmrc_segments(prediction)
    best = 0.0
    for answer in answers:
      gold = cmrc_segments(answer)
      common = _longest_common_run(gold, predicted)
      if common:
        precision, recall = common / len(predicted), common / len(gold)
        best = max(best, 2 * precision * recall / (precision + recall))
    f1 += best
  n = max(len(predictions), 1)
  return {"em": em / n, "f1": f1 / n, "average": (em + f1) / (2 * n)}

"""Each benchmark's number as its own evaluation computes it, checked against independent
implementations of the upstream rules (scikit-learn, or the rule written out here), and the
published folders read as released."""

import json
import shutil

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from wyjax.data import tokenizer as tk
from wyjax.tasks import cclue, cclue_files, ccpm, datasets, leaderboard, wyweb, wyweb_files


def test_ccpm_released_test_file_with_its_empty_translation(shared_data, classical_dirs, tmp_path):
  folder = tmp_path / "ccpm"
  shutil.copytree(classical_dirs["ccpm"], folder)
  shutil.copy(shared_data / "ccpm" / "test_public.jsonl", folder / "test_public.jsonl")
  test = datasets.load_splits(ccpm.FILES, folder)["test"]
  assert len(test) == 2720
  empty = [e for e in test if not e.translation]
  assert [e.line for e in empty] == [2026] and ccpm.CLS.notes(test) == [
    "1 record(s) with an empty translation (lines [2026]), predicted from the lines alone"
  ]
  tokenizer = tk.Tokenizer(tk.build_vocab(c for e in empty for c in e.choices))
  features, _ = ccpm.CLS.featurize_all(empty, tokenizer, 128, "test")
  assert features[0]["input_ids"].shape[0] == 4  # four pairs: [CLS] [SEP] line [SEP]
  labelled = tmp_path / "labelled"
  labelled.mkdir()
  (labelled / "valid.jsonl").write_text('{"translation": " ", "choices": ["a", "b", "c", "d"], "answer": 1}\n')
  with pytest.raises(ValueError, match=r"valid\.jsonl:1: empty translation"):
    ccpm.read_split(labelled, "dev")


def test_cclue_ner_published_file_names(shared_data, tmp_path):
  """data_ner/ as C-CLUE's code names it: source/target, dev/dev-lable, test1/test_tgt."""
  source = shared_data / "cclue" / "ner"
  lines = lambda name, rows: "\n".join((source / name).read_text(encoding="utf-8").split("\n")[rows]) + "\n"
  published = (
    ("source.txt", "train.txt", slice(0, 30)),
    ("target.txt", "train-label.txt", slice(0, 30)),
    ("dev.txt", "dev.txt", slice(0, 10)),
    ("dev-lable.txt", "dev-label.txt", slice(0, 10)),
    ("test1.txt", "dev.txt", slice(10, 20)),
    ("test_tgt.txt", "dev-label.txt", slice(10, 20)),
  )
  for name, original, rows in published:
    (tmp_path / name).write_text(lines(original, rows), encoding="utf-8")
  splits = datasets.load_splits(cclue.NER_FOLDER, tmp_path)
  assert {k: len(v) for k, v in splits.items()} == {"train": 30, "dev": 10, "test": 10}
  assert all(e.tagged for e in splits["test"])  # test_tgt.txt: the test split is scored
  expected = cclue_files.read_ner(source / "dev.txt", source / "dev-label.txt")[10:20]
  assert [(e.text, e.spans) for e in splits["test"]] == [(e.text, e.spans) for e in expected]


def test_cclue_ner_token_macro_scores_equal_scikit_learn():
  """run_NER.py: tf_metrics' macro precision/recall/F1 over label ids 1-6 (B/I-LOC, ORG, PER)."""
  rng = np.random.default_rng(0)
  labels = cclue_files.NER_LABELS
  gold = [tuple(labels[i] for i in rng.integers(0, len(labels), n)) for n in (40, 7, 25)]
  predicted = [tuple(t if rng.random() < 0.5 else labels[rng.integers(0, len(labels))] for t in g) for g in gold]
  ours = cclue.token_macro_scores(predicted, gold)
  flat = lambda tags: [t for sentence in tags for t in sentence]
  theirs = precision_recall_fscore_support(
    flat(gold), flat(predicted), labels=list(cclue_files.SCORED_NER_LABELS), average="macro", zero_division=0
  )
  assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx(theirs[:3])


def evaluate_labeling(gold_lines: list[str], predicted_lines: list[str]) -> tuple[float, float, float]:
  """evaluate_labeling.py's rules, written out: texts keyed by text (a later line wins), gold
  spo_list one dict, predicted spo_list a list; triples (subject, predicate, object) with
  entities lower-cased and 《》 stripped; only gold texts count."""
  strip = lambda s: s.lower().replace("《", "").replace("》", "")
  gold, predicted = {}, {}
  for line in gold_lines:
    record = json.loads(line)
    spo = record["spo_list"]
    gold[record["text"]] = {(strip(spo["subject"]), spo["predicate"], strip(spo["object"]))}
  for line in predicted_lines:
    record = json.loads(line)
    predicted[record["text"]] = {
      (strip(t.get("subject")), t["predicate"], strip(t.get("object"))) for t in record["spo_list"]
    }
  correct = n_predicted = n_gold = 0
  for text, triples in gold.items():
    found = predicted.get(text, set())
    correct += len(triples & found)
    n_predicted += len(found)
    n_gold += len(triples)
  precision = correct / n_predicted if n_predicted else 0.0
  recall = correct / n_gold if n_gold else 0.0
  return precision, recall, 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def test_given_entity_triples_scored_asevaluate_labeling(classical_dirs, tmp_path):
  gold_file = classical_dirs["cclue_re"] / "dev_data.json"
  examples = cclue_files.read_relations(gold_file)
  # A repeated text with another triple: C-CLUE keeps the later line (in gold and predictions).
  e = examples[0]
  examples.append(cclue_files.RelationExample(99, e.text, e.object, e.object_type, e.subject, e.subject_type, "兄"))
  gold_lines = gold_file.read_text(encoding="utf-8").splitlines() + [
    json.dumps(
      {
        "text": e.text,
        "spo_list": {
          "predicate": "兄",
          "object_type": e.subject_type,
          "subject_type": e.object_type,
          "object": e.subject,
          "subject": e.object,
        },
      },
      ensure_ascii=False,
    )
  ]
  rng = np.random.default_rng(1)
  predictions = [x.predicate if rng.random() < 0.6 else cclue_files.PREDICATES[rng.integers(25)] for x in examples]
  path = tmp_path / "spo.json"
  path.write_text(
    "".join(line + "\n" for line in cclue.RE_GIVEN_ENTITIES.submission(examples, predictions)), encoding="utf-8"
  )
  expected = evaluate_labeling(gold_lines, path.read_text(encoding="utf-8").splitlines())
  scores = cclue.RE_GIVEN_ENTITIES.score(examples, predictions)
  assert (scores["triple_precision"], scores["triple_recall"], scores["triple_f1"]) == pytest.approx(expected)
  assert 0 < expected[2] < 1


def test_fspc_toolkit_metrics_over_poems_and_lines(shared_data):
  poems = wyweb_files.read_split("fspc", shared_data / "wyweb" / "fspc", "dev")[:200]
  examples = wyweb.fspc_scoring_set(poems)
  assert len(examples) == 5 * len(poems) and all(len(e.lines) == 1 for e in examples[len(poems) :])
  rng = np.random.default_rng(2)
  predictions = [e.holistic if rng.random() < 0.5 else wyweb_files.FSPC_SENTIMENTS[rng.integers(5)] for e in examples]
  scores = wyweb.FSPC.score(examples, predictions)
  ids = lambda values: [wyweb_files.FSPC_SENTIMENTS.index(v) for v in values]
  gold, predicted = ids(e.holistic for e in examples), ids(predictions)
  assert scores["accuracy"] == pytest.approx(np.mean(np.equal(gold, predicted)))
  # The toolkit's macro-F1: label ids range(10), the five unused ones scoring 0.
  assert scores["macro_f1"] == pytest.approx(
    f1_score(gold, predicted, labels=list(range(10)), average="macro", zero_division=0)
  )
  n = len(poems)
  assert scores["poem_accuracy"] == pytest.approx(np.mean(np.equal(gold[:n], predicted[:n])))
  assert scores["poem_macro_f1"] == pytest.approx(
    f1_score(gold[:n], predicted[:n], labels=list(range(5)), average="macro", zero_division=0)
  )


def test_punc_toolkit_cut_scores_the_first_510_characters():
  text = "天" * 600
  gold = ["O"] * 600
  gold[100], gold[550] = "S-，", "S-。"
  example = wyweb_files.PuncExample(1, text, tuple(gold))
  predicted = ["O"] * 600
  predicted[100] = "S-，"  # the mark after character 550 is missed
  assert wyweb.PUNC.score([example], [predicted])["recall"] == pytest.approx(1 / 2)
  cut = wyweb.punc_task(wyweb.TOOLKIT_PUNC_CHARS).score([example], [predicted])
  assert cut["recall"] == 1.0 and cut["precision"] == 1.0


def test_leaderboard_averages_wyweb_without_wywmt(tmp_path):
  result = lambda score: {
    "dev": {"m": score},
    "main_metric": "m",
    "majority_baseline": {"m": 0.0},
    "dev_mean": score,
    "dev_std": 0.0,
    "test": None,
  }
  scores = {"punc": 0.5, "glner": 0.7, "gjc": 0.9, "wywmt": 0.1, "ccpm": 0.2}
  board = leaderboard.write(tmp_path, "m", {t: result(s) for t, s in scores.items()}, {"irc": "ValueError: bad"})
  assert board["average"] == pytest.approx((0.5 + 0.7 + 0.9) / 3)
  assert board["failed"] == {"irc": "ValueError: bad"}
  md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
  assert "| m | 70.00 | 50.00 | 70.00 | 90.00 | 10.00 |" in md and "- IRC: ValueError: bad" in md

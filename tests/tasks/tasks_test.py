"""Each task's features, decoding, metrics and submission file, checked with an oracle: logits
that put all weight on the gold label must decode to the gold answer, score perfectly, and
write a submission that the task's own reader parses back to the same answers."""
import json
import subprocess
import sys

import numpy as np
import pytest

from wyjax.data import tokenizer as tk
from wyjax.tasks import batching, datasets, tasks, wyweb
from wyjax.tasks.tagging import IGNORE
from wyjax.train.finetune import featurize, write_predictions


@pytest.fixture(scope="module")
def task_dirs(shared_data, tmp_path_factory):
  """The seven shared WYWEB tasks, and GJC and PUNC built from the Daizhige sample."""
  dirs = {t: shared_data / "wyweb" / t for t in ("tlc", "glner", "fspc", "xuci", "irc", "wywrc", "wywmt")}
  built = tmp_path_factory.mktemp("built")
  for task in ("gjc", "punc"):
    subprocess.run([sys.executable, "-m", "wyjax.data", f"build-{task}",
                    f"--daizhige={shared_data / 'daizhige_sample'}", f"--out={built / task}",
                    "--dev_fraction=0.3", "--test_fraction=0.2"], check=True,
                   capture_output=True)
    dirs[task] = built / task
  return dirs


def _oracle_logits(task: tasks.Task, features: dict) -> np.ndarray:
  gold = features["labels"] if "labels" in features else features["label"]
  return np.eye(len(task.labels), dtype=np.float32)[np.where(gold == IGNORE, 0, gold)] * 10.0


@pytest.mark.parametrize("name", sorted(tasks.TASKS))
def test_oracle_logits_score_perfectly_and_submissions_parse_back(task_dirs, name, tmp_path):
  task = tasks.TASKS[name]
  examples = datasets.load_splits(name, task_dirs[name])["dev"][:300]
  t2s = name != "wywmt"  # WYWMT's oracle must write the reference's own characters back
  tokenizer = tk.Tokenizer(tk.build_vocab((t for e in examples for t in _strings(e)), t2s=t2s), t2s=t2s)
  features, truncated = featurize(task, examples, tokenizer, task.max_length, "dev")
  if task.head == "prefix_lm":  # the oracle generates exactly the next-token labels
    outputs = [tokenizer.decode(f["labels"][f["labels"] != IGNORE]) for f in features]
  else:
    outputs = [_oracle_logits(task, f) for f in features]
  predictions = [task.decode(e, f, o) for e, f, o in zip(examples, features, outputs)]
  scores = task.score(examples, predictions)
  assert scores[task.main_metric] == pytest.approx(1.0, abs=1e-12), scores

  path = tmp_path / f"dev.{task.submission_format}"
  write_predictions(task, path, examples, predictions)
  if name == "fspc":  # the submission carries the holistic sentiment only
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["sentiments"]["holistic"] for r in records] == [e.holistic for e in examples]
    return
  reread = wyweb.READERS[name](path)
  if name == "wywmt":
    assert [(e.source, e.target) for e in reread] == [(e.source, p) for e, p in zip(examples, predictions)]
    return
  strip_line = lambda e: {k: v for k, v in vars(e).items() if k != "line"}
  assert [strip_line(e) for e in reread] == [strip_line(e) for e in examples]


def _strings(example):
  for value in vars(example).values():
    if isinstance(value, str):
      yield value
    elif isinstance(value, tuple) and value and isinstance(value[0], str):
      yield from value


def test_tlc_majority_baseline_matches_the_published_numbers(shared_data):
  # ../shared/data/README.md: majority class 0.424 (period) and 0.148 (dynasty) on this dev split.
  splits = datasets.load_splits("tlc", shared_data / "wyweb" / "tlc")
  baseline = tasks.majority_baseline(tasks.TLC, splits["train"], splits["dev"])
  assert round(baseline["period_accuracy"], 3) == 0.424
  assert round(baseline["accuracy"], 3) == 0.148


def test_wywrc_truncation_keeps_question_and_options(shared_data):
  examples = datasets.load_splits("wywrc", shared_data / "wyweb" / "wywrc")["dev"]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  cut_any = False
  for e in examples:
    features, truncated = tasks.WYWRC.featurize(e, tokenizer, 512)
    ids = features["input_ids"]
    assert ids.shape[0] == 4 and ids.shape[1] <= 512
    question, options = tokenizer.encode_chars(e.question)[0], [tokenizer.encode_chars(o)[0] for o in e.options]
    article = len(tokenizer.encode_chars(e.context)[0])
    kept = min(article, 512 - 4 - len(question) - max(map(len, options)))
    for row, option in zip(ids, options):
      real = row[row != tokenizer.pad_id]
      assert list(real[kept + 2:kept + 2 + len(question)]) == list(question)  # question intact
      assert list(real[-len(option) - 1:-1]) == list(option) if len(option) else True
    assert truncated == article - kept
    cut_any |= truncated > 0
  assert cut_any


def test_xuci_span_vectors_point_at_the_target_word(shared_data):
  examples = datasets.load_splits("xuci", shared_data / "wyweb" / "xuci")["dev"]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  for e in examples:
    features, _ = tasks.XUCI.featurize(e, tokenizer, 96)
    for row, mask, text, (start, end) in zip(features["input_ids"], features["span_mask"],
                                             (e.text_a, e.text_b), (e.span_a, e.span_b)):
      assert list(row[mask > 0]) == list(tokenizer.encode_chars(text[start:end + 1])[0])


def test_collate_pads_to_buckets_and_fills_the_batch():
  items = [{"input_ids": np.array([2, 7, 3], np.int32), "labels": np.array([IGNORE, 1, IGNORE], np.int32)},
           {"input_ids": np.arange(40, dtype=np.int32), "labels": np.zeros(40, np.int32)}]
  batch = batching.collate(items, batch_size=4, lengths=batching.buckets(512), pad_id=0)
  assert batch["input_ids"].shape == (4, 48) and batch["labels"].shape == (4, 48)
  assert (batch["labels"][0, 3:] == IGNORE).all() and (batch["labels"][2:] == IGNORE).all()
  assert list(batch["weight"]) == [1, 1, 0, 0]
  assert batching.buckets(512) == (32, 48, 64, 96, 128, 192, 256, 384, 512)


def test_wywmt_features_are_the_prefix_lm_layout(shared_data):
  examples = datasets.load_splits("wywmt", shared_data / "wyweb" / "wywmt")["dev"][:200]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  for e in examples:
    source, target = tokenizer.encode_chars(e.source)[0], tokenizer.encode_chars(e.target)[0]
    features, cut = tasks.WYWMT.featurize(e, tokenizer, 512)
    ids, types, labels = features["input_ids"], features["token_type_ids"], features["labels"]
    assert cut == 0
    assert list(ids) == [tokenizer.cls_id, *source, tokenizer.sep_id, *target, tokenizer.sep_id]
    assert list(types) == [0] * (len(source) + 2) + [1] * (len(target) + 1)
    # Predicted: the target and its [SEP], each from the token before it.
    assert list(labels[labels != IGNORE]) == [*target, tokenizer.sep_id]
    assert (labels[:len(source) + 1] == IGNORE).all() and labels[-1] == IGNORE


def test_wywmt_truncation_trims_the_longer_side():
  example = wyweb.MtExample(1, "天" * 30, "地" * 5)
  tokenizer = tk.Tokenizer(tk.build_vocab(["天地"]))
  features, cut = tasks.WYWMT.featurize(example, tokenizer, 20)
  ids = list(features["input_ids"])
  assert len(ids) == 20 and cut == 18
  assert ids.count(tokenizer.token_to_id["天"]) == 12 and ids.count(tokenizer.token_to_id["地"]) == 5
  features, cut = tasks.WYWMT.featurize(wyweb.MtExample(1, "天" * 12, "地" * 12), tokenizer, 20)
  assert cut == 7 and list(features["input_ids"]).count(tokenizer.token_to_id["天"]) == 9

"""Each task's features, decoding, metrics and submission file, checked with an oracle: logits
that put all weight on the gold label must decode to the gold answer, score perfectly, and
write a submission that the task's own reader parses back to the same answers."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.tasks.clue_test import write_pair_folders
from wyjax.data import tokenizer as tk
from wyjax.tasks import (
  aceval,
  batching,
  cclue,
  cclue_files,
  ccpm,
  clue,
  clue_reading,
  datasets,
  registry,
  wyweb,
  wyweb_files,
)
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import Task


@pytest.fixture(scope="module")
def task_dirs(shared_data, classical_dirs, tmp_path_factory):
  """The seven shared WYWEB tasks, GJC and PUNC built from the Daizhige sample, the other
  classical benchmarks' folders (tests/conftest.py), CLUE's shared folders and AFQMC and
  CMNLI written in CLUE's format."""
  dirs = {t: shared_data / "wyweb" / t for t in ("tlc", "glner", "fspc", "xuci", "irc", "wywrc", "wywmt")}
  dirs.update(classical_dirs)
  dirs.update(
    {
      t: shared_data / "clue" / t
      for t in (t.name for t in (*clue.TASKS, *clue_reading.TASKS))
      if t not in ("afqmc", "cmnli")
    }
  )
  dirs.update(write_pair_folders(shared_data, tmp_path_factory.mktemp("clue_pairs")))
  built = tmp_path_factory.mktemp("built")
  for task in ("gjc", "punc"):
    subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.tasks",
        f"build-{task}",
        f"--daizhige={shared_data / 'daizhige_sample'}",
        f"--out={built / task}",
        "--dev_fraction=0.3",
        "--test_fraction=0.2",
      ],
      check=True,
      capture_output=True,
    )
    dirs[task] = built / task
  return dirs


def _oracle_logits(task: Task, features: dict) -> np.ndarray:
  gold = features["labels"] if "labels" in features else features["label"]
  if task.head == "span":  # [windows, 2, length]: each window's labelled start and end tokens
    logits = np.zeros((*gold.shape, features["input_ids"].shape[-1]), np.float32)
    for window, (start, end) in enumerate(gold):
      logits[window, 0, start] = logits[window, 1, end] = 10.0
    return logits
  return np.eye(len(task.labels), dtype=np.float32)[np.where(gold == IGNORE, 0, gold)] * 10.0


@pytest.mark.parametrize("name", sorted(registry.TASKS))
def test_oracle_logits_score_perfectly_and_submissions_parse_back(task_dirs, name, tmp_path):
  task = registry.TASKS[name]
  splits = datasets.load_splits(task.files, task_dirs[task.files.name])
  examples = splits["dev"][:300]
  if name == "cmrc2018":  # answers longer than the decoding limit cannot be predicted whole
    examples = [e for e in examples if e.answer[1] - e.answer[0] <= clue_reading.MAX_ANSWER_TOKENS]
  t2s = name != "wywmt"  # WYWMT's oracle must write the reference's own characters back
  texts = [t for e in examples for t in _strings(e)] + [task.inserted_text]
  tokenizer = tk.Tokenizer(tk.build_vocab(texts, t2s=t2s), t2s=t2s)
  features, truncated = task.featurize_all(examples, tokenizer, task.max_length, "dev")
  if task.head == "prefix_lm":  # the oracle generates exactly the next-token labels
    outputs = [tokenizer.decode(f["labels"][f["labels"] != IGNORE]) for f in features]
  else:
    outputs = [_oracle_logits(task, f) for f in features]
  predictions = [task.decode(e, f, o) for e, f, o in zip(examples, features, outputs)]
  scores = task.score(examples, predictions)
  assert scores[task.main_metric] == pytest.approx(1.0, abs=1e-12), scores

  path = tmp_path / f"dev.{task.submission_format}"
  task.write_predictions(path, examples, predictions)
  if name == "fspc":  # the submission carries the holistic sentiment only
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["sentiments"]["holistic"] for r in records] == [e.holistic for e in examples]
    return
  if name == "aceval":  # one {subject, id, answer} per question; aceval.json is assembled from them
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["subject"], r["id"], r["answer"]) for r in records] == [
      (e.subject, e.row_id, e.answer) for e in examples
    ]
    return
  if name == "cclue_re":  # predicate_predict.txt: one predicate per record
    assert path.read_text(encoding="utf-8").splitlines() == [e.predicate for e in examples]
    return
  if name in ("cclue_re_given_entities", "cclue_spo"):  # C-CLUE triples: one record per text, spo_list a list
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in records] == list(dict.fromkeys(e.text for e in examples))
    triples = {(r["text"], t["subject"], t["predicate"], t["object"]) for r in records for t in r["spo_list"]}
    assert triples == {(e.text, e.subject, e.predicate, e.object) for e in examples}
    return
  if registry.TASKS[name].board == "clue":  # CLUE's submissions: {"id", "label"} lines, or one {id: answer} object
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if name == "cmrc2018":
      assert records == [{e.id: e.answers[0].strip() for e in examples}]  # spaces have no token
    elif name == "chid":  # FewCLUE's layout
      assert [(r["id"], r["answer"]) for r in records] == [(int(e.id), e.label) for e in examples]
    else:
      gold = [(e.id, e.label if name == "c3" else task.labels[e.label]) for e in examples if e.label is not None]
      assert [(r["id"], r["label"]) for r, e in zip(records, examples) if e.label is not None] == gold
    return
  readers = {
    **wyweb_files.READERS,
    **{t.name: ccpm.read_ccpm for t in ccpm.TASKS},
    "cclue_ner": lambda labels: cclue_files.read_ner(task_dirs["cclue_ner"] / "dev.txt", labels)[: len(examples)],
  }
  reread = readers[name](path)
  if name == "wywmt":  # the gold next tokens decode to the reference itself (spaces have no token)
    assert [(e.source, e.target) for e in reread] == [(e.source, "".join(e.target.split())) for e in examples]
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
  splits = datasets.load_splits(registry.TASKS["tlc"].files, shared_data / "wyweb" / "tlc")
  baseline = registry.majority_baseline(wyweb.TLC, splits["train"], splits["dev"])
  assert round(baseline["period_accuracy"], 3) == 0.424
  assert round(baseline["accuracy"], 3) == 0.148


def test_wywrc_truncation_keeps_question_and_options(shared_data):
  examples = datasets.load_splits(registry.TASKS["wywrc"].files, shared_data / "wyweb" / "wywrc")["dev"]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  cut_any = False
  for e in examples:
    features, truncated = wyweb.WYWRC.featurize(e, tokenizer, 512)
    ids = features["input_ids"]
    assert ids.shape[0] == 4 and ids.shape[1] <= 512
    question, options = tokenizer.encode_chars(e.question)[0], [tokenizer.encode_chars(o)[0] for o in e.options]
    article = len(tokenizer.encode_chars(e.context)[0])
    kept = min(article, 512 - 4 - len(question) - max(map(len, options)))
    for row, option in zip(ids, options):
      real = row[row != tokenizer.pad_id]
      assert list(real[kept + 2 : kept + 2 + len(question)]) == list(question)  # question intact
      assert list(real[-len(option) - 1 : -1]) == list(option) if len(option) else True
    assert truncated == article - kept
    cut_any |= truncated > 0
  assert cut_any


def test_xuci_span_vectors_point_at_the_target_word(shared_data):
  examples = datasets.load_splits(registry.TASKS["xuci"].files, shared_data / "wyweb" / "xuci")["dev"]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  for e in examples:
    features, _ = wyweb.XUCI.featurize(e, tokenizer, 96)
    for row, mask, text, (start, end) in zip(
      features["input_ids"], features["span_mask"], (e.text_a, e.text_b), (e.span_a, e.span_b)
    ):
      assert list(row[mask > 0]) == list(tokenizer.encode_chars(text[start : end + 1])[0])


def test_collate_pads_to_buckets_and_fills_the_batch():
  items = [
    {"input_ids": np.array([2, 7, 3], np.int32), "labels": np.array([IGNORE, 1, IGNORE], np.int32)},
    {"input_ids": np.arange(40, dtype=np.int32), "labels": np.zeros(40, np.int32)},
  ]
  batch = batching.collate(items, batch_size=4, lengths=batching.buckets(512), pad_id=0)
  assert batch["input_ids"].shape == (4, 48) and batch["labels"].shape == (4, 48)
  assert (batch["labels"][0, 3:] == IGNORE).all() and (batch["labels"][2:] == IGNORE).all()
  assert list(batch["weight"]) == [1, 1, 0, 0]
  assert batching.buckets(512) == (32, 48, 64, 96, 128, 192, 256, 384, 512)


def test_training_buckets_are_fitted_to_the_batches_longest_sequences():
  """Maxima 90, 91, 100, 100, 120 would pad to two of `buckets`' lengths (96, 128; 608 tokens);
  the two multiples of 8 that pad them least are 104 and 120 (536 tokens; 96 and 120: 552), then
  max_length for a longer batch. A second length is taken only where it pads 10% less: 536
  tokens against 120's 600, but one 96 beside nine 120s saves 2%. Lengths never pass max_length."""
  assert batching.fitted_buckets(np.array([90, 91, 100, 100, 120]), 512) == (104, 120, 512)
  assert batching.fitted_buckets(np.array([90] + [120] * 9), 512) == (120, 512)
  assert batching.fitted_buckets(np.array([90] + [120] * 9), 512, count=2) == (96, 120, 512)
  assert batching.fitted_buckets(np.array([500, 510]), 510) == (510,)
  assert batching.fitted_buckets(np.array([90, 91, 100, 100, 120]), 512, count=1) == (120, 512)  # an accelerator's


def test_evaluation_takes_as_many_lengths_as_asked():
  """Nine sequences of 10-90 tokens in batches of 4 (longest: 40, 80, 90): padded to one length,
  the longest batch's rounded up to a multiple of 8; or to the two that pad least (40 and 96: the
  three batches' lengths sum to 232, against 80 and 96's 256), which pays by default (one: 288)."""
  features = [{"input_ids": np.ones(n, np.int32), "label": np.int32(0)} for n in range(10, 100, 10)]
  lengths = lambda **kwargs: [
    batch["input_ids"].shape
    for _, batch in batching.eval_batches(features, batch_size=4, max_length=128, pad_id=0, **kwargs)
  ]
  assert lengths() == [(4, 40), (4, 96), (4, 96)]
  assert lengths(bucket_count=1) == [(4, 96)] * 3
  assert lengths(bucket_count=2) == [(4, 40), (4, 96), (4, 96)]


def test_length_sorted_batches_cover_each_epoch_and_pad_little():
  """60 examples, batches of 4 in windows of 5: each 15 batches hold every example once (an
  epoch of 3 windows); in a window, batches are ranges of the window's sorted lengths but not
  in that order; the same seed gives the same stream and another seed another."""
  lengths = np.random.default_rng(0).integers(5, 200, 60)
  stream = batching.LengthSortedBatches(lengths, batch_size=4, sort_window=5, seed=1)
  batches = [stream[i] for i in range(30)]
  for epoch in (batches[:15], batches[15:]):
    assert sorted(np.concatenate(epoch)) == list(range(60))
  assert [list(b) for b in batches[:15]] != [list(b) for b in batches[15:]]
  for w in range(6):
    shortest = [min(lengths[b]) for b in batches[5 * w : 5 * w + 5]]
    window = sorted((lengths[b] for b in batches[5 * w : 5 * w + 5]), key=min)
    assert all(a.max() <= b.min() for a, b in zip(window, window[1:]))
    assert shortest != sorted(shortest)
  assert [list(b) for b in batches] == [
    list(batching.LengthSortedBatches(lengths, batch_size=4, sort_window=5, seed=1)[i]) for i in range(30)
  ]
  other = batching.LengthSortedBatches(lengths, batch_size=4, sort_window=5, seed=2)
  assert [list(other[i]) for i in range(15)] != [list(b) for b in batches[:15]]
  padded = {
    w: np.mean(
      [
        max(lengths[b])
        for b in map(batching.LengthSortedBatches(lengths, batch_size=4, sort_window=w, seed=1).__getitem__, range(150))
      ]
    )
    for w in (1, 5)
  }
  assert padded[5] < 0.8 * padded[1]


def test_wywmt_features_are_the_prefix_lm_layout(shared_data):
  examples = datasets.load_splits(registry.TASKS["wywmt"].files, shared_data / "wyweb" / "wywmt")["dev"][:200]
  tokenizer = tk.Tokenizer(tk.build_vocab(t for e in examples for t in _strings(e)))
  for e in examples:
    source, target = tokenizer.encode_chars(e.source)[0], tokenizer.encode_chars(e.target)[0]
    features, cut = wyweb.WYWMT.featurize(e, tokenizer, 512)
    ids, types, labels = features["input_ids"], features["token_type_ids"], features["labels"]
    assert cut == 0
    assert list(ids) == [tokenizer.cls_id, *source, tokenizer.sep_id, *target, tokenizer.sep_id]
    assert list(types) == [0] * (len(source) + 2) + [1] * (len(target) + 1)
    # Predicted: the target and its [SEP], each from the token before it.
    assert list(labels[labels != IGNORE]) == [*target, tokenizer.sep_id]
    assert (labels[: len(source) + 1] == IGNORE).all() and labels[-1] == IGNORE


def test_wywmt_truncation_trims_the_longer_side():
  example = wyweb_files.MtExample(1, "天" * 30, "地" * 5)
  tokenizer = tk.Tokenizer(tk.build_vocab(["天地"]))
  features, cut = wyweb.WYWMT.featurize(example, tokenizer, 20)
  ids = list(features["input_ids"])
  assert len(ids) == 20 and cut == 18
  assert ids.count(tokenizer.token_to_id["天"]) == 12 and ids.count(tokenizer.token_to_id["地"]) == 5
  features, cut = wyweb.WYWMT.featurize(wyweb_files.MtExample(1, "天" * 12, "地" * 12), tokenizer, 20)
  assert cut == 7 and list(features["input_ids"]).count(tokenizer.token_to_id["天"]) == 9


def _chars_tokenizer(*texts) -> tk.Tokenizer:
  return tk.Tokenizer(tk.build_vocab(texts))


def test_aceval_truncation_keeps_the_question_ends_and_the_options():
  passage = "".join(chr(0x4E00 + i % 400) for i in range(1500))
  question = f"阅读下文\n{passage}\n下列理解不正确的一项是（）"
  options = ("甲" * 10, "乙" * 12, "丙" * 300, "丁")
  example = aceval.Question(2, "translation", "0", question, options, "C", "")
  tokenizer = _chars_tokenizer(question, *options)
  features, cut = aceval.TASK.featurize(example, tokenizer, 512)
  ids = features["input_ids"]
  assert ids.shape == (4, 512) and features["label"] == 2
  kept_option = (512 - 3) // 2  # an option keeps at most half of the content tokens
  room = 512 - 3 - kept_option
  q = tokenizer.encode_chars(question)[0]
  expected_question = list(q[: room - 64]) + list(q[-64:])  # its beginning and its last 64 tokens
  for row, option in zip(ids, options):
    real = list(row[row != tokenizer.pad_id])
    assert (
      real[0] == tokenizer.cls_id and real[1 : room + 1] == expected_question and real[room + 1] == tokenizer.sep_id
    )
    assert real[room + 2 : -1] == list(tokenizer.encode_chars(option)[0][:kept_option])
  assert tokenizer.decode(expected_question[-16:]).endswith("下列理解不正确的一项是（）")
  assert cut == (len(q) - room) + (300 - kept_option)
  assert (features["token_type_ids"][:, room + 2] == 1).all() and (features["token_type_ids"][:, : room + 2] == 0).all()


def test_relation_marks_the_pair_and_keeps_it_when_cut():
  example = cclue_files.RelationExample(
    1, "司马宣王围公孙渊於襄平，传渊首于京都", "渊", "PER", "公孙渊", "PER", "同名于"
  )
  assert cclue.marked(example) == "司马宣王围『公孙渊』於襄平，传「渊」首于京都"  # 渊 outside 公孙渊
  inside = cclue_files.RelationExample(1, "围公孙渊", "渊", "PER", "公孙渊", "PER", "同名于")
  with pytest.raises(ValueError, match="no occurrence of the subject '渊' outside the object '公孙渊'"):
    cclue.marked(inside)

  far = cclue_files.RelationExample(1, "杨虔" + "之" * 100 + "为刺史", "杨虔", "PER", "刺史", "JOB", "任职")
  task = cclue.RE_GIVEN_ENTITIES
  tokenizer = _chars_tokenizer(far.text, cclue.RELATION_MARKERS)
  features, cut = task.featurize(far, tokenizer, 32)
  text = tokenizer.decode(features["input_ids"])
  assert len(features["input_ids"]) == 32 and cut == 105 + 4 - 30 and features["label"] == 0
  assert text.startswith("「杨虔」") and text.endswith("『刺史』")  # the middle is cut, both entities stay
  near = cclue_files.RelationExample(1, "之" * 100 + "杨虔为刺史", "杨虔", "PER", "刺史", "JOB", "")
  features, _ = task.featurize(near, tokenizer, 32)
  assert tokenizer.decode(features["input_ids"]).endswith("「杨虔」为『刺史』") and features["label"] == IGNORE


def test_cclue_ner_majority_tag_baseline_by_hand():
  example = lambda text, tags: cclue_files.NerExample(1, text, tuple(tags.split()))
  train = [example("秦王至", "B-PER I-PER O"), example("秦王", "B-PER I-PER"), example("秦人", "B-LOC O")]
  dev = [example("秦王人", "B-PER I-PER O"), example("王秦", "O O")]
  # 秦 → B-PER (2 of 3), 王 → I-PER, 人 → O: dev predicts 秦王 (right), then 王 and 秦 as two PER
  # chunks (a chunk may start with I-): entity precision 1/3, recall 1/1.
  scores = registry.majority_baseline(cclue.NER, train, dev)
  assert scores["entity_precision"] == pytest.approx(1 / 3) and scores["entity_recall"] == 1.0
  assert scores["entity_f1"] == pytest.approx(0.5)
  # C-CLUE's token macro scores over B/I-LOC, ORG, PER: B-PER and I-PER each predicted twice,
  # right once, of one gold (P 1/2, R 1, F 2/3); the four LOC/ORG labels score 0.
  assert scores["precision"] == pytest.approx(1 / 6) and scores["recall"] == pytest.approx(1 / 3)
  assert scores["f1"] == pytest.approx(2 / 9)


def test_unlabelled_splits_get_ignored_labels(classical_dirs):
  test = registry.TASKS["ccpm"].files.read_split(classical_dirs["ccpm"], "test")
  tokenizer = _chars_tokenizer(*(t for e in test for t in _strings(e)))
  for task in ccpm.TASKS:
    features, _ = task.featurize_all(test, tokenizer, 64, "test")
    assert all(np.all(f["label"] == IGNORE) for f in features)
  assert features[0]["input_ids"].shape[0] == 5  # Match: the translation and its four lines apart
  untagged = cclue_files.NerExample(1, "秦王", ())
  features, _ = cclue.NER.featurize(untagged, _chars_tokenizer("秦王"), 16)
  assert (features["labels"] == IGNORE).all()


def test_aceval_folds_hold_out_each_question_once_one_per_subject(classical_dirs):
  dev = registry.TASKS["aceval"].files.read_split(classical_dirs["aceval"], "dev")
  fold_of = aceval.folds(dev, 5)
  for fold in range(5):
    held = [q for q, f in zip(dev, fold_of) if f == fold]
    assert sorted(q.subject for q in held) == sorted(aceval.SUBJECTS)  # one question of each subject
  assert [f for q, f in zip(dev, fold_of) if q.subject == "geography"] == [0, 1, 2, 3, 4]

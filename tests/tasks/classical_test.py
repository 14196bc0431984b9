"""Loaders of CCPM, C-CLUE NER and relations, and AC-EVAL: the real C-CLUE NER files completely,
fixtures written in the published formats (CSV quoting included), and malformed rows named by
file and line."""

import collections
import csv
import json

import pytest

from wyjax.data import tokenizer as tk
from wyjax.tasks import aceval, cclue, cclue_files, ccpm, datasets
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS


def test_real_cclue_ner_files_parse_completely_and_entities_map_back(shared_data):
  folder = shared_data / "cclue" / "ner"
  counts = collections.Counter()
  for split, sentences in (("train", 1902), ("dev", 238)):
    examples = cclue_files.read_split("cclue_ner", folder, split)
    assert len(examples) == sentences
    lines = (folder / f"{split}.txt").read_text(encoding="utf-8").splitlines()
    tag_lines = (folder / f"{split}-label.txt").read_text(encoding="utf-8").splitlines()
    for e, line, tags in zip(examples, lines, tag_lines, strict=True):
      tokens, tags = line.split(" "), tags.split()
      assert len(e.text) == len(tokens) == len(tags)
      for start, end, kind in e.spans:
        # Each gold entity is the characters of its tokens, tagged B-/I- of its type.
        assert e.text[start:end] == "".join(tokens[start:end])
        assert all(t.endswith(f"-{kind}") for t in tags[start:end])
        assert end == len(tags) or tags[end] != f"I-{kind}"
      assert sum(end - start for start, end, _ in e.spans) == sum(t != "O" for t in tags)
      counts.update(kind for *_, kind in e.spans)
  # The entity types as found in the data (entities, train + dev).
  assert counts == {"PER": 12289, "LOC": 3845, "JOB": 2705, "ORG": 2045, "BOO": 119, "WAR": 6}


def test_cclue_ner_counts_that_differ_are_listed_by_line(tmp_path):
  (tmp_path / "dev.txt").write_text("子 曰\n学 而 时\n习 之\n不 亦\n", encoding="utf-8")
  (tmp_path / "dev-label.txt").write_text("B-PER I-PER \nO O\nO O\nO\n", encoding="utf-8")
  with pytest.raises(
    FormatError,
    match=r"dev-label\.txt:2: 2 lines have token and tag counts that differ .*"
    r"line 2 \(3 characters, 2 tags\), line 4 \(2 characters, 1 tags\)",
  ):
    cclue_files.read_split("cclue_ner", tmp_path, "dev")


@pytest.mark.parametrize(
  "text,tags,line,message",
  [
    ("子 曰\n学而 时\n", "O O\nO O\n", 2, "token '学而' is not one character"),
    ("子 曰\n学 而\n", "O O\nO B-GOD\n", 2, "tag 2 'B-GOD' is not O or B-/I-"),
    ("子 曰\n\n", "O O\n\n", 2, "empty sentence"),
    ("子 曰\n学 而\n", "O O\n", 2, "1 tag lines for the 2 sentences"),
  ],
)
def test_malformed_cclue_ner(tmp_path, text, tags, line, message):
  (tmp_path / "train.txt").write_text(text, encoding="utf-8")
  (tmp_path / "train-label.txt").write_text(tags, encoding="utf-8")
  with pytest.raises(FormatError, match=rf"train(-label)?\.txt:{line}: {message}"):
    cclue_files.read_split("cclue_ner", tmp_path, "train")


def test_cclue_ner_whitespace_tokens_and_untagged_test(tmp_path):
  (tmp_path / "test.txt").write_text("裴 约   刘 仁\n", encoding="utf-8")  # an empty token: a whitespace character
  (example,) = cclue_files.read_split("cclue_ner", tmp_path, "test")
  assert example.text == "裴约  刘仁" and not example.tagged and example.spans == ()
  (tmp_path / "train.txt").write_text("裴 约\n", encoding="utf-8")
  with pytest.raises(FileNotFoundError, match="no train-label.txt"):
    cclue_files.read_split("cclue_ner", tmp_path, "train")


def test_cclue_ner_i_tags_that_begin_an_entity_are_scored_as_written(tmp_path):
  """run_NER.py trains on and scores the label file's own tags; an I-X after O or after another
  type begins an entity only for the entity score, and the notes count it."""
  (tmp_path / "dev.txt").write_text("秦 王 使 李 斯\n汉 高 祖\n", encoding="utf-8")
  (tmp_path / "dev-label.txt").write_text("O I-PER O B-PER I-PER\nB-LOC I-PER I-PER\n", encoding="utf-8")
  examples = cclue_files.read_split("cclue_ner", tmp_path, "dev")
  assert [e.spans for e in examples] == [((1, 2, "PER"), (3, 5, "PER")), ((0, 1, "LOC"), (1, 3, "PER"))]
  features, _ = cclue.NER.featurize(examples[0], tk.Tokenizer(tk.build_vocab(["秦王使李斯"])), 16)
  assert [cclue_files.NER_LABELS[i] for i in features["labels"][1:-1]] == ["O", "I-PER", "O", "B-PER", "I-PER"]
  # Predicted: the tags with each entity begun by B-, so every entity is right.
  predicted = [("O", "B-PER", "O", "B-PER", "I-PER"), ("B-LOC", "B-PER", "I-PER")]
  scores = cclue.NER.score(examples, predicted)
  assert scores["entity_f1"] == 1.0
  # Token scores over B/I-LOC, B/I-ORG, B/I-PER against the file's tags: B-LOC 1/1 right (P, R,
  # F 1); B-PER predicted 3 times, right once, of 1 gold (P 1/3, R 1, F 1/2); I-PER predicted 2
  # times, both right, of 4 gold (P 1, R 1/2, F 2/3); the other three labels 0.
  assert scores["precision"] == pytest.approx((1 + 1 / 3 + 1) / 6)
  assert scores["recall"] == pytest.approx((1 + 1 + 1 / 2) / 6)
  assert scores["f1"] == pytest.approx((1 + 1 / 2 + 2 / 3) / 6)
  (note,) = cclue.NER.notes(examples)
  assert note.startswith("2 I- tag(s) after O or another type (lines [1, 2])")


@pytest.mark.parametrize(
  "split,names,message",
  [
    (
      "train",
      ("source.txt", "target.txt", "train.txt", "train-label.txt"),
      r"source\.txt \+ target\.txt and train\.txt \+ train-label\.txt hold the train split under two namings",
    ),
    (
      "train",
      ("source.txt", "target.txt", "train-label.txt"),
      r"source\.txt \+ target\.txt and train-label\.txt hold the train split under two namings",
    ),
    ("dev", ("dev.txt", "dev-lable.txt", "dev-label.txt"), r"dev-lable\.txt and dev-label\.txt are the same split"),
    ("test", ("test-label.txt",), r"test-label\.txt: no test\.txt beside it"),
  ],
)
def test_cclue_ner_two_namings_or_labels_alone_are_errors(tmp_path, split, names, message):
  for name in names:
    (tmp_path / name).write_text("子 曰\n", encoding="utf-8")
  with pytest.raises((ValueError, FileNotFoundError), match=message):
    cclue_files.read_split("cclue_ner", tmp_path, split)


def test_ccpm_fixture_round_trip(classical_dirs):
  folder = classical_dirs["ccpm"]
  train, test = ccpm.read_split(folder, "train"), ccpm.read_split(folder, "test")
  records = [json.loads(line) for line in (folder / "train.jsonl").read_text(encoding="utf-8").splitlines()]
  assert [(e.translation, list(e.choices), e.answer, e.line) for e in train] == [
    (r["translation"], r["choices"], r["answer"], i) for i, r in enumerate(records, 1)
  ]
  assert test and all(e.answer is None for e in test)
  assert ccpm.read_split(folder, "dev") == ccpm.read_ccpm(folder / "valid.jsonl")


@pytest.mark.parametrize(
  "records,line,message",
  [
    (
      '{"translation": "t", "choices": ["a", "b", "c", "d"], "answer": 1}\n'
      '{"translation": "t", "choices": ["a", "b", "c", "d"], "answer": 4}\n',
      2,
      "answer 4 is not in 0..3",
    ),
    ('{"translation": "t", "choices": ["a", "b", "c"], "answer": 1}\n', 1, "'choices' should be 4 non-empty"),
    ('{"choices": ["a", "b", "c", "d"], "answer": 1}\n', 1, "missing field 'translation'"),
    (
      '{"translation": "t", "choices": ["a", "b", "c", "d"], "answer": 1}\n'
      '{"translation": "t", "choices": ["a", "b", "c", "d"]}\n',
      2,
      "some records have an 'answer'",
    ),
    ('{"translation": "t", "choices": ["a", "b", "c", "d"], "answer": "1"}\n', 1, "'answer' should be int"),
    ('{"translation": "t", "choices": ["a", "b", "c", "d"], "answer": 1}\n{"translation": \n', 2, "invalid JSON"),
    ('{"translation": "t", "choices": ["a", "b", "c", "d"]}\n', 1, "missing field 'answer' \\(needed in the dev"),
  ],
)
def test_malformed_ccpm(tmp_path, records, line, message):
  (tmp_path / "valid.jsonl").write_text(records, encoding="utf-8")
  with pytest.raises(FormatError, match=rf"valid\.jsonl:{line}: .*{message}"):
    ccpm.read_split(tmp_path, "dev")


def test_cclue_relations_fixture_round_trip(classical_dirs):
  folder = classical_dirs["cclue_re"]
  records = [json.loads(line) for line in (folder / "dev_data.json").read_text(encoding="utf-8").splitlines()]
  examples = cclue_files.read_split("cclue_re", folder, "dev")
  assert [(e.text, e.predicate, e.subject, e.object, e.subject_type, e.object_type) for e in examples] == [
    (r["text"], *(r["spo_list"][k] for k in ("predicate", "subject", "object", "subject_type", "object_type")))
    for r in records
  ]
  assert all(e.predicate == "" for e in cclue_files.read_split("cclue_re", folder, "test"))


def test_cclue_relations_list_of_one_triple(tmp_path):
  spo = {"predicate": "父", "subject": "荣", "subject_type": "PER", "object": "昪", "object_type": "PER"}
  (tmp_path / "dev_data.json").write_text(
    "".join(
      json.dumps(r, ensure_ascii=False) + "\n"
      for r in ({"text": "父荣，昪少孤", "spo_list": [spo]}, {"text": "荣子昪", "spo_list": spo})
    ),
    encoding="utf-8",
  )
  examples = cclue_files.read_split("cclue_re", tmp_path, "dev")
  assert [(e.line, e.predicate, e.subject) for e in examples] == [(1, "父", "荣"), (2, "父", "荣")]


_SPO = '"predicate": "任职", "subject_type": "PER", "object_type": "JOB"'


@pytest.mark.parametrize(
  "records,line,message",
  [
    (
      '{"text": "杨虔为刺史", "spo_list": {' + _SPO + ', "subject": "杨虔", "object": "刺史"}}\n'
      '{"text": "杨虔为刺史", "spo_list": {' + _SPO + ', "subject": "杨素", "object": "刺史"}}\n',
      2,
      "subject '杨素' does not occur in the text",
    ),
    (
      '{"text": "杨虔为刺史", "spo_list": {' + _SPO + ', "subject": "杨虔", "object": "太守"}}\n',
      1,
      "object '太守' does not occur in the text",
    ),
    ('{"text": "杨虔为刺史", "spo_list": {' + _SPO + ', "subject": "杨虔"}}\n', 1, "missing field 'object'"),
    ('{"text": "杨虔为刺史", "spo_list": "任职"}\n', 1, "field 'spo_list' should be dict or list"),
    (
      '{"text": "杨虔为刺史", "spo_list": {"subject_type": "PER", "object_type": "JOB", "subject": "杨虔", '
      '"object": "刺史"}}\n',
      1,
      "missing predicate \\(needed in the dev split\\)",
    ),
    # One triple per record, as C-CLUE's scripts read it: none or two would lose the record's
    # line in predicate_predict.txt.
    (
      '{"text": "杨虔为刺史", "spo_list": {' + _SPO + ', "subject": "杨虔", "object": "刺史"}}\n'
      '{"text": "杨虔为刺史", "spo_list": []}\n',
      2,
      "spo_list holds 0 triples, expected one per record",
    ),
    (
      '{"text": "杨虔为刺史", "spo_list": [{'
      + _SPO
      + ', "subject": "杨虔", "object": "刺史"}, {'
      + _SPO
      + ', "subject": "杨虔", "object": "刺史"}]}\n',
      1,
      "spo_list holds 2 triples, expected one per record",
    ),
    ('{"text": "杨虔为刺史", "spo_list": ["任职"]}\n', 1, "spo_list entry '任职' is not an object"),
  ],
)
def test_malformed_cclue_relations(tmp_path, records, line, message):
  (tmp_path / "dev_data.json").write_text(records, encoding="utf-8")
  with pytest.raises(FormatError, match=rf"dev_data\.json:{line}: {message}"):
    cclue_files.read_split("cclue_re", tmp_path, "dev")


def test_aceval_csv_quoting_round_trip(classical_dirs):
  folder = classical_dirs["aceval"]
  dev, test = aceval.read_split(folder, "dev"), aceval.read_split(folder, "test")
  assert len(dev) == 5 * 13 and len(test) == 2 * 13
  assert [q.subject for q in dev[::5]] == list(aceval.SUBJECTS)
  with open(folder / "dev" / "geography.csv", encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f))[1:]
  geography = [q for q in dev if q.subject == "geography"]
  assert [(q.row_id, q.question, *q.options, q.answer, q.explanation) for q in geography] == [
    tuple(r) for r in rows
  ]  # literal backslash-n kept, as the CSV has it
  first = geography[0]
  assert first.question.startswith('阅读, "材料"\n') and first.question.count("\\n") == 1
  assert first.explanation.startswith(f'{first.answer}, 即 "')
  assert [q.line for q in geography] == [2, 4, 5, 6, 7]  # the first row spans lines 2-3
  assert all(q.answer == "" for q in test)
  assert aceval.read_split(folder, "train") == dev  # few-shot trains on the dev questions


def _aceval_dev(folder, geography: str, header: str = ",Question,A,B,C,D,Answer,Explanation\n"):
  """dev/ with one valid question per subject, and geography.csv holding `geography`."""
  (folder / "dev").mkdir()
  for subject in aceval.SUBJECTS:
    content = geography if subject == "geography" else f"{header}0,问,a,b,c,d{',A,e' if 'Answer' in header else ''}\n"
    (folder / "dev" / f"{subject}.csv").write_text(content, encoding="utf-8")


@pytest.mark.parametrize(
  "content,line,message",
  [
    ("Question,A,B,C,D,Answer\n", 1, "header"),
    (
      ',Question,A,B,C,D,Answer,Explanation\n0,"问\n题, ""引""",a,b,c,d,A,e\n1,问,a,b,c,d,A\n',
      4,
      "expected 8 comma-separated fields, found 7",
    ),
    (",Question,A,B,C,D,Answer,Explanation\n0,问,a,b,c,d,E,e\n", 2, "answer 'E' is not one of"),
    (
      ",Question,A,B,C,D,Answer,Explanation\n0,问,a,b,c,d,A,e\n0,问,a,b,c,d,B,e\n",
      3,
      "row id '0' is empty or repeated",
    ),
    (",Question,A,B,C,D,Answer,Explanation\n0,问,a,,c,d,A,e\n", 2, "empty question or option"),
    (',Question,A,B,C,D,Answer,Explanation\n0,问,a,b,c,d,A,e\n1,"问"x,a,b,c,d,A,e\n', 3, "malformed CSV"),
    (",Question,A,B,C,D,Answer,Explanation\n", 1, "no questions after the header: subject geography is empty"),
  ],
)
def test_malformed_aceval(tmp_path, content, line, message):
  _aceval_dev(tmp_path, content)
  with pytest.raises(FormatError, match=rf"geography\.csv:{line}: {message}"):
    aceval.read_split(tmp_path, "dev")


def test_aceval_field_longer_than_csv_default_limit(tmp_path):
  passage = "阅" * 200_000  # csv refuses fields over 131,072 characters by default
  _aceval_dev(tmp_path, f",Question,A,B,C,D,Answer,Explanation\n0,{passage},a,b,c,d,A,e\n")
  (question,) = [q for q in aceval.read_split(tmp_path, "dev") if q.subject == "geography"]
  assert question.question == passage


def test_aceval_rejects_unknown_and_missing_subjects_and_dev_without_answers(tmp_path):
  _aceval_dev(tmp_path, ",Question,A,B,C,D\n0,问,a,b,c,d\n", header=",Question,A,B,C,D\n")
  with pytest.raises(FormatError, match=r"historical_facts\.csv:2: dev questions need the Answer column"):
    aceval.read_split(tmp_path, "dev")
  (tmp_path / "dev" / "astrology.csv").write_text(",Question,A,B,C,D\n", encoding="utf-8")
  with pytest.raises(FileNotFoundError, match=r"\['astrology.csv'\] are not AC-EVAL subjects"):
    aceval.read_split(tmp_path, "dev")
  (tmp_path / "dev" / "astrology.csv").unlink()
  (tmp_path / "dev" / "poetry_appreciation.csv").unlink()
  with pytest.raises(FileNotFoundError, match=r"dev: no poetry_appreciation\.csv; AC-EVAL's dev/ has a file for each"):
    aceval.read_split(tmp_path, "train")


@pytest.mark.parametrize("dataset", ["ccpm", "cclue_ner", "cclue_re", "aceval"])
def test_tfds_build_reads_back_every_example(classical_dirs, dataset):
  files = TASKS[dataset].files
  splits = datasets.load_splits(files, classical_dirs[dataset])
  for split, examples in splits.items():
    assert examples == files.read_split(classical_dirs[dataset], split), split
  assert set(splits) == ({"train", "dev"} if dataset == "cclue_ner" else {"train", "dev", "test"})

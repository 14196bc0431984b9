"""CLUE's released layouts (issue #31): the files CLUE's own zips and scripts name read, from
the real files of ../shared/data laid out as CLUE releases them; ChID's blanks decoded jointly
as CLUE's baseline does; CSL's keywords joined as CLUE joins them."""

import json

import ml_collections
import numpy as np
import pytest

from wyjax.tasks import clue, clue_reading, clue_reading_files
from wyjax.tasks.registry import TASKS


def _c3_questions(shared_data, split: str) -> list[dict]:
  return [
    qa
    for kind in "dm"
    for document in json.loads((shared_data / "clue" / "c3" / f"{kind}-{split}.json").read_text("utf-8"))
    for qa in document[1]
  ]


def test_c3_mixed_test_file_keeps_its_question_ids(shared_data, tmp_path):
  """CLUE's C3 test is one file of both kinds (test1.1.json) whose questions carry ids."""
  documents = [
    document
    for kind in "dm"
    for document in json.loads((shared_data / "clue" / "c3" / f"{kind}-dev.json").read_text("utf-8"))
  ]
  questions = 0
  for document in documents:
    for qa in document[1]:
      qa["id"] = 1000 + questions
      del qa["answer"]
      questions += 1
  (tmp_path / "test1.1.json").write_text(json.dumps(documents, ensure_ascii=False, indent=1), encoding="utf-8")
  examples = clue_reading_files.read_split("c3", tmp_path, "test")
  assert questions == len(_c3_questions(shared_data, "dev")) > 100
  assert [e.id for e in examples] == list(range(1000, 1000 + questions))
  assert all(e.label is None for e in examples)
  submission = TASKS["c3"].submission(examples[:2], [0, 1])
  assert [json.loads(line) for line in submission] == [{"id": 1000, "label": 0}, {"id": 1001, "label": 1}]
  (tmp_path / "d-test.json").write_text("[]", encoding="utf-8")
  with pytest.raises(ValueError, match="test1.1.json and d-test.json are the test split under two names"):
    clue_reading_files.split_files("c3", tmp_path, "test")


def test_chid_test_and_ocnli_train_under_clues_names(shared_data, tmp_path):
  chid = (shared_data / "clue" / "chid" / "dev.json").read_text("utf-8").splitlines()
  (tmp_path / "chid").mkdir()
  (tmp_path / "chid" / "test1.1.json").write_text(
    "".join(
      json.dumps({k: v for k, v in json.loads(line).items() if k != "answer"}, ensure_ascii=False) + "\n"
      for line in chid
    ),
    encoding="utf-8",
  )
  examples = clue_reading_files.read_split("chid", tmp_path / "chid", "test")
  assert [e.id for e in examples] == [str(json.loads(line)["id"]) for line in chid]
  (tmp_path / "ocnli").mkdir()
  (tmp_path / "ocnli" / "train.50k.json").write_bytes((shared_data / "clue" / "ocnli" / "train.json").read_bytes())
  assert clue.split_files("ocnli", tmp_path / "ocnli", "train") == [tmp_path / "ocnli" / "train.50k.json"]
  assert len(clue.read_split("ocnli", tmp_path / "ocnli", "train")) == len(
    clue.read_split("ocnli", shared_data / "clue" / "ocnli", "train")
  )


def test_csl_keywords_joined_by_a_space_as_clue_does(shared_data):
  record = json.loads((shared_data / "clue" / "csl" / "dev.json").read_text("utf-8").splitlines()[0])
  (example, *_) = clue.read_split("csl", shared_data / "clue" / "csl", "dev")
  assert example.text_a == " ".join(record["keyword"]) and example.text_b == record["abst"]


def _blank(line: int, tag: str) -> clue_reading_files.ChidExample:
  return clue_reading_files.ChidExample(line, tag, "左", "右", ("甲乙丙丁", "戊己庚辛", "壬癸子丑"), 0)


def test_chid_blanks_of_a_record_take_distinct_idioms():
  """By hand, CLUE's greedy rule: record 1's best pair is (idiom 0, blank 2) at 6, then
  (idiom 0, blank 1) at 5 is taken, so (idiom 1, blank 1) at 4; record 2 alone takes its argmax;
  in record 3 every score ties, so idiom 0 goes to the first blank, idiom 1 to the next."""
  examples = [
    _blank(1, "#idiom1#"),
    _blank(1, "#idiom2#"),
    _blank(2, "#idiom3#"),
    _blank(3, "#idiom4#"),
    _blank(3, "#idiom5#"),
  ]
  logits = [np.array(row, np.float32) for row in ([5, 4, 0], [6, 1, 0], [0, 3, 1], [2, 2, 2], [2, 2, 2])]
  assert clue_reading.assign_blanks(examples, logits) == [1, 0, 1, 0, 1]
  task = TASKS["chid"]
  assert [task.decode(e, None, scores) for e, scores in zip(examples, logits)] == [0, 0, 1, 0, 0]  # one at a time
  independent, _ = task.prepare(task, {}, ml_collections.ConfigDict({"joint_blanks": False}))
  assert independent.decode_together is None and task.decode_together is clue_reading.assign_blanks

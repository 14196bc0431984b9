"""Damaged CLUE files: a real released file with one record spoiled, written to tmp_path. Each
read ends in an error naming the file and the line at fault, or (a test split, released
without answers) in one example per question, each keeping its id."""

import itertools
import json

import pytest

from wyjax.tasks import clue, clue_reading_files
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS


def _line(text: str, marker: str, start: int = 0) -> int:
  """The line of marker's first occurrence in text after `start`."""
  return text.count("\n", 0, text.index(marker, start)) + 1


def _write(path, value, indent=None) -> str:
  text = json.dumps(value, ensure_ascii=False, indent=indent)
  path.write_text(text, encoding="utf-8")
  return text


def _jsonl(path, records) -> None:
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def _records(shared_data, task: str, split: str) -> list[dict]:
  lines = (shared_data / "clue" / task / f"{split}.json").read_text("utf-8").splitlines()
  return [json.loads(line) for line in lines]


# --- CMRC 2018 (SQuAD JSON, indent 2: an object's "{" is the line before its first key) ----------------------


def _no_answers(squad):
  qa = squad["data"][1]["paragraphs"][0]["qas"][0]
  del qa["answers"]
  return f'"{qa["id"]}"', 0


def _empty_answers(squad):
  qa = squad["data"][1]["paragraphs"][0]["qas"][0]
  qa["answers"] = []
  return f'"{qa["id"]}"', 0


def _start_past_the_context(squad):
  paragraph = squad["data"][2]["paragraphs"][0]
  paragraph["qas"][0]["answers"][0]["answer_start"] = len(paragraph["context"]) + 3
  return f'"{paragraph["qas"][0]["id"]}"', 0


def _negative_start(squad):
  qa = squad["data"][2]["paragraphs"][0]["qas"][0]
  qa["answers"][0]["answer_start"] = -2
  return f'"{qa["id"]}"', 0


def _question_without_id(squad):
  qa = squad["data"][4]["paragraphs"][0]["qas"][0]
  del qa["id"]
  qa["question"] = "没有编号的问题"
  return '"没有编号的问题"', -1


def _data_an_object(squad):
  squad["data"] = {"paragraphs": []}
  return "{", 0  # the file's own line


def _article_a_string(squad):
  squad["data"][3] = "坏文章"
  return '"坏文章"', 0


def _paragraph_a_string(squad):
  squad["data"][3]["paragraphs"][0] = "坏段落"
  return '"坏段落"', 0


def _context_a_number(squad):
  paragraph = squad["data"][3]["paragraphs"][0]
  paragraph["context"] = 2018
  return f'"{paragraph["id"]}"', -1  # the paragraph's first key


@pytest.mark.parametrize(
  "damage, message",
  [
    (_no_answers, r"TRIAL_\w+: no 'answers' \(a labelled split needs them\)"),
    (_empty_answers, r"TRIAL_\w+: no 'answers'"),
    (_start_past_the_context, r"TRIAL_\w+: answer_start \d+ is outside the context \(0 to \d+\)"),
    (_negative_start, r"TRIAL_\w+: answer_start -2 is outside the context"),
    (_question_without_id, r"missing field 'id'"),
    (_data_an_object, r"field 'data' should be list, found dict"),
    (_article_a_string, r"article 3 should be dict, found str"),
    (_paragraph_a_string, r"paragraph 0 should be dict, found str"),
    (_context_a_number, r"field 'context' should be str, found int"),
  ],
)
def test_cmrc_damage_names_the_line(shared_data, tmp_path, damage, message):
  squad = json.loads((shared_data / "clue" / "cmrc2018" / "cmrc2018_dev.json").read_text("utf-8"))
  marker, offset = damage(squad)
  text = _write(tmp_path / "cmrc2018_train.json", squad, indent=2)
  with pytest.raises(FormatError, match=rf"cmrc2018_train\.json:{_line(text, marker) + offset}: {message}"):
    clue_reading_files.read_split("cmrc2018", tmp_path, "train")


def test_cmrc_repeated_id_and_an_unlabelled_test_file(shared_data, tmp_path):
  squad = json.loads((shared_data / "clue" / "cmrc2018" / "cmrc2018_dev.json").read_text("utf-8"))
  questions = [qa for article in squad["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
  for qa in questions:
    del qa["answers"]
  _write(tmp_path / "cmrc2018_test.json", squad, indent=2)
  test = clue_reading_files.read_split("cmrc2018", tmp_path, "test")
  assert [e.id for e in test] == [qa["id"] for qa in questions] and not any(e.answers for e in test)
  questions[7]["id"] = questions[2]["id"]
  text = _write(tmp_path / "cmrc2018_test.json", squad, indent=2)
  first = _line(text, f'"{questions[2]["id"]}"')
  second = _line(text, f'"{questions[2]["id"]}"', text.index(f'"{questions[3]["id"]}"'))
  with pytest.raises(
    FormatError,
    match=rf"cmrc2018_test\.json:{second}: id '{questions[2]['id']}' repeats the one "
    rf"at line {first}",
  ):
    clue_reading_files.read_split("cmrc2018", tmp_path, "test")


# --- C3 (a JSON array, indent 1) ---------------------------------------------------------------------------


def _c3_documents(shared_data) -> list:
  return json.loads((shared_data / "clue" / "c3" / "d-dev.json").read_text("utf-8"))[:30]


def test_c3_question_without_answer_is_an_error_in_dev_not_in_test(shared_data, tmp_path):
  documents = _c3_documents(shared_data)
  qa = documents[5][1][0]  # its first key is "question": its "{" is a line above
  del qa["answer"]
  qa["question"] = "没有答案的问题"
  text = _write(tmp_path / "d-dev.json", documents, indent=1)
  with pytest.raises(
    FormatError,
    match=rf"d-dev\.json:{_line(text, '没有答案的问题') - 1}: the question has no "
    r"'answer' \(a labelled split needs one\)",
  ):
    clue_reading_files.read_split("c3", tmp_path, "dev")
  (tmp_path / "d-dev.json").rename(tmp_path / "d-test.json")
  test = clue_reading_files.read_split("c3", tmp_path, "test")
  assert len(test) == sum(len(d[1]) for d in documents)
  assert [e.label for e in test if e.question == "没有答案的问题"] == [None]


def _question_a_string(documents):
  documents[3][1][0] = "坏问题"
  return '"坏问题"', 0


def _null_sentence(documents):
  documents[2][0][:2] = ["第一句", None]
  return '"第一句"', 1  # null on the next line


@pytest.mark.parametrize(
  "damage, message",
  [
    (_question_a_string, "question 0 should be dict, found str"),
    (_null_sentence, "sentence 1 should be str, found NoneType"),
  ],
)
def test_c3_damage_names_the_line(shared_data, tmp_path, damage, message):
  documents = _c3_documents(shared_data)
  marker, offset = damage(documents)
  text = _write(tmp_path / "d-dev.json", documents, indent=1)
  with pytest.raises(FormatError, match=rf"d-dev\.json:{_line(text, marker) + offset}: {message}"):
    clue_reading_files.read_split("c3", tmp_path, "dev")


def test_c3_lone_surrogate_escape_names_its_line(shared_data, tmp_path):
  documents = _c3_documents(shared_data)
  documents[2][0][1] = "半个字"
  text = json.dumps(documents, ensure_ascii=False, indent=1).replace("半个字", "\\ud800")  # the escape, 6 characters
  (tmp_path / "d-dev.json").write_text(text, encoding="utf-8")
  line = _line(text, "\\ud800")
  with pytest.raises(FormatError, match=rf"d-dev\.json:{line}: \\ud800 is a lone surrogate \(half of a UTF-16 pair\)"):
    clue_reading_files.read_split("c3", tmp_path, "dev")


def test_c3_repeated_id_in_a_test_file(shared_data, tmp_path):
  """CLUE's C3 test files give each question an id (put first here: the question's "{" is the
  line above it)."""
  documents, ids = _c3_documents(shared_data), itertools.chain([0, 1, 2, 3, 4, 5, 6, 7, 8, 3], itertools.count(10))
  for document in documents:
    document[1] = [{"id": next(ids), "question": qa["question"], "choice": qa["choice"]} for qa in document[1]]
  text = _write(tmp_path / "d-test.json", documents, indent=1)
  first = _line(text, '"id": 3,')
  second = _line(text, '"id": 3,', text.index('"id": 3,') + 1)
  with pytest.raises(FormatError, match=rf"d-test\.json:{second - 1}: id 3 repeats the one at line {first - 1}"):
    clue_reading_files.read_split("c3", tmp_path, "test")


# --- ChID: FewCLUE's layout (JSON Lines: record k on line k + 1) and CLUE's ----------------------------------


def test_fewclue_chid_test_file_keeps_its_ids(shared_data, tmp_path):
  records = [{k: v for k, v in r.items() if k != "answer"} for r in _records(shared_data, "chid", "dev")]
  _jsonl(tmp_path / "test.json", records)
  test = clue_reading_files.read_split("chid", tmp_path, "test")
  assert [e.id for e in test] == [str(r["id"]) for r in records] and all(e.label is None for e in test)
  lines = TASKS["chid"].submission(test, [0] * len(test))
  assert [json.loads(line) for line in lines] == [{"id": r["id"], "answer": 0} for r in records]


@pytest.mark.parametrize(
  "damage, message",
  [
    (lambda r: r.pop("answer"), r"no 'answer' \(a labelled split needs one\)"),
    (
      lambda r: r["candidates"].extend(["一心一意", "三心二意", "四平八稳", "五光十色", "六神无主"]),
      r"'candidates' should be 7 idioms \(FewCLUE's layout\)",
    ),
    (lambda r: r.update(id=24), r"id '24' repeats the one at line 1"),  # record 0's id is 24
  ],
)
def test_fewclue_chid_damage_names_the_line(shared_data, tmp_path, damage, message):
  records = _records(shared_data, "chid", "train")
  assert records[0]["id"] == 24
  damage(records[9])
  _jsonl(tmp_path / "train.json", records)
  with pytest.raises(FormatError, match=rf"train\.json:10: {message}"):
    clue_reading_files.read_split("chid", tmp_path, "train")


def _clue_chid(shared_data) -> tuple[list[dict], dict]:
  """CLUE's layout from FewCLUE's records: 10 candidates, numbered blanks, the answers apart."""
  few = _records(shared_data, "chid", "train")[:4]
  records = [
    {
      "candidates": r["candidates"] + few[k - 1]["candidates"][:3],
      "content": [r["content"].replace("#idiom#", f"#idiom{k:06d}#")],
    }
    for k, r in enumerate(few)
  ]
  return records, {f"#idiom{k:06d}#": r["answer"] for k, r in enumerate(few)}


@pytest.mark.parametrize(
  "damage, where, message",
  [
    (
      lambda records, answers: answers.update({"#idiom000001#": True}),
      "train_answer.json:3",
      r"#idiom000001#: answer True should be an index into the 10 candidates",
    ),
    (
      lambda records, answers: answers.update({"#idiom000002#": None}),
      "train_answer.json:4",
      r"#idiom000002#: answer None should be an index",
    ),
    (
      lambda records, answers: records[1].update(content=[1, 2]),
      "train.json:2",
      r"passage 0 of 'content' should be str, found int",
    ),
    (
      lambda records, answers: records[2]["candidates"].extend(["一心一意", "三心二意"]),
      "train.json:3",
      r"'candidates' should be 10 idioms \(CLUE's layout\)",
    ),
  ],
)
def test_clue_chid_damage_names_the_line(shared_data, tmp_path, damage, where, message):
  records, answers = _clue_chid(shared_data)
  damage(records, answers)
  _jsonl(tmp_path / "train.json", records)
  _write(tmp_path / "train_answer.json", answers, indent=1)  # tag k on line k + 2
  with pytest.raises(FormatError, match=rf"{where}: {message}"):
    clue_reading_files.read_split("chid", tmp_path, "train")


def test_clue_chid_answers_file_of_invalid_json(shared_data, tmp_path):
  _jsonl(tmp_path / "train.json", _clue_chid(shared_data)[0])
  (tmp_path / "train_answer.json").write_text('{"#idiom000000#": 1,\n', encoding="utf-8")
  with pytest.raises(FormatError, match=r"train_answer\.json:2: invalid JSON"):
    clue_reading_files.read_split("chid", tmp_path, "train")


# --- Classification (JSON Lines) -----------------------------------------------------------------------------


@pytest.mark.parametrize("task, key", [("tnews", "id"), ("cluewsc2020", "idx")])
def test_a_repeated_id_names_both_lines(shared_data, tmp_path, task, key):
  records = _records(shared_data, task, "train")
  records[9][key] = records[2][key]
  _jsonl(tmp_path / "train.json", records)
  with pytest.raises(FormatError, match=rf"train\.json:10: id {records[2][key]} repeats the one at line 3"):
    clue.read_split(task, tmp_path, "train")

"""WYWEB loaders: every line of the real files, and malformed records named by file and line."""

import json

import pytest

from wyjax.tasks import wyweb_files
from wyjax.tasks.files import FormatError

TASKS_WITH_DATA = ("tlc", "glner", "fspc", "xuci", "irc", "wywrc", "wywmt")


def _expected_records(path) -> int:
  text = path.read_text(encoding="utf-8")
  if path.suffix == ".json":
    return len(json.loads(text))
  return sum(1 for line in text.split("\n") if line.strip())


@pytest.mark.parametrize("task", TASKS_WITH_DATA)
def test_every_record_of_the_real_files_parses(shared_data, task):
  for split in ("train", "dev"):
    path = shared_data / "wyweb" / task / f"{split}.{wyweb_files.EXTENSIONS[task][0]}"
    examples = wyweb_files.read_split(task, path.parent, split)
    assert len(examples) == _expected_records(path), (task, split)
    assert all(e.line >= 1 for e in examples)
  assert wyweb_files.read_split(task, shared_data / "wyweb" / task, "test") is None  # absent: fine


def test_real_file_contents(shared_data):
  tlc = wyweb_files.read_split("tlc", shared_data / "wyweb" / "tlc", "dev")
  assert {e.period for e in tlc} == set(wyweb_files.TLC_PERIODS) and not any("\r" in e.text for e in tlc)
  glner = wyweb_files.read_split("glner", shared_data / "wyweb" / "glner", "dev")
  assert sum(len(e.spans) for e in glner) > 1000
  assert all(e.text[s:t].strip() for e in glner for s, t, _ in e.spans)
  fspc = wyweb_files.read_split("fspc", shared_data / "wyweb" / "fspc", "train")
  assert {e.holistic for e in fspc} == set(wyweb_files.FSPC_SENTIMENTS)
  xuci = wyweb_files.read_split("xuci", shared_data / "wyweb" / "xuci", "train")
  assert all(e.text_a[e.span_a[0] : e.span_a[1] + 1] == e.text_b[e.span_b[0] : e.span_b[1] + 1] for e in xuci[:500])
  wywrc = wyweb_files.read_split("wywrc", shared_data / "wyweb" / "wywrc", "dev")
  assert all(len(e.options) == 4 and 0 <= e.label < 4 for e in wywrc)


MALFORMED = [
  ("tlc", "dev.tsv", "远古\t先秦\t冽彼下泉\r\n中古\t先秦\t浸彼苞蓍\r\n", 2, "does not contain dynasty"),
  ("tlc", "dev.tsv", "远古\t先秦\t冽彼下泉\n\n远古\t两汉\t文\n", 2, "found an empty line"),
  ("tlc", "dev.tsv", "远古\t秦\t冽彼下泉\n", 1, "unknown dynasty"),
  ("gjc", "dev.tsv", "儒藏\t子曰\n小说\t话说\n", 2, "unknown collection"),
  ("punc", "dev.tsv", "子曰学而\tOO，O\n子曰\tO\n", 2, "2 characters but the tag string 1"),
  ("punc", "dev.txt", "子曰\tO.\n", 1, "unknown tags"),
  (
    "glner",
    "dev.jsonl",
    '{"text": "史记", "label": [[0, 2, "noun_bookname"]]}\n{"text": "史记", "label": [[0, 3, "noun_bookname"]]}\n',
    2,
    "outside the text",
  ),
  ("glner", "dev.jsonl", '{"text": "史记", "label": [[0, 1, "person"]]}\n', 1, "unknown entity type"),
  ("glner", "dev.jsonl", '{"text": "史记", "label": []}\n{"text": "x", \n', 2, "invalid JSON"),
  (
    "fspc",
    "dev.json",
    json.dumps(
      [
        {
          "poem": "a|b|c|d",
          "sentiments": {
            "holistic": "neutral",
            "line1": "neutral",
            "line2": "neutral",
            "line3": "neutral",
            "line4": "neutral",
          },
        },
        {
          "poem": "a|b|c|d",
          "sentiments": {
            "holistic": "3",
            "line1": "neutral",
            "line2": "neutral",
            "line3": "neutral",
            "line4": "neutral",
          },
        },
      ],
      indent=1,
    ),
    12,
    "sentiment holistic='3'",
  ),
  ("xuci", "dev.tsv", "且贫贱\t且天\t0, 0\t0, 0\tt\n且贫贱\t且天\t0, 0\t5, 5\tf\n", 2, "position B"),
  ("xuci", "dev.tsv", "且贫贱\t且天\t0, 0\t0, 0\tx\n", 1, "label 'x'"),
  (
    "irc",
    "dev.json",
    '[\n{"idiom": "a", "origin": "b", "options": ["1", "2", "3", "4"], "label": 4}\n]',
    2,
    "label 4 is not in 0..3",
  ),
  (
    "irc",
    "dev.json",
    '[\n{"idiom": "a", "origin": "b", "options": ["1", "2"], "label": 0}\n]',
    2,
    "expected 4 option strings",
  ),
  (
    "wywrc",
    "dev.json",
    '[{"article": "a", "question": "q", "option0": "", "option1": "", "option2": "",'
    ' "option3": "", "answer": "0"},\n {"article": "a", "question": "q", "answer": "1"}]',
    2,
    "expected 4 option strings",
  ),
  (
    "wywrc",
    "dev.json",
    '[{"article": "a", "question": "q", "option0": "", "option1": "", "option2": "",'
    ' "option3": "", "answer": "0",\n "type": "x"}]',
    1,
    "field 'type' should be int",
  ),
  ("wywmt", "dev.tsv", "子曰\t孔子说\n子曰\n", 2, "expected 2 tab-separated fields, found 1"),
  (
    "glner",
    "dev.jsonl",
    '{"text": "史记", "label": [[false, true, "noun_bookname"]]}\n',
    1,
    "span offsets False, True are not integers",
  ),
  # Whatever follows a JSON array's closing bracket is an error, not ignored.
  (
    "irc",
    "dev.json",
    '[{"idiom": "a", "origin": "b", "options": ["1", "2", "3", "4"], "label": 0}]\n'
    '[{"idiom": "c", "origin": "d", "options": ["1", "2", "3", "4"], "label": 1}]',
    2,
    "unexpected .* after the JSON array's closing",
  ),
  ("wywrc", "dev.json", '[]\n\n  garbage', 3, "unexpected 'garbage' after"),
  # Values the submission would change: type -1 was dropped from it, title null written "None".
  (
    "wywrc",
    "dev.json",
    '[{"article": "a", "question": "q", "option0": "", "option1": "", "option2": "",'
    ' "option3": "", "answer": "0", "type": -1}]',
    1,
    "type -1 is not a question type, 0..9",
  ),
  (
    "wywrc",
    "dev.json",
    '[{"article": "a", "question": "q", "option0": "", "option1": "", "option2": "",'
    ' "option3": "", "answer": "0", "type": null}]',
    1,
    "field 'type' should be int, found NoneType",
  ),
  (
    "fspc",
    "dev.json",
    json.dumps(
      [
        {
          "poem": "a|b|c|d",
          "title": None,
          "sentiments": {
            "holistic": "neutral",
            "line1": "neutral",
            "line2": "neutral",
            "line3": "neutral",
            "line4": "neutral",
          },
        }
      ]
    ),
    1,
    "field 'title' should be str, found NoneType",
  ),
]


@pytest.mark.parametrize("task,name,content,line,message", MALFORMED)
def test_malformed_input_names_file_and_line(tmp_path, task, name, content, line, message):
  (tmp_path / name).write_text(content, encoding="utf-8")
  with pytest.raises(FormatError, match=rf"{name}:{line}: .*{message}"):
    wyweb_files.read_split(task, tmp_path, "dev")


def test_punc_and_gjc_formats(tmp_path):
  (tmp_path / "train.tsv").write_text("子曰学而时习之\tO：OOOO。\n", encoding="utf-8")
  (example,) = wyweb_files.read_split("punc", tmp_path, "train")
  assert example.labels == ("O", "S-：", "O", "O", "O", "O", "S-。")
  (tmp_path / "dev.tsv").write_text("史藏\t太史公曰\r\n", encoding="utf-8")
  (gjc,) = wyweb_files.read_split("gjc", tmp_path, "dev")
  assert gjc.collection == "史藏" and gjc.text == "太史公曰"

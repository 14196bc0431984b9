"""TFDS builders over the original files: exact round trip, rebuilt when files change, errors
that name file and line."""

import json

import pytest

from wyjax.tasks import datasets
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS

TASKS_WITH_DATA = ("tlc", "glner", "fspc", "xuci", "irc", "wywrc", "wywmt")


def _raw(task: str, path) -> list[tuple]:
  """The fields of every record, read with str.split and json alone (not wyjax's readers)."""
  text = path.read_text(encoding="utf-8-sig")
  if path.suffix == ".tsv":
    rows = [line.removesuffix("\r").split("\t") for line in text.split("\n") if line.strip()]
    if task == "xuci":
      return [
        (a, b, tuple(map(int, pa.split(","))), tuple(map(int, pb.split(","))), label == "t")
        for a, b, pa, pb, label in rows
      ]
    return [tuple(r[1:] if task == "tlc" else r) for r in rows]  # TLC: the period follows from the dynasty
  records = json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line]
  if task == "glner":
    return [(r["text"], tuple(tuple(span) for span in r["label"])) for r in records]
  if task == "fspc":
    return [
      (
        tuple(r["poem"].split("|")),
        r["sentiments"]["holistic"],
        tuple(r["sentiments"][f"line{i}"] for i in range(1, 5)),
      )
      for r in records
    ]
  if task == "irc":
    return [(r["idiom"], r["origin"], tuple(r["options"]), r["label"]) for r in records]
  return [(r["article"], r["question"], tuple(r[f"option{i}"] for i in range(4)), int(r["answer"])) for r in records]


def _fields(task: str, e) -> tuple:
  return {
    "tlc": lambda: (e.dynasty, e.text),
    "wywmt": lambda: (e.source, e.target),
    "xuci": lambda: (e.text_a, e.text_b, e.span_a, e.span_b, e.same_usage),
    "glner": lambda: (e.text, e.spans),
    "fspc": lambda: (e.lines, e.holistic, e.line_sentiments),
    "irc": lambda: (e.context, e.question, e.options, e.label),
    "wywrc": lambda: (e.context, e.question, e.options, e.label),
  }[task]()


@pytest.mark.parametrize("task", TASKS_WITH_DATA)
def test_tfds_build_reads_back_every_example_in_file_order(shared_data, task):
  data_dir = shared_data / "wyweb" / task
  splits = datasets.load_splits(TASKS[task].files, data_dir)
  assert set(splits) == {"train", "dev"}  # no test file: no test split
  for split, examples in splits.items():
    path = next(data_dir.glob(f"{split}.*"))
    assert [_fields(task, e) for e in examples] == _raw(task, path), split


def _write_tlc(folder, rows):
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "train.tsv").write_text("".join(f"{p}\t{d}\t{t}\r\n" for p, d, t in rows), encoding="utf-8")
  (folder / "dev.tsv").write_text("远古\t先秦\t学而时习之\r\n", encoding="utf-8")


def test_changed_files_are_rebuilt(tmp_path):
  _write_tlc(tmp_path / "tlc", [("远古", "先秦", "子曰学而时习之"), ("近古", "清", "红楼梦")])
  first = datasets.load_splits(TASKS["tlc"].files, tmp_path / "tlc")
  assert [e.text for e in first["train"]] == ["子曰学而时习之", "红楼梦"]
  _write_tlc(tmp_path / "tlc", [("中古", "唐", "床前明月光")])
  second = datasets.load_splits(TASKS["tlc"].files, tmp_path / "tlc")
  assert [(e.period, e.dynasty, e.text, e.line) for e in second["train"]] == [("中古", "唐", "床前明月光", 1)]


def test_malformed_file_fails_the_build_with_file_and_line(tmp_path):
  _write_tlc(tmp_path / "tlc", [("远古", "先秦", "子曰"), ("远古", "唐", "床前明月光")])
  with pytest.raises(FormatError, match=r"train\.tsv:2: period '远古' does not contain dynasty '唐'"):
    datasets.load_splits(TASKS["tlc"].files, tmp_path / "tlc")


def test_missing_folder_and_train_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such task folder"):
    datasets.load_splits(TASKS["tlc"].files, tmp_path / "absent")
  (tmp_path / "tlc").mkdir()
  with pytest.raises(FileNotFoundError, match=r"no train\.\{tsv,txt\}"):
    datasets.load_splits(TASKS["tlc"].files, tmp_path / "tlc")


def test_empty_split_file_is_an_error(tmp_path):
  _write_tlc(tmp_path / "tlc", [])
  with pytest.raises(ValueError, match=r"train\.tsv: the train split has no examples"):
    datasets.load_splits(TASKS["tlc"].files, tmp_path / "tlc")

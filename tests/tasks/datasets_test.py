"""TFDS builders over the original files: exact round trip, rebuilt when files change, errors
that name file and line."""
import pytest

from wyjax.tasks import datasets, wyweb
from wyjax.tasks.files import FormatError

TASKS_WITH_DATA = ("tlc", "glner", "fspc", "xuci", "irc", "wywrc", "wywmt")


@pytest.mark.parametrize("task", TASKS_WITH_DATA)
def test_tfds_build_reads_back_every_example_in_file_order(shared_data, task):
  data_dir = shared_data / "wyweb" / task
  splits = datasets.load_splits(task, data_dir)
  assert set(splits) == {"train", "dev"}  # no test file: no test split
  for split, examples in splits.items():
    assert examples == wyweb.read_split(task, data_dir, split)


def _write_tlc(folder, rows):
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "train.tsv").write_text("".join(f"{p}\t{d}\t{t}\r\n" for p, d, t in rows), encoding="utf-8")
  (folder / "dev.tsv").write_text("远古\t先秦\t学而时习之\r\n", encoding="utf-8")


def test_changed_files_are_rebuilt(tmp_path):
  _write_tlc(tmp_path / "tlc", [("远古", "先秦", "子曰学而时习之"), ("近古", "清", "红楼梦")])
  first = datasets.load_splits("tlc", tmp_path / "tlc")
  assert [e.text for e in first["train"]] == ["子曰学而时习之", "红楼梦"]
  _write_tlc(tmp_path / "tlc", [("中古", "唐", "床前明月光")])
  second = datasets.load_splits("tlc", tmp_path / "tlc")
  assert [(e.period, e.dynasty, e.text, e.line) for e in second["train"]] == [("中古", "唐", "床前明月光", 1)]


def test_malformed_file_fails_the_build_with_file_and_line(tmp_path):
  _write_tlc(tmp_path / "tlc", [("远古", "先秦", "子曰"), ("远古", "唐", "床前明月光")])
  with pytest.raises(FormatError, match=r"train\.tsv:2: period '远古' does not contain dynasty '唐'"):
    datasets.load_splits("tlc", tmp_path / "tlc")


def test_missing_folder_and_train_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such task folder"):
    datasets.load_splits("tlc", tmp_path / "absent")
  (tmp_path / "tlc").mkdir()
  with pytest.raises(FileNotFoundError, match=r"no train\.\{tsv,txt\}"):
    datasets.load_splits("tlc", tmp_path / "tlc")

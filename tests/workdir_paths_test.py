"""A workdir's paths (issue 84, items 4 and 5): a rerun from another folder, with the same folders spelled for it,
is the same run; a --workdir (or --out) that is no folder is one line naming it and what it is."""

import json
import os
import subprocess
import sys

import ml_collections
import pytest

from wyjax.core import guards, io_paths, run_config
from wyjax.train import pretraining_config


def _config(**values) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict({"data_dir": "", "init": "", "corpus": {"source": "poetry", "vocab": ""}})
  config.update_from_flattened_dict(values)
  return config


def test_a_rerun_from_another_folder_with_the_same_folders_is_the_same_run(tmp_path, monkeypatch):
  """Rerun from the parent folder, `data_dir: 'punc_data' -> 'models/punc_data'` and `init: '../hf/bert' ->
  'hf/bert'` were refused as another config: the stored relative paths were read in the rerun's folder."""
  for folder in ("models/punc_data", "models/texts", "hf/bert", "other"):
    (tmp_path / folder).mkdir(parents=True)
  workdir = tmp_path / "models" / "run"
  monkeypatch.chdir(tmp_path / "models")
  typed_there = {"data_dir": "punc_data", "init": "../hf/bert", "corpus.source": "text:texts/"}
  run_config.store_config(workdir, _config(**typed_there), {})
  stored = json.loads((workdir / run_config.CONFIG).read_text())
  assert stored["data_dir"] == "punc_data" and stored[run_config.WORKING_DIRECTORY] == str(tmp_path / "models")
  monkeypatch.chdir(tmp_path)
  typed_here = {"data_dir": "models/punc_data", "init": "hf/bert", "corpus.source": "text:models/texts"}
  assert run_config.check_config(workdir, _config(**typed_here), places=pretraining_config.PLACES) == {}
  for key, value, listed in (
    ("data_dir", "other", "data_dir: 'punc_data' -> 'other'"),
    ("init", "org/name", "init: '../hf/bert' -> 'org/name'"),
  ):
    with pytest.raises(run_config.ConfigChanged, match=listed):  # another folder, a Hub id: another run
      run_config.check_config(workdir, _config(**{**typed_here, key: value}), places=pretraining_config.PLACES)
  assert os.getcwd() == str(tmp_path)
  # A Hub id stays a Hub id, wherever the rerun starts.
  monkeypatch.chdir(tmp_path / "models")
  run_config.store_config(workdir, _config(init="org/name"), {})
  monkeypatch.chdir(tmp_path)
  assert run_config.check_config(workdir, _config(init="org/name"), places=pretraining_config.PLACES) == {}


def test_a_stored_config_without_its_working_directory_is_read_as_before(tmp_path, monkeypatch):
  (tmp_path / "punc_data").mkdir()
  (tmp_path / run_config.CONFIG).write_text(json.dumps(_config(data_dir="punc_data").to_dict()))
  monkeypatch.chdir(tmp_path)
  assert run_config.check_config(tmp_path, _config(data_dir="./punc_data/"), places=pretraining_config.PLACES) == {}


def test_an_output_folder_that_is_no_folder_is_named_with_what_it_is(tmp_path, monkeypatch):
  """`--workdir afile` and a --workdir that is a link in a loop got "afile: File exists"."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "afile").write_text("mine")
  os.symlink("loop", tmp_path / "loop")
  os.symlink("gone", tmp_path / "dangling")
  (tmp_path / "folder").mkdir()
  for typed, says in (
    ("afile", "--workdir afile is a file, not a folder"),
    ("afile/run", "--workdir afile/run lies under afile, which is a file, not a folder"),
    ("loop", "--workdir loop is a symbolic link in a loop"),
    ("loop/run", "--workdir loop/run lies under loop, which is a symbolic link in a loop"),
    ("dangling", "--workdir dangling is a symbolic link to gone, which does not exist"),
  ):
    with pytest.raises(guards.RunError) as refused:
      run_config.check_reads(typed, (), {}, "fine-tuning")
    assert str(refused.value) == f"{says}; choose a folder, or a name that is free"
  for free in ("folder", "folder/new/run", "new", str(tmp_path / "new"), "gs://bucket/run"):
    io_paths.check_folder("--workdir", free)
  assert (tmp_path / "afile").read_text() == "mine" and sorted(os.listdir(tmp_path)) == [
    "afile",
    "dangling",
    "folder",
    "loop",
  ]


@pytest.mark.parametrize(
  "command",
  [
    ["wyjax.pretrain", "--config=pretrain/deberta_tiny.py", "--workdir=afile"],
    ["wyjax.finetune", "--config=tlc.py", "--workdir=afile"],
    ["wyjax.demo", "--workdir=afile"],
    ["wyjax.export", "--random_init=pretrain/deberta_tiny.py", "--out=afile"],
    ["wyjax.benchmark", "--data_root=.", "--out=afile"],
  ],
)
def test_the_commands_refuse_a_workdir_that_is_a_file_in_one_line(tmp_path, command):
  (tmp_path / "afile").write_text("mine")
  result = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, cwd=tmp_path, timeout=120)
  flag = command[-1].split("=")[0]
  errors = [line for line in result.stderr.splitlines() if not line.startswith("library logs go to")]
  assert result.returncode == 1 and errors == [
    f"wyjax: error: {flag} afile is a file, not a folder; choose a folder, or a name that is free"
  ], result.stderr
  assert os.listdir(tmp_path) == ["afile"] and (tmp_path / "afile").read_text() == "mine"

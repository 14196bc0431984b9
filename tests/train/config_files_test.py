"""Config names: `--config=tlc.py` from any directory, a real file first, unknown names listed."""

import pathlib

import pytest
from absl import flags

from wyjax.core import config_files

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  return tmp_path


@pytest.mark.parametrize(
  "spec, path",
  [
    ("tlc.py", "tlc.py"),
    ("tlc", "tlc.py"),
    ("configs/tlc.py", "tlc.py"),
    ("pretrain/deberta_base.py", "pretrain/deberta_base.py"),
    ("pretrain/deberta_tiny", "pretrain/deberta_tiny.py"),
    ("ccpm.py:match", "ccpm.py:match"),
  ],
)
def test_names_resolve_to_the_packaged_configs_from_any_directory(elsewhere, spec, path):
  assert config_files.resolve(spec) == f"{CONFIGS}/{path}"


def test_a_real_file_wins_over_a_name(elsewhere):
  (elsewhere / "tlc.py").write_text("def get_config():\n  return {'mine': True}\n")
  assert config_files.resolve("tlc.py") == "tlc.py"
  assert config_files.load("tlc").task == "tlc"  # the library loads a name's packaged config


def test_the_library_loads_a_config_at_an_absolute_path(elsewhere):
  (elsewhere / "older.py").write_text("def get_config(size='base'):\n  return {'size': size}\n")
  assert config_files.load(str(elsewhere / "older.py")) == {"size": "base"}
  assert config_files.load(f"{elsewhere / 'older.py'}:tiny") == {"size": "tiny"}


def test_an_unknown_name_lists_the_available_ones(elsewhere):
  with pytest.raises(ValueError, match=r"no config 'tlcx'.*those are aceval, .*pretrain/deberta_base, .*tlc, "):
    config_files.resolve("tlcx")


def test_the_flag_takes_names_and_overrides(elsewhere):
  values = flags.FlagValues()
  argv = ["prog", "--config=ccpm.py:match", "--config.num_train_steps=7"]
  config = config_files.DEFINE_config("config", None, "", flag_values=values, sys_argv=argv)
  values(argv)
  assert config.value.task == "ccpm_match" and config.value.num_train_steps == 7
  with pytest.raises(flags.IllegalFlagValueError, match="no config 'tclx'.*those are"):
    values(["prog", "--config=tclx"])

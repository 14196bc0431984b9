"""Outputs never land in inputs (issue 63, docs/reliability.md "Wave 7"): an output that is or lies
inside what a command reads is refused, --overwrite or not, and so is a path it reads that lies
inside what it writes; paths compare by what they name. In process: the commands' own cases run
as real commands in tests/cli_test.py and tests/one_line_errors_test.py."""

import os
import re
import sys

import pytest

from tests.stops_test import tlc_folder
from wyjax.core import guards, io_paths, run_config
from wyjax.hf import export_folder
from wyjax.train import finetuning, suite


def test_an_output_inside_an_input_is_refused_however_spelled(tmp_path, monkeypatch):
  model = tmp_path / "model"
  model.mkdir()
  (tmp_path / "model-hf").mkdir()  # a sibling whose name begins with the model's
  (tmp_path / "link").symlink_to(model)
  monkeypatch.chdir(tmp_path)
  for output in ("model/vocab.txt", f"{model}/", "link/sub/out.txt", "./model/../model/results.json"):
    with pytest.raises(guards.RunError, match=re.escape(f"--output {output} ")):
      io_paths.check_apart({"--output": output}, {"--model": str(model)}, "predict")
  io_paths.check_apart(
    {"--output": "model-hf/out.txt", "--out": str(tmp_path)}, {"--model": "model/", "--init": ""}, "predict"
  )  # a sibling, a folder that holds the input, no path: not inside


def test_standard_output_redirected_into_an_input_is_refused(tmp_path):
  """`predict --model=M >> M/vocab.txt` appended predictions to the model's vocabulary."""
  (tmp_path / "model").mkdir()
  target = tmp_path / "model" / "vocab.txt"
  sys.stdout.flush()
  saved = os.dup(1)
  try:
    with open(target, "a") as redirected:
      os.dup2(redirected.fileno(), 1)
    with pytest.raises(
      guards.RunError,
      match=re.escape(f"standard output ({target}) lies inside --model {tmp_path / 'model'}, which predict reads"),
    ):
      io_paths.check_apart({"standard output": io_paths.STDOUT}, {"--model": str(tmp_path / "model")}, "predict")
  finally:
    os.dup2(saved, 1)
    os.close(saved)
  io_paths.check_apart({"standard output": io_paths.STDOUT}, {"--model": str(tmp_path / "model")}, "predict")


def test_fine_tuning_from_a_seed_of_its_own_workdir_is_refused_before_anything_moves(tmp_path):
  """`--fresh_start --config.init=WORKDIR/seed_0` trained from the seed it moved aside (its
  weights already read), and the same command then failed: its init was gone."""
  data, workdir = tlc_folder(tmp_path / "tlc", {"train": 8, "dev": 4}), tmp_path / "run"
  (workdir / "seed_0").mkdir(parents=True)
  (workdir / run_config.CONFIG).write_text("{}")
  (workdir / "data").mkdir()
  before = sorted(p.name for p in workdir.iterdir())
  for init, says in (
    (
      workdir / "seed_0",
      f"--config.init {workdir}/seed_0/ lies inside seed_0 of --workdir {workdir}, which fine-tuning writes",
    ),
    (workdir, f"--workdir {workdir} is --config.init {workdir}/, which fine-tuning reads"),
  ):
    config = suite.task_config("tlc", data_dir=str(data), init=f"{init}/")
    with pytest.raises(guards.RunError, match=re.escape(says)):
      finetuning.finetune(config, workdir, fresh_start=True)
  with pytest.raises(guards.RunError, match=re.escape(f"--workdir {data / 'run'} lies inside --config.data_dir")):
    finetuning.finetune(suite.task_config("tlc", data_dir=str(data)), data / "run")
  assert sorted(p.name for p in workdir.iterdir()) == before and not (data / "run").exists()
  run_config.check_reads(workdir, finetuning.WRITTEN, {"--config.data_dir": str(workdir / "data")}, "fine-tuning")


@pytest.mark.parametrize("task,option", [("aceval", "transfer_init"), ("cclue_spo", "predicates_from")])
def test_a_task_option_naming_a_run_is_read_as_an_input(tmp_path, task, option):
  """AC-EVAL's transfer model and C-CLUE triples' predicate run are read like the init: a
  --workdir inside either would write over what the run reads."""
  other_run = tmp_path / "other_run"
  config = suite.task_config(task, data_dir=str(tmp_path / "data"), **{option: str(other_run)})
  with pytest.raises(
    guards.RunError,
    match=re.escape(f"--workdir {other_run / 'x'} lies inside --config.{option} {other_run}, which fine-tuning reads"),
  ):
    finetuning.finetune(config, other_run / "x")
  assert not other_run.exists()


def test_the_benchmark_never_writes_inside_its_init_or_data(tmp_path):
  (tmp_path / "tasks").mkdir()
  with pytest.raises(guards.RunError, match=re.escape(f"--out {tmp_path / 'tasks' / 'out'} lies inside --data_root")):
    suite.run(init="", data_root=tmp_path / "tasks", out=tmp_path / "tasks" / "out", tasks=["tlc"], name="x")
  assert not (tmp_path / "tasks" / "out").exists()


def test_an_export_replaces_only_the_files_its_command_recorded(tmp_path):
  """The demo replaced a user's DIR/hf/README.md and config.json without a word (it exported with
  overwrite on); it now replaces only its own earlier export, recorded by content."""
  out, record = tmp_path / "hf", tmp_path / "hf_files.json"
  assert export_folder.replaces_own(out, record) is False  # nothing there: nothing to replace
  out.mkdir()
  (out / "config.json").write_text("{}")
  export_folder.record_files(out, record)
  assert export_folder.replaces_own(out, record) is True
  (out / "README.md").write_text("# my notes\n")
  with pytest.raises(FileExistsError, match=re.escape(f"{out} holds README.md, which no earlier export")):
    export_folder.replaces_own(out, record)
  (out / "README.md").unlink()
  (out / "config.json").write_text('{"mine": 1}')  # changed since it was exported
  with pytest.raises(FileExistsError, match=re.escape(f"{out} holds config.json, which no earlier export")):
    export_folder.replaces_own(out, record)

"""A refused command leaves nothing it created (issue 84): its log and the empty checkpoints/ go, with the
workdir if it made it; an existing workdir keeps the user's files as they were."""

import subprocess
import sys

from tests.stops_test import tlc_folder
from tests.train.conftest import REPO_ROOT, pretrain_command, pretrain_env, tiny_checkpoint


def _damaged_init(tmp_path):
  """A transformers folder whose pytorch_model.bin is no PyTorch checkpoint: refused when its weights are read."""
  tiny_checkpoint(tmp_path / "init", ["之乎者也矣焉哉"])
  folder = tmp_path / "init" / "hf"
  (folder / "model.safetensors").unlink()
  (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
  return folder


def _refused(command, tmp_path) -> str:
  result = subprocess.run(
    command,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
  return result.stderr.splitlines()[-1]


def test_a_refused_run_leaves_no_log_nor_empty_checkpoints_and_keeps_the_users_files(tiny_corpus, tmp_path):
  """Pretraining refused at --config.init's weights (after orbax made WORKDIR/checkpoints/) left pretrain.log and
  an empty checkpoints/; fine-tuning refused there left finetune.log. The workdir the command made goes, with the
  parent it made; in a folder the user made, what was there stays as it was."""
  init = _damaged_init(tmp_path)
  error = f"wyjax: error: {init / 'pytorch_model.bin'}: not a readable PyTorch checkpoint"
  workdir = tmp_path / "new" / "run"
  assert _refused(pretrain_command(workdir, tiny_corpus, f"--config.init={init}"), tmp_path).startswith(error)
  assert not (tmp_path / "new").exists()

  mine = tmp_path / "mine"
  (mine / "empty").mkdir(parents=True)
  (mine / "notes.txt").write_text("mine")
  tlc = tlc_folder(tmp_path / "tlc", {"train": 8, "dev": 4})
  finetune = [sys.executable, "-m", "wyjax.finetune", "--config=tlc.py", f"--config.data_dir={tlc}"]
  assert _refused([*finetune, f"--config.init={init}", f"--workdir={mine}"], tmp_path).startswith(error)
  assert sorted(p.name for p in mine.rglob("*")) == ["empty", "notes.txt"]
  assert (mine / "notes.txt").read_text() == "mine"

import json
import os
import pathlib
import subprocess
import sys

import jax
import pytest

from tests import checkpoint_files
from tests.conftest import CPU_XLA_FLAGS, XLA_CACHE
from wyjax.data import prepare
from wyjax.data import tokenizer as tk
from wyjax.hf import export_folder, loading
from wyjax.models import EncoderConfig
from wyjax.train import task_model

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = pathlib.Path(__file__).with_name("pretrain_config.py")


@pytest.fixture(scope="session")
def tiny_corpus(shared_data, tmp_path_factory):
  """The Daizhige sample, prepared as 64-token sequences."""
  out = tmp_path_factory.mktemp("corpus")
  prepare.prepare_corpus(
    out,
    prepare.Options(source=f"daizhige:{shared_data / 'daizhige_sample'}", sequence_length=64, valid_fraction=0.2),
    workers=1,
    progress=False,
    log=lambda *_: None,
  )
  return out


def pretrain_command(workdir, data_dir, *overrides):
  return [
    sys.executable,
    "-m",
    "wyjax.pretrain",
    f"--config={CONFIG}",
    f"--workdir={workdir}",
    f"--config.data_dir={data_dir}",
    *overrides,
  ]


def pretrain_env(devices: int = 1, **extra) -> dict:
  env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "SLURM_", "TPU_"))}
  env["XLA_FLAGS"] = f"{CPU_XLA_FLAGS} --xla_force_host_platform_device_count={devices}"
  env["JAX_PLATFORMS"] = "cpu"
  env["JAX_COMPILATION_CACHE_DIR"] = str(XLA_CACHE)
  env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  env.update(extra)
  return env


def run_pretrain(workdir, data_dir, *overrides, devices: int = 1, **kwargs):
  result = subprocess.run(
    pretrain_command(workdir, data_dir, *overrides),
    env=pretrain_env(devices),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    **kwargs,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def losses(workdir) -> dict[int, float]:
  """step → training loss, the last record of each step (a resumed run may repeat some)."""
  out = {}
  for line in (pathlib.Path(workdir) / "metrics.jsonl").read_text().splitlines():
    record = json.loads(line)
    if "loss" in record:
      out[record["step"]] = record["loss"]
  return out


def tiny_checkpoint(tmp_path, vocab_texts):
  """A randomly initialised tiny MLM saved as a wyjax workdir (tmp_path/wyjax) and exported to
  transformers (tmp_path/hf); returns its params."""
  tokenizer = tk.Tokenizer(tk.build_vocab(vocab_texts))
  config = EncoderConfig(**task_model.FRESH_TINY_MODEL, vocab_size=len(tokenizer))
  params = loading.init_params(config, jax.random.key(7))
  checkpoint_files.save_params(tmp_path / "wyjax", 0, params, config, tokenizer)
  export_folder.export(loading.Model(config, params, tokenizer), tmp_path / "hf")
  return params

"""A second run of the same command compiles nothing (wyjax.core.compilation_cache.use_compilation_cache): its
programs come from the persistent compilation cache under the wyjax cache, and on a GPU XLA's
autotuning results from beside it."""

import subprocess
import sys

from tests.train.conftest import REPO_ROOT, pretrain_env

AUTOTUNE_DIR = """
import jax
from jax._src import compiler
from wyjax.core.compilation_cache import use_compilation_cache
use_compilation_cache()
options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
print(options.executable_build_options.debug_options.xla_gpu_per_fusion_autotune_cache_dir)
"""


def _env(cache, **extra) -> dict:
  env = pretrain_env(WYJAX_CACHE=str(cache), **extra)
  del env["JAX_COMPILATION_CACHE_DIR"]  # the wyjax cache's own, as a user's run has it
  return env


def _run(command, env) -> str:
  result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def test_autotuning_results_are_kept_in_the_wyjax_cache(tmp_path):
  """What every compile is told (XLA:GPU reads it; the CPU ignores it): autotuning results go
  beside the compiled programs, unless XLA_FLAGS names a directory of the user's."""
  assert _run([sys.executable, "-c", AUTOTUNE_DIR], _env(tmp_path)).strip() == str(
    tmp_path / "xla" / "xla_gpu_per_fusion_autotune_cache_dir"
  )
  theirs = _env(tmp_path, XLA_FLAGS="--xla_gpu_per_fusion_autotune_cache_dir=/elsewhere")
  assert _run([sys.executable, "-c", AUTOTUNE_DIR], theirs).strip() == "/elsewhere"


def test_fine_tuning_and_predicting_again_compile_nothing(shared_data, tmp_path):
  """The same fine-tuning (in another workdir) and the same prediction, each run twice: the
  second run adds no program to the cache and rewrites none (each was a hit)."""
  tlc = tmp_path / "tlc"
  tlc.mkdir()
  lines = (shared_data / "wyweb" / "tlc" / "train.tsv").read_text(encoding="utf-8").splitlines()
  (tlc / "train.tsv").write_text("\n".join(lines[:200]) + "\n", encoding="utf-8")
  (tlc / "dev.tsv").write_text("\n".join(lines[200:240]) + "\n", encoding="utf-8")
  (tmp_path / "input.txt").write_text(
    "\n".join(line.split("\t")[0] for line in lines[240:250]) + "\n", encoding="utf-8"
  )
  cache, env = tmp_path / "cache" / "xla", _env(tmp_path / "cache")
  programs = lambda: {path.name: path.stat().st_mtime_ns for path in cache.iterdir()}
  finetune = [
    sys.executable,
    "-m",
    "wyjax.finetune",
    "--config=configs/tlc.py",
    f"--config.data_dir={tlc}",
    "--config.num_train_steps=4",
    "--config.eval_every=4",
    "--config.batch_size=8",
    "--config.max_length=32",
  ]
  predict = [sys.executable, "-m", "wyjax.predict", f"--model={tmp_path / 'one'}", f"--input={tmp_path / 'input.txt'}"]

  _run(finetune + [f"--workdir={tmp_path / 'one'}"], env)
  fine_tuned = programs()
  assert len(fine_tuned) >= 4, sorted(fine_tuned)  # the train and predict steps, the init, the fresh state, ...
  _run(finetune + [f"--workdir={tmp_path / 'two'}"], env)
  assert programs() == fine_tuned
  first = _run(predict, env)
  predicted = programs()
  assert len(predicted) > len(fine_tuned)  # its own batch's programs
  assert _run(predict, env) == first and programs() == predicted

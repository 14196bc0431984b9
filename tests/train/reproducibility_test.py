"""The same command on the same machine gives the same numbers: a short pretraining and a short
fine-tuning of it, each run twice in fresh processes with different hash seeds (set and dict
order), agree exactly: every logged loss, gradient norm and dev score, the predictions and
the parameters."""

import json
import subprocess
import sys

import jax
import numpy as np

from tests.train.conftest import REPO_ROOT, pretrain_command, pretrain_env
from wyjax.core import checkpoints

TIMINGS = ("compile_seconds", "step_seconds", "tokens_per_second", "mfu")
SCORES = ("dev", "test", "runs", "dev_confusion", "majority_baseline", "linear_baseline", "learning_rate")


def _run(command, hash_seed: int, tmp_path):
  env = pretrain_env(PYTHONHASHSEED=str(hash_seed), WYJAX_CACHE=str(tmp_path / f"cache_{hash_seed}"))
  result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-3000:]


def _metrics(workdir) -> list[dict]:
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  return [{k: v for k, v in r.items() if k not in TIMINGS} for r in records]


def _params(workdir) -> list[np.ndarray]:
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(checkpoints.restore_model(workdir)[1])]


def test_pretraining_and_fine_tuning_twice_give_the_same_numbers(tiny_corpus, shared_data, tmp_path):
  runs = {1: tmp_path / "one", 2: tmp_path / "two"}
  for hash_seed, root in runs.items():
    _run(pretrain_command(root / "pretrain", tiny_corpus, "--config.eval_every=3"), hash_seed, tmp_path)
    _run(
      [
        sys.executable,
        "-m",
        "wyjax.finetune",
        "--config=configs/tlc.py",
        f"--workdir={root / 'tlc'}",
        f"--config.data_dir={shared_data / 'wyweb' / 'tlc'}",
        f"--config.init={root / 'pretrain'}",
        "--config.num_train_steps=12",
        "--config.eval_every=12",
        "--config.log_every=1",
        "--config.batch_size=16",
        "--config.max_length=48",
      ],
      hash_seed,
      tmp_path,
    )
  one, two = runs.values()
  pretrained = _metrics(one / "pretrain")
  assert len([r for r in pretrained if "loss" in r]) == 6 and any("valid_loss" in r for r in pretrained)
  assert pretrained == _metrics(two / "pretrain")
  for a, b in zip(_params(one / "pretrain"), _params(two / "pretrain"), strict=True):
    np.testing.assert_array_equal(a, b)

  fine_tuned = _metrics(one / "tlc" / "seed_0")
  assert len([r for r in fine_tuned if "loss" in r]) == 12 and any("dev_accuracy" in r for r in fine_tuned)
  assert fine_tuned == _metrics(two / "tlc" / "seed_0")
  results = [json.loads((root / "tlc" / "results.json").read_text()) for root in runs.values()]
  assert {k: results[0][k] for k in SCORES} == {k: results[1][k] for k in SCORES}
  predictions = [(root / "tlc" / "seed_0" / "dev_predictions.tsv").read_bytes() for root in runs.values()]
  assert predictions[0] == predictions[1]
  for a, b in zip(_params(one / "tlc" / "seed_0"), _params(two / "tlc" / "seed_0"), strict=True):
    np.testing.assert_array_equal(a, b)

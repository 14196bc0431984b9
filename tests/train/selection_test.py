"""Which parameters a fine-tuning run keeps: `keep_checkpoint` ("best_dev" or "last") and
`patience` 0 (no early stopping), as CLUE's classification scripts train (fixed epochs, the
last model)."""

import hashlib
import json
import shutil
import signal

import jax
import numpy as np
import pytest

from wyjax.core import guards
from wyjax.train import config_values, finetuning, learning_rates, suite, task_model

MAIN_METRIC = "accuracy"  # TLC's


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))


@pytest.fixture(scope="module")
def tlc_dir(shared_data, tmp_path_factory):
  """A small TLC folder: real lines of the shared train file (train 64, dev 16, test 8)."""
  out = tmp_path_factory.mktemp("tlc")
  lines = (shared_data / "wyweb" / "tlc" / "train.tsv").read_bytes().split(b"\n")
  for split, rows in {"train": slice(0, 64), "dev": slice(64, 80), "test": slice(80, 88)}.items():
    (out / f"{split}.tsv").write_bytes(b"\n".join(lines[rows]))
  return out


def _fingerprint(params) -> str:
  leaves = jax.tree_util.tree_leaves(jax.device_get(params))
  return hashlib.sha1(b"".join(np.ascontiguousarray(leaf).tobytes() for leaf in leaves)).hexdigest()


@pytest.fixture
def worsening_dev(monkeypatch):
  """Every evaluation scores 0.1 less than the one before it (dev gets worse all along); returns
  the fingerprints of the parameters evaluated, in order."""
  evaluated = []
  real = task_model.TaskModel.evaluate

  def evaluate(self, params, examples, features, **kwargs):
    scores, predictions, confusion = real(self, params, examples, features, **kwargs)
    evaluated.append(_fingerprint(params))
    return {**scores, MAIN_METRIC: 1.0 - 0.1 * len(evaluated)}, predictions, confusion

  monkeypatch.setattr(task_model.TaskModel, "evaluate", evaluate)
  return evaluated


# 6 steps of batch 8 (an epoch is 8): evaluations at steps 2, 4 and 6, each worse than the last. No
# learning rate: the fresh tiny model's is chosen from its size (wyjax.train.learning_rates).
SETTINGS = dict(num_train_steps=6, eval_every=2, batch_size=8, max_length=32, log_every=2)


@pytest.mark.parametrize(
  "keep, patience, kept_step, evaluations",
  [
    ("last", 0, 6, [2, 4, 6]),  # CLUE's classification protocol: every step trained, the last kept
    ("best_dev", 0, 2, [2, 4, 6]),  # no early stopping, the best (first) evaluation kept
    ("best_dev", 1, 2, [2, 4]),  # early stopping after one evaluation without improvement
  ],
)
def test_the_kept_checkpoint_is_restored_and_scored(
  tlc_dir, tmp_path, worsening_dev, keep, patience, kept_step, evaluations
):
  config = suite.task_config("tlc", data_dir=str(tlc_dir), keep_checkpoint=keep, patience=patience, **SETTINGS)
  results = finetuning.finetune(config, tmp_path / "run")
  seed = tmp_path / "run" / "seed_0"
  run = json.loads((seed / "run.json").read_text())
  records = [json.loads(line) for line in (seed / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in records if f"dev_{MAIN_METRIC}" in r] == evaluations
  assert run["best_step"] == kept_step and results["runs"][0]["best_step"] == kept_step
  assert run["stopped_early"] == (evaluations[-1] < SETTINGS["num_train_steps"])
  assert sorted(p.name for p in (seed / "checkpoints").iterdir()) == [str(kept_step)]  # only the kept one
  # The evaluations in training, then the final test one, which saw the kept step's parameters,
  # restored exactly. Dev is not scored again: its final scores are the kept evaluation's.
  in_training, final = worsening_dev[: len(evaluations)], worsening_dev[len(evaluations) :]
  assert len(set(in_training)) == len(evaluations)  # training changed the parameters between evaluations
  assert final == [in_training[evaluations.index(kept_step)]]
  assert run["dev"][MAIN_METRIC] == pytest.approx(1.0 - 0.1 * (evaluations.index(kept_step) + 1))


@pytest.mark.parametrize("stop_at", [3, 6])
def test_a_resumed_run_keeps_the_last_checkpoint(tlc_dir, tmp_path, worsening_dev, monkeypatch, stop_at):
  """Stopped by SIGTERM at step 3 (between evaluations) or at step 6 (the last evaluation, its
  kept checkpoint lost as if the process died between the resume point's save and the kept
  one's), the rerun ends with step 6's parameters restored."""
  config = suite.task_config("tlc", data_dir=str(tlc_dir), keep_checkpoint="last", patience=0, **SETTINGS)
  signal_at = guards.StopRequest.signal_at
  monkeypatch.setattr(guards.StopRequest, "signal_at", lambda self, step: signal.SIGTERM * (step == stop_at))
  with pytest.raises(guards.Interrupted):
    finetuning.finetune(config, tmp_path / "run")
  seed = tmp_path / "run" / "seed_0"
  if stop_at == 6:
    shutil.rmtree(seed / "checkpoints" / "6")
  monkeypatch.setattr(guards.StopRequest, "signal_at", signal_at)
  results = finetuning.finetune(config, tmp_path / "run")  # the rerun resolves the same rate: no config change
  assert results["learning_rate"] == learning_rates.TINY_LEARNING_RATE
  assert json.loads((tmp_path / "run" / "run_config.json").read_text())["learning_rate"] == 1e-3  # as trained
  run = json.loads((seed / "run.json").read_text())
  assert run["best_step"] == 6 and not run["stopped_early"]
  assert sorted(p.name for p in (seed / "checkpoints").iterdir()) == ["6"]
  evaluations = [
    r["step"] for r in map(json.loads, (seed / "metrics.jsonl").read_text().splitlines()) if f"dev_{MAIN_METRIC}" in r
  ]
  assert evaluations == [2, 4, 6]
  assert worsening_dev[3] == worsening_dev[2]  # the final dev evaluation saw step 6's parameters


@pytest.mark.parametrize(
  "override, message",
  [
    (dict(keep_checkpoint="final"), r"keep_checkpoint is 'final'; allowed: 'best_dev' .* or 'last'"),
    (dict(keep_checkpoint="best"), r"allowed: 'best_dev' .* or 'last'"),
    (dict(patience=-1), r"patience is -1; allowed: an integer ≥ 0"),
  ],
)
def test_an_unknown_selection_is_refused_before_anything_is_written(tmp_path, override, message):
  config = suite.task_config("tlc", data_dir=str(tmp_path / "absent"), **override)
  with pytest.raises(ValueError, match=message):
    finetuning.finetune(config, tmp_path / "run")
  assert not (tmp_path / "run").exists()


def test_clue_configs_train_fixed_epochs():
  """Every CLUE config trains its epochs through (patience 0); the classification tasks keep the
  last model, the reading-comprehension ones (CLUE's MRC scripts) the best on dev."""
  for task in ("afqmc", "tnews", "iflytek", "cmnli", "ocnli", "cluewsc2020", "csl", "cmrc2018", "chid", "c3"):
    config = suite.task_config(task)
    config_values.check(config, config_values.FINETUNING)
    assert config.patience == 0, task
    assert config.keep_checkpoint == ("best_dev" if task in ("cmrc2018", "chid", "c3") else "last"), task

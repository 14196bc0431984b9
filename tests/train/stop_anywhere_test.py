"""A stop anywhere resumes exactly (issue 84): tiny pretraining runs (with probes and without) and a tiny
fine-tuning, stopped by a real SIGINT at one point after another (after a train step, in a validation
batch, in a probe, in a checkpoint save, in the final evaluation; fine-tuning's dev evaluation and its
final predictions), each time rerun, end with the uninterrupted run's metrics.jsonl, row by row but
for timings, and its results.

In one process: the SIGINT is raised from inside a wrapped function of the run (its eval step, a
probe's batch, a checkpoint save, a metrics write), so each stop comes at the same point every time.
15 stop points: 7 in pretraining with probes, 2 without, 6 in fine-tuning.
"""

import dataclasses
import json
import signal
import sys

import pytest

from tests.stops_test import tlc_folder
from tests.train import pretrain_config
from wyjax.core import checkpoints, guards, run_metrics
from wyjax.train import finetuning, pretraining, probes, suite, task_model

TIMINGS = {"step_seconds", "tokens_per_second", "compile_seconds", "mfu", "probe_seconds"}
THIS = sys.modules[__name__]
STEPS = 4  # evaluations at steps 0, 2 and 4 (fine-tuning's at 2 and 4); pretraining's checkpoints at 3 and 4


def _rows(workdir) -> list[dict]:
  """metrics.jsonl's records in order, without timings (a record of timings alone dropped)."""
  rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  rows = [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]
  return [row for row in rows if set(row) != {"step"}]


class Stop:
  """A SIGINT raised just before (`after`: just after) the `nth` call (from 1) of owner.name that `counts`
  accepts (given the call's arguments)."""

  def __init__(self, what: str, owner, name: str, nth: int, counts=lambda *args, **kwargs: True, after=False):
    self.what, self.owner, self.name, self.nth, self.counts, self.after = what, owner, name, nth, counts, after

  def installed(self, patch):
    function, calls = getattr(self.owner, self.name), []

    def stopping(*args, **kwargs):
      stops = self.counts(*args, **kwargs) and len(calls) + 1 == self.nth
      calls.extend([None] * self.counts(*args, **kwargs))
      if stops and not self.after:
        signal.raise_signal(signal.SIGINT)
      result = function(*args, **kwargs)
      if stops and self.after:
        signal.raise_signal(signal.SIGINT)
      return result

    patch.setattr(self.owner, self.name, stopping)
    return calls

  def __repr__(self):
    return self.what


def validation_batch(eval_step, *args):
  """Each validation batch of a pretraining evaluation goes through here (`_through_validation_batch`), for a Stop."""
  return eval_step(*args)


class _EvalStep:
  """A pretraining run's jitted eval step (its `lower` too), each call through validation_batch."""

  def __init__(self, jitted):
    self.jitted = jitted

  def __call__(self, *args):
    return THIS.validation_batch(self.jitted, *args)

  def __getattr__(self, name):
    return getattr(self.jitted, name)


def _through_validation_batch(patch):
  build = pretraining.build

  def built(*args, **kwargs):
    run = build(*args, **kwargs)
    return dataclasses.replace(run, eval_step=_EvalStep(run.eval_step))

  patch.setattr(pretraining, "build", built)


def _stopped_runs(run, stops: list[Stop]) -> list:
  """Runs `run` once per stop, stopped there (each must raise Interrupted), then once to its end."""
  interrupted = []
  for stop in stops:
    with pytest.MonkeyPatch.context() as patch:
      _through_validation_batch(patch)
      calls = stop.installed(patch)
      with pytest.raises(guards.Interrupted) as raised:
        try:
          run()
        finally:
          assert len(calls) >= stop.nth, f"{stop}: never reached"
    interrupted.append((stop, raised.value))
  run()
  return interrupted


def _train_loss_write(step):
  return lambda self, at, metrics: at == step and "loss" in metrics


def _pretraining_config(corpus, probed):
  config = pretrain_config.get_config()
  config.data_dir, config.num_train_steps, config.eval_every, config.checkpoint_every = str(corpus), STEPS, 2, 3
  if probed:
    config.probes, config.probe_examples = f"tlc:{probed}", 40
  return config


@pytest.fixture(scope="module")
def tlc(tmp_path_factory):
  return tlc_folder(tmp_path_factory.mktemp("stop_anywhere") / "tlc", {"train": 60, "dev": 16, "test": 16})


def _pretrain(config, workdir):
  return lambda: pretraining.train_and_evaluate(config, workdir)


def test_pretraining_with_probes_stopped_anywhere_resumes_to_the_same_rows(tiny_corpus, tlc, tmp_path):
  config = _pretraining_config(tiny_corpus, tlc)
  _pretrain(config, tmp_path / "straight")()
  expected = _rows(tmp_path / "straight")
  probe_batch = (probes, "_store")  # after each of a probe's batches
  stops = [
    Stop("in step 0's probe", *probe_batch, 1),
    Stop("after train step 1", run_metrics.MetricWriter, "write", 1, _train_loss_write(1), after=True),
    Stop("in step 2's last validation batch", THIS, "validation_batch", 2),
    Stop("in step 2's probe, redone on resume", *probe_batch, 1),
    Stop("in step 3's checkpoint save", checkpoints.Writer, "save", 1, lambda self, step, *a, **k: step == 3),
    Stop("in the final evaluation's first validation batch", THIS, "validation_batch", 1),
    Stop("in the final evaluation's probe", *probe_batch, 1),
  ]
  workdir = tmp_path / "stopped"
  interrupted = _stopped_runs(_pretrain(config, workdir), stops)
  assert [e.step for _, e in interrupted] == [0, 1, 2, 2, 4, 4, 4]
  assert "at step 0, before any checkpoint; rerun the same command to start again" in str(interrupted[0][1])
  assert _rows(workdir) == expected
  assert [r["step"] for r in expected if "probe/tlc/accuracy" in r] == [0, 2, 4]


def test_pretraining_without_probes_stopped_in_its_evaluations_resumes_to_the_same_rows(tiny_corpus, tmp_path):
  config = _pretraining_config(tiny_corpus, None)
  _pretrain(config, tmp_path / "straight")()
  expected = _rows(tmp_path / "straight")
  stops = [
    Stop("in step 2's first validation batch", THIS, "validation_batch", 3),  # (after step 0's two)
    Stop("in the final evaluation's first validation batch", THIS, "validation_batch", 3),  # (step 2's redone first)
  ]
  workdir = tmp_path / "stopped"
  interrupted = _stopped_runs(_pretrain(config, workdir), stops)
  assert [e.step for _, e in interrupted] == [2, 4]
  assert _rows(workdir) == expected
  assert [r["step"] for r in expected if "valid_loss" in r] == [0, 2, 4]


def _results(workdir) -> dict:
  """results.json's scores and runs, and the predictions written."""
  results = json.loads((workdir / "results.json").read_text())
  kept = {k: results[k] for k in ("dev", "test", "dev_confusion", "runs", "best_seed", "dev_mean")}
  files = ("seed_0/dev_predictions.tsv", "seed_0/test_predictions.tsv", "submission/tlc.tsv")
  return kept | {name: (workdir / name).read_text() for name in files}


def test_finetuning_stopped_anywhere_resumes_to_the_same_rows_and_results(tlc, tmp_path, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  config = suite.task_config(
    "tlc", data_dir=str(tlc), num_train_steps=4, batch_size=8, eval_every=2, length_buckets=1, log_every=1
  )
  finetune = lambda workdir: lambda: finetuning.finetune(config, workdir)
  finetune(tmp_path / "straight")()
  predict = (task_model.TaskModel, "predict")
  stops = [
    Stop("in step 2's dev evaluation", *predict, 1),
    Stop("after train step 3", run_metrics.MetricWriter, "write", 1, _train_loss_write(3), after=True),
    Stop("in the last step's dev evaluation", *predict, 1),
    Stop(
      "in the last step's checkpoint save", checkpoints.Writer, "save_now", 1, lambda self, step, *a, **k: step == 4
    ),
    Stop("in the final dev predictions", *predict, 1),
    Stop("in the final test predictions", *predict, 2),
  ]
  workdir = tmp_path / "stopped"
  interrupted = _stopped_runs(finetune(workdir), stops)
  assert [e.step for _, e in interrupted] == [None, 3, None, 4, None, None]
  # Each says what was kept and what the rerun does (a stop in step 2's evaluation said "its last checkpoint
  # kept", though there was none).
  rerun = "; rerun the same command to "
  predicting = f"in seed_0's final predictions, its training done and checkpointed{rerun}predict again"
  assert [str(e).removeprefix("stopped by SIGINT ") for _, e in interrupted] == [
    f"in seed_0's dev evaluation at step 2, before its first checkpoint{rerun}start seed_0 again",
    f"at step 3 after checkpointing{rerun}resume",
    f"in seed_0's dev evaluation at step 4{rerun}resume from its checkpoint of step 3",
    f"at step 4 after checkpointing{rerun}resume",
    predicting,
    predicting,
  ]
  assert _rows(workdir / "seed_0") == _rows(tmp_path / "straight" / "seed_0")
  assert _results(workdir) == _results(tmp_path / "straight")

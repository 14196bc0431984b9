"""End-to-end pretraining runs of `python -m wyjax.pretrain` on the real Daizhige sample, and
the faults a run must survive (docs/reliability.md)."""

import json
import shutil
import signal
import subprocess
import time

import jax
import numpy as np
import pytest

from tests.train import pretrain_config
from tests.train.conftest import REPO_ROOT, losses, pretrain_command, pretrain_env, run_pretrain
from wyjax.core import checkpoints
from wyjax.train import pretraining

# Runs whose losses are compared, not their checkpoints: one save, at the last step (or the stop).
SAVE_AT_END = "--config.checkpoint_every=1000"


N = 24  # steps of the reference run the sharding and fault tests compare with (checkpoints every 2 steps)
# Steps 1-2 are warm-up (tests/train/pretrain_config.py): their learning rates, so their losses, are those of any
# run of the config, whatever its total.
WARM_UP = (1, 2)


@pytest.fixture(scope="module")
def straight(tiny_corpus, tmp_path_factory):
  """An uninterrupted run of N steps: (workdir, its losses)."""
  workdir = tmp_path_factory.mktemp("straight") / "run"
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N}", "--config.keep_checkpoints=100")
  return workdir, losses(workdir)


def test_sharded_training_matches_one_device(tiny_corpus, straight, tmp_path):
  """The warm-up steps on 8 devices as (data 8) against the straight run's on 1 device; 3 steps
  with scanned, rematerialised layers (whose init draws other random numbers) on 1 device and on
  8 as (data 2, fsdp 2, tensor 2), where the activation constraints split heads and MLP over the
  tensor axis."""
  scanned = ("--config.scan_layers=true", "--config.remat=dots")
  runs = {
    "data8": ({"data": 8}, 8, len(WARM_UP), ()),
    "one-scanned": ({"data": 1}, 1, 3, scanned),
    "2x2x2-scanned": ({"data": 2, "fsdp": 2, "tensor": 2}, 8, 3, scanned),
  }
  results = {}
  for name, (mesh, devices, steps, options) in runs.items():
    overrides = [f"--config.mesh.{axis}={size}" for axis, size in mesh.items()]
    run_pretrain(
      tmp_path / name,
      tiny_corpus,
      f"--config.num_train_steps={steps}",
      SAVE_AT_END,
      *overrides,
      *options,
      devices=devices,
    )
    results[name] = losses(tmp_path / name)
  assert sorted(results["data8"]) == list(WARM_UP) and sorted(results["2x2x2-scanned"]) == [1, 2, 3]
  for name, reference, steps in (("data8", straight[1], WARM_UP), ("2x2x2-scanned", results["one-scanned"], (1, 2, 3))):
    np.testing.assert_allclose(
      [results[name][s] for s in steps], [reference[s] for s in steps], atol=1e-5, rtol=0, err_msg=name
    )
  assert len({results["one-scanned"][s] for s in (1, 2, 3)}) == 3  # the parameters do change


def _steps(workdir) -> list[int]:
  return sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())


def _start(workdir, data_dir, *overrides):
  return subprocess.Popen(
    pretrain_command(workdir, data_dir, f"--config.num_train_steps={N}", *overrides),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )


def _wait_until(condition, process, what: str, timeout: float = 240):
  deadline = time.time() + timeout
  while not condition():
    assert process.poll() is None, f"ended before {what}: " + process.stderr.read()[-3000:]
    assert time.time() < deadline, f"no {what} after {timeout} s"
    time.sleep(0.002)


def assert_resumed_exactly(workdir, expected: dict):
  """Every step's loss recorded once, and equal (bitwise) to the uninterrupted run's."""
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  keyed = [(r["step"], key) for r in records for key in r if key != "step"]
  assert len(keyed) == len(set(keyed)), "a step's metric recorded twice"
  assert losses(workdir) == expected


def test_sigkill_during_an_async_save_resumes_exactly(tiny_corpus, straight, tmp_path):
  workdir = tmp_path / "run"
  process = _start(workdir, tiny_corpus, "--config.async_checkpointing=true")
  partial = workdir / "checkpoints" / "6.orbax-checkpoint-tmp"
  _wait_until(partial.exists, process, "save of step 6 in progress")
  process.send_signal(signal.SIGKILL)
  process.communicate()  # waits, and closes the stderr pipe
  assert process.returncode == -signal.SIGKILL
  assert partial.exists() and _steps(workdir) == [2, 4]  # killed mid-save, before the end
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N}", "--config.async_checkpointing=true", SAVE_AT_END)
  assert not partial.exists()  # the killed save's temporary folder is cleaned up
  assert_resumed_exactly(workdir, straight[1])


def test_sigterm_checkpoints_exits_143_and_resumes_exactly(tiny_corpus, straight, tmp_path):
  workdir = tmp_path / "run"
  process = _start(workdir, tiny_corpus)
  _wait_until(lambda: (workdir / "checkpoints" / "2" / "checksums.json").exists(), process, "checkpoint 2")
  process.send_signal(signal.SIGTERM)
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 128 + signal.SIGTERM
  assert "stopped by SIGTERM at step" in stderr
  stopped_at = max(losses(workdir))
  assert 2 <= stopped_at < N and _steps(workdir)[-1] == stopped_at  # a checkpoint of the step it stopped at
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N}", SAVE_AT_END)
  assert_resumed_exactly(workdir, straight[1])


def test_corrupt_and_truncated_checkpoints_are_set_aside(tiny_corpus, straight, tmp_path):
  """The latest checkpoint truncated, the one before with one flipped byte: both are moved
  aside (never deleted) and the run resumes from the one before them."""
  workdir = tmp_path / "run"
  shutil.copytree(straight[0], workdir)
  data_files = lambda step: [
    f for f in (workdir / "checkpoints" / str(step) / "state").rglob("*") if f.is_file() and f.parent.name == "d"
  ]
  for f in data_files(N):
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
  flipped = max(data_files(N - 2), key=lambda f: f.stat().st_size)
  data = bytearray(flipped.read_bytes())
  data[len(data) // 2] ^= 0x10
  flipped.write_bytes(bytes(data))
  result = run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N}")
  assert f"checkpoint {N} is unreadable" in result.stderr
  assert f"checkpoint {N - 2} is unreadable (state/ocdbt.process_0/d/{flipped.name} does not match" in result.stderr
  aside = sorted(p.name.rsplit("-", 1)[0] for p in (workdir / "checkpoints").iterdir() if not p.name.isdigit())
  assert aside == [f"unreadable-{N - 2}", f"unreadable-{N}"]
  assert_resumed_exactly(workdir, straight[1])  # steps N-3.. retrained from checkpoint N-4


def test_changed_config_is_refused_and_the_workdir_left_as_it_was(tiny_corpus, straight, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(straight[0], workdir)
  files = lambda: {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file() and p.name != "pretrain.log"}
  before = files()  # pretrain.log, the library log, records the refusals
  refused = subprocess.run(
    pretrain_command(workdir, tiny_corpus, "--config.batch_size=16", f"--config.num_train_steps={N}"),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert refused.returncode == 1 and "batch_size: 8 -> 16" in refused.stderr and "Traceback" not in refused.stderr
  accepted = subprocess.run(
    pretrain_command(
      workdir,
      tiny_corpus,
      "--config.model.intermediate_size=96",
      f"--config.num_train_steps={N}",
      "--accept_config_change",
    ),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert accepted.returncode == 1 and f"checkpoint {N} in" in accepted.stderr, accepted.stderr[-3000:]
  assert (
    "params/encoder/layer_0/mlp/wi/kernel: checkpoint (32, 64) float32, this run (32, 96) float32" in accepted.stderr
  )
  assert files() == before  # nothing renamed or written
  # An accepted change that fits the checkpoint continues the run and is logged.
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N + 2}", "--accept_config_change")
  assert max(losses(workdir)) == N + 2
  logged = json.loads((workdir / "config_changes.jsonl").read_text())
  assert logged["changes"] == {"num_train_steps": {"old": N, "new": N + 2}}
  assert json.loads((workdir / "run_config.json").read_text())["num_train_steps"] == N + 2


def test_nonfinite_steps_are_skipped_and_stop_the_run(tiny_corpus, tmp_path):
  workdir = tmp_path / "run"
  result = subprocess.run(
    pretrain_command(
      workdir,
      tiny_corpus,
      "--config.learning_rate=1e30",
      "--config.warmup_steps=0",
      "--config.max_nonfinite_steps=4",
      "--config.num_train_steps=30",
    ),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 1 and "not finite 4 times in a row" in result.stderr, result.stderr[-3000:]
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  skipped = [r["step"] for r in records if r.get("nonfinite_steps")]
  assert len(skipped) == 4 and skipped == list(range(skipped[0], skipped[0] + 4))  # then it stopped
  assert max(r["step"] for r in records) == skipped[-1] < 30
  for step in _steps(workdir):  # every checkpoint holds finite numbers
    _, params = checkpoints.restore_model(workdir / "checkpoints" / str(step))
    assert all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(params)), step


def test_failed_async_save_stops_the_run_and_leaves_no_partial_folder(tiny_corpus, straight, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(straight[0], workdir)
  for step in _steps(workdir)[2:]:  # continue from checkpoint 4, saving 6 onwards
    shutil.rmtree(workdir / "checkpoints" / str(step))
  # Files may not grow beyond 500 kB (a checkpoint's data file is larger): writing one fails with
  # EFBIG, as on a full disk (Python ignores SIGXFSZ).
  command = [
    "bash",
    "-c",
    'ulimit -f 488 && exec "$@"',
    "bash",
    *pretrain_command(workdir, tiny_corpus, f"--config.num_train_steps={N}", "--config.async_checkpointing=true"),
  ]
  result = subprocess.run(command, env=pretrain_env(), cwd=REPO_ROOT, capture_output=True, text=True)
  assert result.returncode == 1, result.stderr[-3000:]
  assert "wyjax: error: saving checkpoint [6] in" in result.stderr and "File too large" in result.stderr
  assert "Intact checkpoints: [2, 4]" in result.stderr
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["2", "4"]  # no partial folder left
  assert max(losses(workdir)) < N  # stopped, not trained on without checkpoints
  assert checkpoints.integrity_problem(workdir / "checkpoints" / "4") is None


def test_checkpoint_from_eight_devices_restores_on_one(tiny_corpus, straight, tmp_path):
  workdir = tmp_path / "run"
  run_pretrain(
    workdir,
    tiny_corpus,
    f"--config.num_train_steps={len(WARM_UP)}",
    "--config.mesh.data=2",
    "--config.mesh.fsdp=2",
    "--config.mesh.tensor=2",
    devices=8,
  )
  # Resumed from the warm-up's checkpoint, the rest is the straight run's.
  run_pretrain(
    workdir,
    tiny_corpus,
    f"--config.num_train_steps={N}",
    "--config.mesh.data=1",
    "--accept_config_change",
    SAVE_AT_END,
    devices=1,
  )
  resumed = range(len(WARM_UP) + 1, N + 1)
  np.testing.assert_allclose(
    [losses(workdir)[s] for s in resumed], [straight[1][s] for s in resumed], atol=1e-5, rtol=0
  )


def test_two_processes_train_as_one_and_stop_together(tiny_corpus, straight, tmp_path):
  """Two processes of one device each train like one device; SIGTERM to one of them stops
  both at the same step (they agree every stop_check_every steps) with a checkpoint there,
  which one process resumes."""
  workdir = tmp_path / "multi"
  import portpicker

  port = portpicker.pick_unused_port()
  processes = []
  for process_id in range(2):
    env = pretrain_env(
      1, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(process_id)
    )
    processes.append(
      subprocess.Popen(
        pretrain_command(
          workdir, tiny_corpus, f"--config.num_train_steps={N}", SAVE_AT_END, "--config.stop_check_every=4"
        ),
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  _wait_until(lambda: (workdir / "metrics.jsonl").exists() and len(losses(workdir)) >= 3, processes[0], "3 steps")
  processes[1].send_signal(signal.SIGTERM)
  stops = []
  for p in processes:
    _, err = p.communicate(timeout=300)
    assert p.returncode == 128 + signal.SIGTERM, err[-3000:]
    stops.append(int(err.split("stopped by SIGTERM at step ")[1].split()[0]))
  assert stops[0] == stops[1] < N and stops[0] % 4 == 0
  assert _steps(workdir) == [stops[0]] and max(losses(workdir)) == stops[0]
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={N}", SAVE_AT_END)
  steps = range(1, N + 1)
  np.testing.assert_allclose([losses(workdir)[s] for s in steps], [straight[1][s] for s in steps], atol=1e-5, rtol=0)


def test_signal_handlers_are_restored_after_the_loop(tiny_corpus, tmp_path):
  """In one process (the demo pretrains, then fine-tunes): Ctrl-C must work after pretraining."""
  config = pretrain_config.get_config()
  config.data_dir, config.num_train_steps = str(tiny_corpus), 2
  before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
  pretraining.train_and_evaluate(config, tmp_path / "run")
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_stop_during_an_evaluation_is_honoured_before_its_next_batch(tiny_corpus, tmp_path, monkeypatch):
  """SIGTERM as step 1's train metrics are written, just before its evaluation: the run stops at
  step 1, checkpointed, with no validation metrics of step 1 (the evaluation ran to its end
  before); step 0's evaluation, before the first step, is there."""
  from wyjax.core import guards, run_metrics

  config = pretrain_config.get_config()
  config.data_dir, config.num_train_steps, config.log_every, config.eval_every = str(tiny_corpus), 4, 1, 1
  write = run_metrics.MetricWriter.write

  def write_then_stop(self, step, metrics):
    write(self, step, metrics)
    if "loss" in metrics:
      signal.raise_signal(signal.SIGTERM)

  monkeypatch.setattr(run_metrics.MetricWriter, "write", write_then_stop)
  with pytest.raises(guards.Interrupted) as stopped:
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert stopped.value.step == 1
  records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
  assert max(r["step"] for r in records) == 1, records
  assert [r["step"] for r in records if "valid_loss" in r] == [0], records
  assert _steps(tmp_path / "run") == [1]


def test_pretrained_workdir_exports_to_transformers(straight, tmp_path):
  import torch
  import transformers

  import wyjax.hf
  from wyjax.hf import export_folder

  model = wyjax.hf.load(straight[0])  # loaded read-only: the fixture's run stays as it was
  out = export_folder.export(model, tmp_path / "hf")
  reloaded = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
  enc = model.tokenizer.encode("子曰学而时习之")
  ids = np.asarray([enc.ids])
  with torch.no_grad():
    theirs = reloaded(input_ids=torch.tensor(ids)).logits.numpy()
  np.testing.assert_allclose(theirs, model.mlm_logits(ids), atol=1e-5)


def test_gradient_accumulation_matches_the_full_batch(tiny_corpus, tmp_path):
  no_dropout = [
    "--config.model.hidden_dropout_prob=0",
    "--config.model.attention_probs_dropout_prob=0",
    "--config.num_train_steps=3",
    SAVE_AT_END,
  ]
  run_pretrain(tmp_path / "full", tiny_corpus, *no_dropout)
  run_pretrain(tmp_path / "accum", tiny_corpus, *no_dropout, "--config.grad_accum_steps=2")
  full, accum = losses(tmp_path / "full"), losses(tmp_path / "accum")
  np.testing.assert_allclose([accum[s] for s in (1, 2, 3)], [full[s] for s in (1, 2, 3)], atol=1e-5, rtol=0)

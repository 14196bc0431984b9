"""End-to-end pretraining runs of `python -m wyjax.pretrain` on the real Daizhige sample."""
import pathlib
import signal
import subprocess
import time

import numpy as np

from tests.train.conftest import REPO_ROOT, losses, pretrain_command, pretrain_env, run_pretrain


def test_sharded_training_matches_one_device(tiny_corpus, tmp_path):
  """3 steps on 1 device, on 8 devices as (data 2, fsdp 2, tensor 2) and as (data 8)."""
  runs = {"one": ({"data": 1}, 1), "2x2x2": ({"data": 2, "fsdp": 2, "tensor": 2}, 8), "data8": ({"data": 8}, 8)}
  results = {}
  for name, (mesh, devices) in runs.items():
    overrides = [f"--config.mesh.{axis}={size}" for axis, size in mesh.items()]
    run_pretrain(tmp_path / name, tiny_corpus, "--config.num_train_steps=3", *overrides, devices=devices)
    results[name] = losses(tmp_path / name)
  assert sorted(results["one"]) == [1, 2, 3]
  for name in ("2x2x2", "data8"):
    np.testing.assert_allclose([results[name][s] for s in (1, 2, 3)], [results["one"][s] for s in (1, 2, 3)],
                               atol=1e-5, rtol=0, err_msg=name)
  assert len({results["one"][s] for s in (1, 2, 3)}) == 3  # the parameters do change


def _wait_for_checkpoint(workdir: pathlib.Path, step: int, process, timeout: float = 240):
  deadline = time.time() + timeout
  while not (workdir / "checkpoints" / str(step) / "state").is_dir():
    assert process.poll() is None, process.stderr.read()[-3000:]
    assert time.time() < deadline, f"no checkpoint {step} after {timeout} s"
    time.sleep(0.2)


def test_exact_resume_after_sigkill(tiny_corpus, tmp_path):
  k = 4
  straight = tmp_path / "straight"
  run_pretrain(straight, tiny_corpus, f"--config.num_train_steps={2 * k}")
  resumed = tmp_path / "resumed"
  process = subprocess.Popen(pretrain_command(resumed, tiny_corpus, f"--config.num_train_steps={2 * k}",
                                              "--config.checkpoint_every=4"),
                             env=pretrain_env(), cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
  _wait_for_checkpoint(resumed, k, process)
  process.send_signal(signal.SIGKILL)
  process.wait()
  killed_at = max(losses(resumed))
  run_pretrain(resumed, tiny_corpus, f"--config.num_train_steps={2 * k}", "--config.checkpoint_every=4")
  expected, got = losses(straight), losses(resumed)
  assert sorted(got) == list(range(1, 2 * k + 1))
  assert [got[s] for s in sorted(got)] == [expected[s] for s in sorted(expected)], (killed_at, got, expected)


def test_sigterm_checkpoints_and_resumes(tiny_corpus, tmp_path):
  workdir = tmp_path / "run"
  process = subprocess.Popen(pretrain_command(workdir, tiny_corpus, "--config.num_train_steps=100000",
                                              "--config.checkpoint_every=100000"),
                             env=pretrain_env(), cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 240
  while not (workdir / "metrics.jsonl").exists() or len(losses(workdir)) < 3:
    assert process.poll() is None and time.time() < deadline, process.stderr.read()[-3000:]
    time.sleep(0.2)
  process.send_signal(signal.SIGTERM)
  assert process.wait(timeout=120) == 0
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  last = max(losses(workdir))
  assert steps == [last], (steps, last)
  run_pretrain(workdir, tiny_corpus, f"--config.num_train_steps={last + 2}")
  assert max(losses(workdir)) == last + 2


def test_unreadable_latest_checkpoint_falls_back(tiny_corpus, tmp_path):
  workdir = tmp_path / "run"
  run_pretrain(workdir, tiny_corpus, "--config.num_train_steps=4")
  expected = losses(workdir)
  # Truncate every data file of the latest checkpoint's state.
  broken = workdir / "checkpoints" / "4" / "state"
  for f in broken.rglob("*"):
    if f.is_file() and f.stat().st_size > 0 and not f.name.endswith(".json"):
      f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
  result = run_pretrain(workdir, tiny_corpus, "--config.num_train_steps=6")
  assert "checkpoint 4 is unreadable" in result.stderr
  assert (workdir / "checkpoints" / "2").is_dir(), "the good checkpoint must never be deleted"
  assert any(p.name.startswith("unreadable-4-") for p in (workdir / "checkpoints").iterdir())
  got = losses(workdir)
  assert [got[s] for s in (3, 4)] == [expected[s] for s in (3, 4)]  # retrained from step 2
  assert max(got) == 6


def test_checkpoint_from_eight_devices_restores_on_one(tiny_corpus, tmp_path):
  workdir = tmp_path / "run"
  run_pretrain(workdir, tiny_corpus, "--config.num_train_steps=2", "--config.mesh.data=2",
               "--config.mesh.fsdp=2", "--config.mesh.tensor=2", devices=8)
  straight = tmp_path / "straight"
  run_pretrain(straight, tiny_corpus, "--config.num_train_steps=4")
  run_pretrain(workdir, tiny_corpus, "--config.num_train_steps=4", "--config.mesh.data=1", devices=1)
  np.testing.assert_allclose([losses(workdir)[s] for s in (3, 4)], [losses(straight)[s] for s in (3, 4)],
                             atol=1e-5, rtol=0)


def test_two_processes_match_one_process_with_two_devices(tiny_corpus, tmp_path):
  single = tmp_path / "single"
  run_pretrain(single, tiny_corpus, "--config.num_train_steps=3", devices=2)
  workdir = tmp_path / "multi"
  import portpicker
  port = portpicker.pick_unused_port()
  processes = []
  for process_id in range(2):
    env = pretrain_env(1, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2",
                       JAX_PROCESS_ID=str(process_id))
    processes.append(subprocess.Popen(pretrain_command(workdir, tiny_corpus, "--config.num_train_steps=3"),
                                      env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
  for p in processes:
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
  np.testing.assert_allclose([losses(workdir)[s] for s in (1, 2, 3)], [losses(single)[s] for s in (1, 2, 3)],
                             atol=1e-5, rtol=0)


def test_pretrained_workdir_exports_to_transformers(tiny_corpus, tmp_path):
  import torch
  import transformers

  import wyjax.hf
  from wyjax.hf import export
  workdir = tmp_path / "run"
  run_pretrain(workdir, tiny_corpus, "--config.num_train_steps=2")
  model = wyjax.hf.load(workdir)
  out = export.export(model, tmp_path / "hf")
  reloaded = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
  enc = model.tokenizer.encode("子曰学而时习之")
  ids = np.asarray([enc.ids])
  with torch.no_grad():
    theirs = reloaded(input_ids=torch.tensor(ids)).logits.numpy()
  np.testing.assert_allclose(theirs, model.mlm_logits(ids), atol=1e-5)


def test_gradient_accumulation_matches_the_full_batch(tiny_corpus, tmp_path):
  no_dropout = ["--config.model.hidden_dropout_prob=0", "--config.model.attention_probs_dropout_prob=0",
                "--config.num_train_steps=3"]
  run_pretrain(tmp_path / "full", tiny_corpus, *no_dropout)
  run_pretrain(tmp_path / "accum", tiny_corpus, *no_dropout, "--config.grad_accum_steps=2")
  full, accum = losses(tmp_path / "full"), losses(tmp_path / "accum")
  np.testing.assert_allclose([accum[s] for s in (1, 2, 3)], [full[s] for s in (1, 2, 3)], atol=1e-5, rtol=0)

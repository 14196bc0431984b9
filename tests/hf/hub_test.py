"""Export with a model card and push to a local fake Hub endpoint, through the CLI."""

import os
import pathlib
import subprocess
import sys

import yaml

from tests import checkpoint_files
from tests.hf import parity_test, tiny_models
from tests.hf.fake_hub import FakeHub

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_export_cli_pushes_files_and_model_card(tmp_path):
  model = parity_test._converted(tiny_models.deberta("bozhou", legacy=False))
  workdir = tmp_path / "workdir"
  checkpoint_files.save_params(workdir, 10, model.params, model.config, model.tokenizer)
  results = tmp_path / "leaderboard.json"
  results.write_text('{"split": "dev", "tasks": {"tlc": {"accuracy": 0.8125}, "glner": {"f1": 0.5}}}')
  out = tmp_path / "hf"
  out.mkdir()
  (out / "notes.txt").write_text("the user's own file: neither overwritten nor uploaded")
  command = [
    sys.executable,
    "-m",
    "wyjax.export",
    f"--checkpoint={workdir}",
    f"--out={out}",
    f"--results={results}",
    "--push_to_hub=wyjax-test/tiny-deberta",
  ]
  with FakeHub() as hub:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_fake_token", "HF_HUB_DISABLE_TELEMETRY": "1"}
    refused = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    assert refused.returncode == 1 and "is not empty (1 entries)" in refused.stderr and "--overwrite" in refused.stderr
    assert not hub.repos and sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    subprocess.run([*command, "--overwrite"], check=True, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
  assert (out / "notes.txt").exists()
  uploaded = hub.repos["wyjax-test/tiny-deberta"]
  expected = {
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
  }
  assert set(uploaded) == expected
  for name in expected:
    assert uploaded[name] == (out / name).read_bytes(), name
  assert set(hub.tokens) == {"Bearer hf_fake_token"}

  card = yaml.safe_load((out / "README.md").read_text().split("---")[1])
  assert card == hub.model_card_metadata
  assert card["language"] == ["lzh", "zh"] and card["license"] == "apache-2.0"
  assert "deberta-v2" in card["tags"]
  results_by_task = {r["task"]["name"]: r for r in card["model-index"][0]["results"]}
  assert results_by_task["TLC"]["metrics"] == [{"type": "accuracy", "value": 0.8125}]
  assert results_by_task["GLNER"]["task"]["type"] == "token-classification"

"""Fine-tuning end to end on real WYWEB files: learning beats the majority class, early stopping
and best-checkpoint restore, pretrained encoders grafted into every head."""
import json
import subprocess
import sys

import jax
import numpy as np
import pytest

from tests.train.conftest import REPO_ROOT, pretrain_env, tiny_checkpoint
from wyjax.tasks import wyweb
from wyjax.train import benchmark, checkpoints, finetune


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))


def _slice_tsv(source, out, rows: dict[str, slice]):
  """A task folder whose splits are line ranges of one real TSV file (kept byte for byte)."""
  out.mkdir(parents=True, exist_ok=True)
  lines = source.read_bytes().split(b"\n")
  for split, rng in rows.items():
    (out / f"{split}{source.suffix}").write_bytes(b"\n".join(lines[rng]))
  return out


def _slice_json(source, out, rows: dict[str, slice]):
  """The same for a JSON-array task, written as JSON Lines (a variant the loaders accept)."""
  out.mkdir(parents=True, exist_ok=True)
  records = json.loads(source.read_text(encoding="utf-8"))
  for split, rng in rows.items():
    (out / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records[rng]),
                                        encoding="utf-8")
  return out


def test_tiny_model_beats_the_majority_class_on_real_tlc(shared_data, tmp_path):
  workdir = tmp_path / "tlc"
  result = subprocess.run(
      [sys.executable, "-m", "wyjax.finetune", "--config=configs/tlc.py", f"--workdir={workdir}",
       f"--config.data_dir={shared_data / 'wyweb' / 'tlc'}", "--config.num_train_steps=200",
       "--config.eval_every=100", "--config.learning_rate=1e-3"],
      cwd=REPO_ROOT, env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")), capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "FRESH, RANDOMLY INITIALISED" in result.stderr  # no --config.init: said loudly
  results = json.loads((workdir / "results.json").read_text())
  majority = results["majority_baseline"]
  # The shared README's majority baselines on this dev split: 0.148 (dynasty), 0.424 (period).
  assert majority["accuracy"] == pytest.approx(0.148, abs=5e-4)
  assert results["dev"]["accuracy"] >= majority["accuracy"] + 0.10, results["dev"]
  assert results["dev"]["period_accuracy"] >= majority["period_accuracy"] + 0.10, results["dev"]
  # Dev predictions in the TLC format, one per dev line, in file order.
  predictions = wyweb.read_tlc(workdir / "seed_0" / "dev_predictions.tsv")
  gold = wyweb.read_split("tlc", shared_data / "wyweb" / "tlc", "dev")
  assert [p.text for p in predictions] == [g.text for g in gold]
  assert np.mean([p.dynasty == g.dynasty for p, g in zip(predictions, gold)]) == results["dev"]["accuracy"]


def test_early_stopping_restores_the_best_dev_checkpoint(shared_data, tmp_path):
  data_dir = _slice_tsv(shared_data / "wyweb" / "tlc" / "train.tsv", tmp_path / "data",
                        {"train": slice(0, 2400), "dev": slice(2400, 2560), "test": slice(2560, 2624)})
  trained = finetune.finetune(benchmark.task_config(
      "tlc", data_dir=str(data_dir), num_train_steps=150, eval_every=150, learning_rate=1e-3), tmp_path / "trained")
  assert trained["dev"]["accuracy"] > trained["majority_baseline"]["accuracy"] + 0.05
  # Continue from that run (same head) with a negative learning rate: the loss climbs, so the
  # first evaluation (step 1, where the schedule's rate is still 0) is the best and every later
  # one worse. The run must stop after `patience` evaluations and restore step 1's parameters.
  config = benchmark.task_config("tlc", data_dir=str(data_dir), init=str(tmp_path / "trained" / "seed_0"),
                                 num_train_steps=30, eval_every=1, patience=3, learning_rate=-5e-3,
                                 warmup_fraction=0.0, batch_size=16, seeds=2)
  results = finetune.finetune(config, tmp_path / "run")
  for run in results["runs"]:
    records = [json.loads(line) for line in (tmp_path / "run" / f"seed_{run['seed']}" / "metrics.jsonl")
               .read_text().splitlines()]
    evaluations = [(r["step"], r["dev_accuracy"]) for r in records if "dev_accuracy" in r]
    assert evaluations[0] == (1, trained["dev"]["accuracy"])  # the init, grafted head included
    assert all(accuracy < evaluations[0][1] for _, accuracy in evaluations[1:])
    assert run["stopped_early"] and [s for s, _ in evaluations] == [1, 2, 3, 4]
    assert run["best_step"] == 1 and run["dev"]["accuracy"] == evaluations[0][1]  # restored, re-evaluated
    saved = sorted(p.name for p in (tmp_path / "run" / f"seed_{run['seed']}" / "checkpoints").iterdir())
    assert saved == ["1"]  # only the best checkpoint is kept
  dev = [r["dev"]["accuracy"] for r in results["runs"]]
  assert results["dev_mean"] == pytest.approx(np.mean(dev)) and results["dev_std"] == pytest.approx(np.std(dev))
  best_run = max(results["runs"], key=lambda r: r["dev"]["accuracy"])
  assert results["best_seed"] == best_run["seed"] and results["test"] == best_run["test"]
  submission = wyweb.read_tlc(results["submission"])
  assert [s.text for s in submission] == [e.text for e in wyweb.read_split("tlc", data_dir, "test")]


HEAD_TASKS = {  # task → (file, slicer, init kind): one task per head kind, both init kinds
    "glner": ("glner/train.jsonl", _slice_tsv, "hf"), "irc": ("irc/train.json", _slice_json, "wyjax"),
    "xuci": ("xuci/train.tsv", _slice_tsv, "wyjax"), "fspc": ("fspc/train.json", _slice_json, "hf"),
    "wywmt": ("wywmt/train.tsv", _slice_tsv, "hf"),
}


@pytest.mark.parametrize("task", sorted(HEAD_TASKS))
def test_pretrained_encoder_is_grafted_into_every_head(shared_data, tmp_path, task):
  file, slicer, init = HEAD_TASKS[task]
  data_dir = slicer(shared_data / "wyweb" / file, tmp_path / task, {"train": slice(0, 16), "dev": slice(16, 24)})
  texts = [text for split in ("train", "dev") for e in wyweb.read_split(task, data_dir, split)
           for text in finetune.example_texts(e)]
  params = tiny_checkpoint(tmp_path, texts)
  # Learning rate 0: the run's best checkpoint must hold exactly the pretrained encoder.
  config = benchmark.task_config(task, data_dir=str(data_dir), init=str(tmp_path / init), num_train_steps=2,
                                 eval_every=1, batch_size=8, learning_rate=0.0, max_length=64,
                                 fspc_line_examples=task == "fspc")
  results = finetune.finetune(config, tmp_path / "run")
  _, tuned = checkpoints.restore_model(tmp_path / "run" / "seed_0")
  encoder = tuned["scorer"]["encoder"] if task == "irc" else tuned["encoder"]
  same = lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
  jax.tree_util.tree_map(same, encoder, params["encoder"])
  if task == "wywmt":  # the prefix LM keeps the pretrained MLM head too
    jax.tree_util.tree_map(same, tuned["mlm_head"], params["mlm_head"])
  assert results["dev"][results["main_metric"]] >= 0.0
  if task == "fspc":  # per-line examples: the toolkit's mixed accuracy is reported beside the holistic one
    assert "accuracy_with_lines" in results["dev"]

"""`python -m wyjax.demo` end to end at test size: pretraining, the two derived tasks,
fine-tuning, export and leaderboard, on a chinese-poetry-shaped package of real text."""

import collections
import json
import subprocess
import sys

import numpy as np
import torch
import transformers

from tests.conftest import assert_plot
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.core import config_files
from wyjax.tasks import leaderboard, wyweb_files
from wyjax.tasks.builders import poetry
from wyjax.train import pretraining

# Where chinese-poetry files a dynasty's poems (folders the reader maps back to the dynasty).
POETRY_FILES = {
  "先秦": "shijing/shijing.json",
  "唐": "quantangshi/poet.tang.0.json",
  "宋": "songci/ci.song.0.json",
  "元明": "yuanqu/yuanqu.json",
  "清": "nalanxingde/nalanxingde.json",
}
# What the unpretrained twin shares with the model's fine-tuning.
RECIPE = ("learning_rate", "num_train_steps", "batch_size", "seed", "seeds", "warmup_fraction", "eval_every")


def _poetry_package(shared_data, root, per_dynasty: int = 150):
  """Real TLC passages, each filed as a 'poem' under its dynasty's collection."""
  poems = collections.defaultdict(list)
  for e in wyweb_files.read_split("tlc", shared_data / "wyweb" / "tlc", "train"):
    if e.dynasty in POETRY_FILES and len(poems[e.dynasty]) < per_dynasty:
      poems[e.dynasty].append({"title": f"tlc {e.line}", "author": "", "paragraphs": [e.text]})
  for dynasty, records in poems.items():
    path = root / "package" / "dist" / POETRY_FILES[dynasty]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
  return root / "package"


def test_demo_runs_end_to_end(shared_data, tmp_path):
  package = _poetry_package(shared_data, tmp_path)
  workdir = tmp_path / "demo"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.demo",
      f"--workdir={workdir}",
      f"--poetry_package={package}",
      "--pretrain_config.num_train_steps=30",
      "--pretrain_config.warmup_steps=5",
      "--pretrain_config.eval_every=30",
      "--pretrain_config.checkpoint_every=30",
      "--pretrain_config.eval_batches=2",
      "--pretrain_config.batch_size=8",
      "--pretrain_config.corpus.valid_fraction=0.1",
      "--pretrain_config.corpus.workers=1",
      "--punc_steps=8",
      "--tlc_steps=8",
      "--per_dynasty=150",
      "--punc_examples=400",
    ],  # 4 evaluations a run
    cwd=REPO_ROOT,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "| Model | Avg. (WYWMT apart) | PUNC | TLC |" in result.stdout
  assert "| majority class |" in result.stdout
  # It ends with use: the passage punctuated by the fine-tuned model, every character kept in order.
  before, after = (
    line.split(":", 1)[1].strip()
    for line in result.stdout.splitlines()
    if line.strip().startswith(("before:", "after:"))
  )
  assert before == poetry.UNSEEN_PASSAGE
  assert "".join(c for c in after if c not in wyweb_files.PUNC_MARKS) == before

  results = workdir / "results"
  board = json.loads((results / "leaderboard.json").read_text())
  assert set(board["tasks"]) == {"punc", "tlc"}
  # Beside the model: the same model from random weights (same recipe and seed) and the linear
  # baseline, on dev and test.
  for row in (leaderboard.TWIN, leaderboard.LINEAR):
    assert sum(line.startswith(f"| {row} |") for line in result.stdout.splitlines()) == 2  # dev, test
  assert "## WYWEB: test split" in result.stdout
  for task in ("punc", "tlc"):
    model, twin = (json.loads((results / run / "results.json").read_text()) for run in (task, f"no_pretraining/{task}"))
    assert (twin["config"]["init"], twin["config"]["init_weights"]) == (str(workdir / "pretrain"), "random")
    assert {k: twin["config"][k] for k in RECIPE} == {k: model["config"][k] for k in RECIPE}
    assert board["no_pretraining_baseline"][task] == {
      "dev": twin["dev"],
      "test": twin["test"],
      "dev_mean_std": [twin["dev_mean"], twin["dev_std"]],
    }
    assert set(board["linear_baseline"][task]) == {"dev", "test"}
    assert None not in board["linear_baseline"][task].values()
  tlc = json.loads((results / "tlc" / "results.json").read_text())
  assert board["tasks"]["tlc"]["accuracy"] == tlc["dev"]["accuracy"]
  predicted = wyweb_files.read_tlc(results / "tlc" / "seed_0" / "dev_predictions.tsv")
  gold = wyweb_files.read_split("tlc", workdir / "tasks" / "tlc", "dev")
  assert [p.text for p in predicted] == [g.text for g in gold]
  assert tlc["dev"]["accuracy"] == np.mean([p.dynasty == g.dynasty for p, g in zip(predicted, gold)])
  # The dynasty task holds the five dynasties the package files poems under, in TLC format.
  dev = wyweb_files.read_split("tlc", workdir / "tasks" / "tlc", "dev")
  assert {e.dynasty for e in dev} <= set(POETRY_FILES) and len({e.dynasty for e in dev}) >= 3
  for task in ("punc", "tlc"):
    assert wyweb_files.READERS[task](results / task / "submission" / f"{task}.tsv")  # test predictions parse
    for plot in (f"{task}_confusion.png", f"{task}_curve.png"):
      assert_plot(results / "plots" / plot)
  # The pretraining probed both tasks at step 0 and at its evaluation, plotted beside its MLM loss.
  pretrain_records = [json.loads(line) for line in (workdir / "pretrain" / "metrics.jsonl").read_text().splitlines()]
  probed = {r["step"]: r for r in pretrain_records if "probe_seconds" in r}
  assert sorted(probed) == [0, 30] and all(
    {"probe/punc/f1", "probe/tlc/accuracy", "valid_loss"} <= set(r) for r in probed.values()
  ), probed
  assert_plot(results / "plots" / "pretraining.png")

  # The exported pretrained model loads in transformers and predicts like the wyjax workdir.
  hf_model = transformers.AutoModelForMaskedLM.from_pretrained(workdir / "hf").eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(workdir / "hf")
  batch = tokenizer(["床前明月光", "关关雎鸠在河之洲"], padding=True, return_tensors="np")
  with torch.no_grad():
    theirs = hf_model(
      input_ids=torch.tensor(batch["input_ids"]), attention_mask=torch.tensor(batch["attention_mask"])
    ).logits.numpy()
  from wyjax.hf import loading

  ours = loading.load(workdir / "pretrain").mlm_logits(batch["input_ids"], batch["attention_mask"])
  real = batch["attention_mask"].astype(bool)
  np.testing.assert_allclose(theirs[real], ours[real], atol=1e-4)


def test_a_cached_pretraining_is_checked_against_the_config_as_pretrain_checks_it(shared_data, tmp_path, monkeypatch):
  """The demo with another pretraining config said "reusing the pretrained model" and went on,
  where `wyjax.pretrain` refuses the same change: the demo checks its finished pretraining as a
  rerun of wyjax.pretrain is checked (pretraining.check_resume), before anything else."""
  package = _poetry_package(shared_data, tmp_path, per_dynasty=40)
  overrides = {
    "num_train_steps": 2,
    "warmup_steps": 1,
    "eval_every": 2,
    "checkpoint_every": 2,
    "eval_batches": 1,
    "batch_size": 8,
    "corpus.valid_fraction": 0.1,
    "corpus.workers": 1,
  }
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path / "cache"))
  config = config_files.load("pretrain/deberta_tiny")
  config.update_from_flattened_dict(overrides)
  config.corpus.source = f"poetry:{package.resolve()}"  # as the demo's --poetry_package sets it
  pretraining.train_and_evaluate(config, tmp_path / "demo" / "pretrain")
  command = [
    sys.executable,
    "-m",
    "wyjax.demo",
    f"--workdir={tmp_path / 'demo'}",
    f"--poetry_package={package}",
    *(f"--pretrain_config.{key}={value}" for key, value in overrides.items()),
    "--punc_steps=1",
    "--tlc_steps=1",
    "--per_dynasty=40",
    "--punc_examples=40",
  ]
  changed = subprocess.run(
    [*command, "--pretrain_config.learning_rate=0.005"],
    cwd=REPO_ROOT,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert (
    changed.returncode == 1
    and (
      f"wyjax: error: {tmp_path / 'demo' / 'pretrain'} holds a run made with another config; continuing it would mix "
      "two trainings:\n  learning_rate: 0.002 -> 0.005\n"
    )
    in changed.stderr
  ), changed.stderr[-3000:]
  assert "reusing" not in changed.stdout and not (tmp_path / "demo" / "tasks").exists()

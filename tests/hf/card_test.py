"""The exported model card: Hub metadata, a model-index the Hub accepts, usage snippets that run."""

import contextlib
import io
import json
import re

import numpy as np
import pytest
import yaml
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results

from tests import checkpoint_files
from tests.hf import parity_test, tiny_models
from wyjax.core import storage
from wyjax.hf import export_folder

NAME = "wyjax-test/tiny-deberta"
# Shaped like the leaderboard.json wyjax.benchmark writes (wyjax.tasks.leaderboard.write); made-up numbers.
LEADERBOARD = {
  "model": "tiny",
  "split": "dev",
  "average": 0.6531,
  "averaged_tasks": ["punc", "glner", "gjc", "tlc"],
  "tasks": {
    "punc": {"precision": 0.71, "recall": 0.62, "f1": 0.6619},
    "tlc": {"accuracy": 0.8125, "macro_f1": 0.7431, "period_accuracy": 0.9},
    "ccpm": {"accuracy": 0.5566},
    "ccpm_match": {"accuracy": 0.6012},
    "cclue_ner": {"precision": 0.4, "recall": 0.5, "f1": 0.4444},
  },
  "main_metric": {"punc": "f1", "tlc": "macro_f1", "ccpm": "accuracy", "ccpm_match": "accuracy", "cclue_ner": "f1"},
  "dev_mean_std": {
    "punc": [0.66, 0.01],
    "tlc": [0.74, 0.0],
    "ccpm": [0.55, 0.0],
    "ccpm_match": [0.6, 0.0],
    "cclue_ner": [0.44, 0.0],
  },
  "test": {},
  "majority_baseline": {"tlc": {"accuracy": 0.3, "macro_f1": 0.06, "period_accuracy": 0.5}},
  "notes": {},
  "failed": {},
}
# Dataset (name, type) each task must report.
DATASETS = {
  "punc": ("WYWEB PUNC", "wyweb-punc"),
  "tlc": ("WYWEB TLC", "wyweb-tlc"),
  "ccpm": ("CCPM", "ccpm"),
  "ccpm_match": ("CCPM", "ccpm"),
  "cclue_ner": ("C-CLUE NER", "c-clue-ner"),
}
RUN_CONFIG = {
  "seed": 0,
  "model": {"model_type": "deberta-v2", "hidden_size": 32},
  "corpus": {"source": "daizhige:/data/daizhige", "sequence_length": 128},
  "batch_size": 16,
  "num_train_steps": 1500,
  "warmup_steps": 150,
  "learning_rate": 0.002,
}


@pytest.fixture(scope="module")
def model():
  return parity_test._converted(tiny_models.deberta("bozhou", legacy=False))


def _front_matter(readme) -> dict:
  return yaml.safe_load(readme.read_text().split("---\n")[1])


def _check_model_index(index):
  """The Hub's model-index rules: a named model; each result a task with a type, a dataset with a
  name and a type, and metrics each with a type and a numeric value."""
  assert isinstance(index, list) and index
  for model in index:
    assert isinstance(model["name"], str) and model["name"]
    assert isinstance(model["results"], list) and model["results"]
    for result in model["results"]:
      assert set(result) <= {"task", "dataset", "metrics", "source"}
      assert isinstance(result["task"]["type"], str)
      assert isinstance(result["dataset"]["name"], str) and isinstance(result["dataset"]["type"], str)
      assert result["metrics"]
      for metric in result["metrics"]:
        assert isinstance(metric["type"], str)
        assert isinstance(metric["value"], (int, float)) and not isinstance(metric["value"], bool)


def test_card_metadata_and_model_index(model, tmp_path):
  out = export_folder.export(
    model,
    tmp_path / "hf",
    name=NAME,
    results=LEADERBOARD,
    base_model="bozhou/DeBERTa-base",
    training={"config": RUN_CONFIG, "step": 1000},
  )
  card = ModelCard.load(out / "README.md")
  assert card.data.language == ["lzh", "zh"] and card.data.license == "apache-2.0"
  assert card.data.library_name == "transformers" and card.data.pipeline_tag == "fill-mask"
  assert card.data.base_model == "bozhou/DeBERTa-base"
  assert card.data.datasets == ["daizhige", "WYWEB", "CCPM", "C-CLUE"]
  assert {"wyjax", "classical-chinese", "deberta-v2", "fill-mask"} <= set(card.data.tags)
  assert card.data.model_name == NAME
  expected = {
    (task.upper(), metric): value for task, metrics in LEADERBOARD["tasks"].items() for metric, value in metrics.items()
  }
  got = {(r.task_name, r.metric_type): r.metric_value for r in card.data.eval_results}
  assert got == expected and len(card.data.eval_results) == len(expected)
  for r in card.data.eval_results:
    assert (r.dataset_name, r.dataset_type) == DATASETS[r.dataset_config] and r.dataset_split == "dev"
    assert r.task_name == r.dataset_config.upper()

  index = _front_matter(out / "README.md")["model-index"]
  _check_model_index(index)
  assert len(index[0]["results"]) == len(LEADERBOARD["tasks"])  # CCPM's two tasks stay apart
  name, evals = model_index_to_eval_results(index)
  assert name == NAME and {(r.task_name, r.metric_type): r.metric_value for r in evals} == expected

  text = card.text
  assert "pretrained on daizhige for 1000 steps" in text and "- steps: 1000 of 1500 planned" in text
  assert "- batch size: 16 sequences" in text and "- sequence length: 128 tokens" in text
  config_block = re.search(r"<details>.*?```json\n(.*?)```", text, re.S).group(1)
  assert json.loads(config_block) == RUN_CONFIG
  tlc_rows = [line for line in text.splitlines() if line.startswith("| TLC |")]
  assert tlc_rows[0] == "| TLC | macro_f1 | 0.7431 |" and len(tlc_rows) == 3  # the main metric first


def test_card_without_results_or_training(model, tmp_path):
  out = export_folder.export(model, tmp_path / "hf", name=NAME)
  card = ModelCard.load(out / "README.md")
  assert "model-index" not in _front_matter(out / "README.md")
  assert not card.data.eval_results and card.data.datasets is None and card.data.base_model is None
  assert card.data.language == ["lzh", "zh"]
  assert "## Results" not in card.text and "## Training" not in card.text


def test_tasks_derived_from_a_corpus_do_not_claim_the_benchmark(model, tmp_path):
  results = {"split": "dev", "tasks": {"tlc": {"accuracy": 0.5}, "punc": {"f1": 0.25}}}
  out = export_folder.export(
    model,
    tmp_path / "hf",
    name=NAME,
    results=results,
    task_data="chinese-poetry",
    training={"config": {**RUN_CONFIG, "corpus": {"source": "poetry"}}, "step": 1500},
  )
  card = ModelCard.load(out / "README.md")
  assert card.data.datasets == ["chinese-poetry"]
  assert {r.dataset_name for r in card.data.eval_results} == {
    "TLC derived from chinese-poetry",
    "PUNC derived from chinese-poetry",
  }
  assert "WYWEB" not in (out / "README.md").read_text().split("## Usage")[0]
  _check_model_index(_front_matter(out / "README.md")["model-index"])


def test_usage_snippets_run_on_the_export(model, tmp_path):
  out = export_folder.export(model, tmp_path / "hf", name=NAME)
  snippets = re.findall(r"```python\n(.*?)```", (out / "README.md").read_text(), re.S)
  assert len(snippets) == 2 and all(json.dumps(NAME) in s for s in snippets)
  transformers_code, wyjax_code = (s.replace(json.dumps(NAME), repr(str(out))) for s in snippets)
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    exec(transformers_code, {})  # noqa: S102  (the card's own snippet)
  assert "'token_str'" in printed.getvalue()  # fill-mask predictions
  namespace = {}
  exec(wyjax_code, namespace)  # noqa: S102
  ids = namespace["ids"]
  assert namespace["logits"].shape == (1, len(ids), model.config.vocab_size)
  assert np.isfinite(namespace["logits"]).all() and model.tokenizer.mask_id in ids


def test_run_info_reads_the_run_config_step_and_leaderboard(model, tmp_path):
  workdir = tmp_path / "workdir"
  checkpoint_files.save_params(workdir, 10, model.params, model.config, model.tokenizer)
  assert export_folder.run_info(workdir) == (None, None)
  (workdir / "run_config.json").write_text(json.dumps({**RUN_CONFIG, "init": "bozhou/DeBERTa-base"}))
  (workdir / "leaderboard.json").write_text(json.dumps(LEADERBOARD))
  for path in (workdir, workdir / "checkpoints", workdir / "checkpoints" / "10"):
    training, results = export_folder.run_info(path)
    assert training["step"] == 10 and training["config"]["corpus"] == RUN_CONFIG["corpus"]
    assert results == LEADERBOARD
  assert storage.hub_id("bozhou/DeBERTa-base") == "bozhou/DeBERTa-base"
  assert storage.hub_id(str(workdir)) is None and storage.hub_id("gs://bucket/run") is None
  assert storage.hub_id("") is None

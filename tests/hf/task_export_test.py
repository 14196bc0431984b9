"""Fine-tuned task models exported as transformers' task models (each head kind, DeBERTa-v2,
BERT and RoBERTa), read back by wyjax.hf.task_models.load, and the CLI on a real fine-tuning run."""

import contextlib
import io
import json
import pathlib
import re
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest
import transformers
from huggingface_hub import ModelCard
from safetensors.numpy import load_file, save_file

from tests import checkpoint_files
from tests.hf import tiny_models
from tests.hf.fake_hub import FakeHub
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.data import tokenizer as tk
from wyjax.hf import configs, export_folder, task_models
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, suite

TOL = 1e-5
HF_CONFIGS = {
  "deberta": lambda: transformers.DebertaV2Config(**tiny_models.TINY, **tiny_models.DEBERTA_LAYOUTS["bozhou"]),
  "bert": lambda: transformers.BertConfig(**tiny_models.TINY, type_vocab_size=2),
  "roberta": lambda: transformers.RobertaConfig(
    **{**tiny_models.TINY, "max_position_embeddings": 66}, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5
  ),
}
# (task, encoder) → (transformers class, pipeline_tag): every head kind transformers has a class for.
CASES = {
  ("tlc", "deberta"): ("DebertaV2ForSequenceClassification", "text-classification"),
  ("afqmc", "bert"): ("BertForSequenceClassification", "text-classification"),
  ("tnews", "roberta"): ("RobertaForSequenceClassification", "text-classification"),
  ("punc", "deberta"): ("DebertaV2ForTokenClassification", "token-classification"),
  ("irc", "deberta"): ("DebertaV2ForMultipleChoice", "multiple-choice"),
  ("cmrc2018", "deberta"): ("DebertaV2ForQuestionAnswering", "question-answering"),
  ("wywmt", "deberta"): ("DebertaV2ForMaskedLM", "translation"),
}
TEXT = "學而時習之，不亦說乎？有朋自遠方來，不亦樂乎？"


def _fine_tuned(task_name: str, family: str, **inputs) -> task_models.FineTuned:
  """A random model of the task's head, every param perturbed (a zero bias or a unit LayerNorm
  scale would hide a swapped tensor), with a vocabulary of the texts the tests use. inputs:
  the head's init inputs, when not input_ids alone."""
  vocab = tk.build_vocab([TEXT, *task_models.VERIFY_TEXTS])
  if family == "roberta":  # its pad token is id 1
    vocab[0], vocab[1] = vocab[1], vocab[0]
  config = configs.from_hf(HF_CONFIGS[family]().to_dict()).replace(vocab_size=len(vocab))
  task = TASKS[task_name]
  head = task_models.HEADS[task.head]
  inputs = inputs or {"input_ids": np.ones((1, 1, 8) if head.rows else (1, 8), np.int32)}
  params = nn.unbox(head.build(config, len(task.labels)).init(jax.random.key(0), **inputs)["params"])
  rng = np.random.default_rng(0)
  params = jax.tree_util.tree_map(lambda x: np.asarray(x) + rng.normal(0, 0.1, x.shape).astype(np.float32), params)
  return task_models.FineTuned(task, config, params, tk.Tokenizer(vocab), max_length=48)


def _assert_same_params(got, expected):
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
  jax.tree_util.tree_map(np.testing.assert_array_equal, got, expected)


@pytest.mark.parametrize("task_name,family", sorted(CASES))
def test_export_is_the_transformers_task_model_and_loads_back(task_name, family, tmp_path):
  model = _fine_tuned(task_name, family)
  out = task_models.export(model, tmp_path / "hf", name="wyjax-test/tiny")
  assert task_models.verify(model, out) <= TOL
  architecture, pipeline_tag = CASES[task_name, family]
  hf = json.loads((out / "config.json").read_text())
  assert hf["architectures"] == [architecture]
  assert (hf["wyjax_task"], hf["wyjax_max_length"]) == (task_name, 48)
  loaded = transformers.AutoConfig.from_pretrained(out)
  if task_name in ("irc", "cmrc2018", "wywmt"):  # options, answer spans, tokens: no labels of the task's
    assert "id2label" not in hf
  else:
    assert loaded.id2label == dict(enumerate(TASKS[task_name].labels))
    assert loaded.label2id == {label: i for i, label in enumerate(TASKS[task_name].labels)}
  assert ModelCard.load(out / "README.md").data.pipeline_tag == pipeline_tag
  printed = _run_usage(out, "wyjax-test/tiny")
  if pipeline_tag == "text-classification":
    assert eval(printed)[0]["label"] in model.task.labels  # noqa: S307  (what the snippet printed)
  elif pipeline_tag == "question-answering":
    assert printed.strip() and printed.strip() in "有朋自远方来，不亦乐乎？"  # a span of the context
  elif pipeline_tag == "multiple-choice":
    assert printed.strip() in ("学习", "游戏")
  back = task_models.load(out)
  assert back.task is model.task and back.max_length == 48 and back.results is None
  assert back.model_config == model.model_config and back.tokenizer.vocab == model.tokenizer.vocab
  _assert_same_params(back.params, model.params)


def _run_usage(folder, name: str) -> str:
  """Runs the card's Python snippets on `folder` (the transformers one first, then wyjax's
  load, whose result must be the exported model); returns what the first printed."""
  snippets = re.findall(r"```python\n(.*?)```", (folder / "README.md").read_text(), re.S)
  printed = io.StringIO()
  for i, snippet in enumerate(snippets):
    namespace = {}
    with contextlib.redirect_stdout(printed if i == 0 else io.StringIO()):
      exec(snippet.replace(json.dumps(name), repr(str(folder))), namespace)  # noqa: S102  (the card's own)
  assert namespace["model"].task.name == json.loads((folder / "config.json").read_text())["wyjax_task"]
  return printed.getvalue()


def test_verify_sees_a_changed_tensor(tmp_path):
  """--verify's comparison can fail: the exported classifier's bias, shifted, shows."""
  model = _fine_tuned("punc", "deberta")
  out = task_models.export(model, tmp_path / "hf")
  tensors = load_file(out / "model.safetensors")
  tensors["classifier.bias"][3] += 0.01
  save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
  assert task_models.verify(model, out) == pytest.approx(0.01, rel=1e-3)


def test_token_classification_pipeline_runs_on_the_export(tmp_path):
  model = _fine_tuned("punc", "deberta")
  out = task_models.export(model, tmp_path / "hf")
  text = "学而时习之不亦说乎"
  tagged = transformers.pipeline("token-classification", model=str(out), ignore_labels=[])(text)
  assert [t["word"] for t in tagged] == list(text)
  assert {t["entity"] for t in tagged} <= set(TASKS["punc"].labels)


def test_a_head_without_a_transformers_class_is_refused_before_anything_is_written(tmp_path):
  rows = np.ones((1, 2, 8), np.int32)  # XuCi's two sentences
  model = _fine_tuned("xuci", "deberta", input_ids=rows, span_mask=rows)
  reason = (
    "XuCi's head (mean vectors of the target word in two sentences, [u; v; |u−v|] → dense) has no "
    "transformers model class; use wyjax.predict on the run"
  )
  with pytest.raises(ValueError) as refused:
    task_models.export(model, tmp_path / "hf")
  assert str(refused.value) == reason
  seed = tmp_path / "run" / "seed_0"  # the same model as a fine-tuning run's seed folder
  checkpoint_files.save_params(seed, 3, model.params, model.model_config, model.tokenizer)
  (seed.parent / "run_config.json").write_text(json.dumps(suite.task_config("xuci").to_dict()))
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.export", f"--checkpoint={seed}", f"--out={tmp_path / 'hf'}"],
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == f"wyjax: error: {reason}"
  assert not (tmp_path / "hf").exists()


def test_unknown_paths_are_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'nothing'}: no such folder")):
    task_models.load(tmp_path / "nothing")
  with pytest.raises(ValueError, match=re.escape(f"{tmp_path}: not a fine-tuned model: no results.json")):
    task_models.load(tmp_path)
  (tmp_path / "config.json").write_text('{"model_type": "bert"}')
  with pytest.raises(ValueError, match="has no wyjax_task: not a fine-tuned model"):
    task_models.load(tmp_path)


def _slice_tsv(source: pathlib.Path, out: pathlib.Path, rows: dict[str, slice]) -> pathlib.Path:
  out.mkdir(parents=True)
  lines = source.read_text(encoding="utf-8").splitlines()
  for split, part in rows.items():
    (out / f"{split}.tsv").write_text("\n".join(lines[part]) + "\n", encoding="utf-8")
  return out


@pytest.fixture(scope="module")
def tlc_run(shared_data, tmp_path_factory):
  """A real fine-tuning run: 4 steps of a fresh tiny model (its layers scanned) on 32 TLC lines."""
  root = tmp_path_factory.mktemp("tlc")
  data_dir = _slice_tsv(
    shared_data / "wyweb" / "tlc" / "train.tsv",
    root / "data",
    {"train": slice(0, 32), "dev": slice(32, 48), "test": slice(48, 64)},
  )
  config = suite.task_config(
    "tlc",
    data_dir=str(data_dir),
    num_train_steps=4,
    eval_every=4,
    batch_size=8,
    eval_batch_size=16,
    max_length=32,
    scan_layers=True,
  )
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv("WYJAX_CACHE", str(root / "cache"))
    finetuning.finetune(config, root / "run")
  return root / "run"


def test_cli_exports_a_fine_tuning_run_verified_with_its_scores(tlc_run, tmp_path):
  out = tmp_path / "hf"
  with FakeHub() as hub:
    env = pretrain_env(HF_ENDPOINT=hub.url, HF_TOKEN="hf_fake_token", HF_HUB_DISABLE_TELEMETRY="1")
    result = subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.export",
        f"--checkpoint={tlc_run}",
        f"--out={out}",
        "--verify",
        "--push_to_hub=wyjax-test/tiny-tlc",
      ],
      env=env,
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
    )
  assert result.returncode == 0, result.stderr[-3000:]
  assert hub.repos["wyjax-test/tiny-tlc"]["config.json"] == (out / "config.json").read_bytes()
  assert "exported tlc as DebertaV2ForSequenceClassification" in result.stdout
  assert "max |logit difference|" in result.stdout
  results = json.loads((tlc_run / "results.json").read_text())
  card = ModelCard.load(out / "README.md")
  evals = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
  assert evals[("dev", "accuracy")] == results["dev"]["accuracy"]
  assert evals[("test", "macro_f1")] == results["test"]["macro_f1"]
  assert json.loads((out / "config.json").read_text())["wyjax_max_length"] == 32
  from_run, from_folder = task_models.load(tlc_run), task_models.load(out)
  assert from_run.results == results and from_run.run_dir.name == "seed_0" and from_run.max_length == 32
  assert not from_run.model_config.scan_layers and task_models.load(tlc_run / "seed_0").run_dir == from_run.run_dir
  _assert_same_params(from_folder.params, from_run.params)
  with pytest.raises(FileExistsError, match="is not empty"):
    task_models.export(from_run, out)


def test_a_full_disk_leaves_no_exported_file_and_the_rerun_needs_no_overwrite(tlc_run, tmp_path):
  """A full disk is simulated by a file-size limit (`ulimit -f`, RLIMIT_FSIZE): model.safetensors
  cannot be written (EFBIG, as ENOSPC on a full disk; Python ignores SIGXFSZ). No file of the
  export may appear, not even the small ones that fit, so a rerun is not refused as non-empty."""
  out = tmp_path / "hf"
  command = [sys.executable, "-m", "wyjax.export", f"--checkpoint={tlc_run}", f"--out={out}"]
  env = pretrain_env(WYJAX_CACHE=str(tmp_path / "cache"))  # (its log file, well below the limit)
  full = subprocess.run(
    ["bash", "-c", 'ulimit -f 64 && exec "$@"', "bash", *command],
    env=env,
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert (
    full.returncode == 1
    and full.stderr.splitlines()[-1] == f"wyjax: error: {out / 'model.safetensors'}: File too large"
  ), full.stderr[-3000:]
  assert not out.exists()  # not even the folder: the export made it (locks.held) and wrote nothing there
  rerun = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert sorted(p.name for p in out.iterdir()) == sorted(export_folder.FILES)

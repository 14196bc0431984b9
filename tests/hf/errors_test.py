"""Bad checkpoints give errors that name the file, the key and the shapes."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import wyjax.hf
from tests import checkpoint_files
from tests.hf import parity_test, tiny_models
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.core.storage import FormatError
from wyjax.data import tokenizer as tk
from wyjax.hf import configs, export_folder, task_models, weights


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  model = parity_test._converted(tiny_models.deberta("bozhou", legacy=False))
  return export_folder.export(model, tmp_path_factory.mktemp("hf") / "model")


def _copy(folder, tmp_path):
  out = tmp_path / "copy"
  out.mkdir()
  for f in folder.iterdir():
    (out / f.name).write_bytes(f.read_bytes())
  return out


def test_unsupported_model_type(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  config = json.loads((folder / "config.json").read_text())
  config["model_type"] = "gpt2"
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(configs.UnsupportedConfigError, match=r"config.json: model_type 'gpt2' is not supported"):
    wyjax.hf.load(folder)


def test_a_config_without_model_type_is_read_by_its_architectures_or_refused(tmp_path):
  """hfl's first RoBERTa-wwm-ext config.json (a BERT's weights) names no model_type, and
  transformers 4 guessed "roberta" from the folder's name. wyjax reads the family its
  architectures name, and without them asks for the model_type in one line."""
  hf_model = tiny_models.bert()
  folder = tmp_path / "chinese-roberta-wwm-ext"
  hf_model.save_pretrained(folder)
  config = json.loads((folder / "config.json").read_text())
  ids, mask, types = parity_test._inputs(hf_model.config)
  _, logits = tiny_models.torch_outputs(hf_model, ids, mask, types)
  del config["model_type"]
  for model_type in ({"model_type": None}, {}):  # null, then no key
    (folder / "config.json").write_text(json.dumps({**config, **model_type}))
    model = wyjax.hf.load(folder)
    assert model.config.model_type == "bert"
    parity_test._assert_close(logits, model.mlm_logits(ids, mask, types), mask, "MLM logits")
  del config["architectures"]
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(
    configs.UnsupportedConfigError,
    match=re.escape(
      f"{folder / 'config.json'} names no model_type: add the family its weights were saved from, \"model_type\": "
      "one of 'deberta-v2', 'bert', 'roberta', 'electra' (hfl's RoBERTa-wwm-ext models are 'bert')"
    ),
  ):
    wyjax.hf.load(folder)


def test_conv_kernel_size_is_not_supported(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  config = json.loads((folder / "config.json").read_text())
  config["conv_kernel_size"] = 3
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(configs.UnsupportedConfigError, match="conv_kernel_size=3.*not supported"):
    wyjax.hf.load(folder)


def test_a_truncated_json_file_names_itself_and_its_line(exported, tmp_path):
  """config.json (hf loading, task model loading) and results.json (a fine-tuning workdir's best
  run, which predict, translate and export load) cut short: the error names the file and line."""
  folder = _copy(exported, tmp_path)
  cut = (folder / "config.json").read_text()[:60]
  (folder / "config.json").write_text(cut)
  for load in (wyjax.hf.load, task_models.load):
    with pytest.raises(FormatError, match=rf"config\.json:{cut.count(chr(10)) + 1}: invalid JSON"):
      load(folder)
  (tmp_path / "results.json").write_text('{"task": "tlc", "best_run": ')
  with pytest.raises(FormatError, match=r"results\.json:1: invalid JSON \(Expecting value: column 29\)"):
    task_models.load(tmp_path)


def test_json_whose_top_level_is_no_object_names_its_file_and_line(exported, tmp_path):
  """A config.json or results.json holding an array or a string: the error names the file and line."""
  folder = _copy(exported, tmp_path)
  (folder / "config.json").write_text('\n  "deberta-v2"\n')
  with pytest.raises(FormatError, match=r"config\.json:2: expected a JSON object, not a string"):
    wyjax.hf.load(folder)
  (tmp_path / "results.json").write_text("[]")
  with pytest.raises(FormatError, match=r"results\.json:1: expected a JSON object, not an array"):
    task_models.load(tmp_path)


def test_non_finite_weights_are_refused_by_every_loader(exported, tmp_path):
  """wyjax.hf.load (translate, fine-tuning's init) refuses weights holding Inf, naming the tensor."""
  folder = _copy(exported, tmp_path)
  tensors = load_file(folder / "model.safetensors")
  tensors["deberta.encoder.layer.0.attention.output.dense.weight"][1, 2] = np.inf
  save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
  with pytest.raises(weights.WeightsError, match=rf"{folder}: 1 weight tensor\(s\) hold NaN or Inf \(\['encoder'\]"):
    wyjax.hf.load(folder)


def test_missing_tensor_names_key_and_shape(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  tensors = load_file(folder / "model.safetensors")
  del tensors["deberta.encoder.layer.1.attention.self.value_proj.weight"]
  save_file(tensors, folder / "model.safetensors")
  with pytest.raises(
    weights.WeightsError,
    match=r"model.safetensors: missing tensor 'deberta.encoder.layer.1.attention.self"
    r".value_proj.weight' .*expected shape \(32, 4, 8\)",
  ):
    wyjax.hf.load(folder)


def test_wrongly_shaped_tensor_names_key_and_both_shapes(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  tensors = load_file(folder / "model.safetensors")
  tensors["deberta.encoder.layer.0.intermediate.dense.weight"] = np.zeros((40, 32), np.float32)
  save_file(tensors, folder / "model.safetensors")
  with pytest.raises(
    weights.WeightsError,
    match=r"'deberta.encoder.layer.0.intermediate.dense.weight' has shape \(40, 32\), "
    r"expected \(48, 32\)",
  ):
    wyjax.hf.load(folder)


def test_untied_decoder_is_refused(tmp_path):
  hf_model = tiny_models.bert()
  state_dict = {k: v.numpy().copy() for k, v in hf_model.state_dict().items()}
  state_dict["cls.predictions.decoder.weight"] += 1.0
  config = configs.from_hf(hf_model.config.to_dict())
  with pytest.raises(weights.WeightsError, match="differs from 'bert.embeddings.word_embeddings.weight'"):
    weights.from_hf(state_dict, config, wyjax.hf.loading.param_shapes(config, mlm=True))


def test_legacy_false_needs_equal_embedding_size(tmp_path):
  model = parity_test._converted(tiny_models.deberta("embed_proj"))
  with pytest.raises(ValueError, match="legacy=False needs embedding_size == hidden_size"):
    export_folder.export(model, tmp_path / "out", legacy=False)


# --- parts that do not belong together: refused at load, naming two of the files ----------------


@pytest.fixture(scope="module")
def exported_bert(tmp_path_factory):
  """BERT: absolute positions, a position_embeddings tensor to disagree with max_position_embeddings."""
  return export_folder.export(parity_test._converted(tiny_models.bert()), tmp_path_factory.mktemp("bert") / "model")


def _edit_config(folder, **changes):
  config = json.loads((folder / "config.json").read_text())
  config.update(changes)
  (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))


MISMATCHES = {  # name: (damage of the folder, what the error says, with the folder's path for {})
  "vocab.txt of another model": (
    lambda f: (f / "vocab.txt").write_text(
      "".join(t + "\n" for t in [*tk.SPECIAL_TOKENS, *"子曰學而時習之不亦說乎"]), encoding="utf-8"
    ),
    "{}/vocab.txt has 16 tokens but {}/config.json says vocab_size 97 (the weights' embedding rows): the "
    "tokenizer is not this model's",
  ),
  "vocab_size of another model": (
    lambda f: _edit_config(f, vocab_size=6000),
    "{}/config.json says vocab_size 6000, hidden_size 32 but {}/model.safetensors "
    "holds word_embeddings of 97 × 32: the config is not these weights'",
  ),
  "hidden_size of another model": (
    lambda f: _edit_config(f, hidden_size=64),
    "{}/config.json says vocab_size 97, hidden_size 64 but {}/model.safetensors holds word_embeddings of 97 × 32",
  ),
  "positions of another model": (
    lambda f: _edit_config(f, max_position_embeddings=512),
    "{}/config.json says max_position_embeddings 512, hidden_size 32 but "
    "{}/model.safetensors holds position_embeddings of 64 × 32",
  ),
  "no vocab_size": (
    lambda f: _edit_config(f, vocab_size=None),
    "{}/config.json gives no vocab_size; a model's config.json gives vocab_size, hidden_size",
  ),
  "no hidden_size": (lambda f: _edit_config(f, hidden_size=None), "{}/config.json gives no hidden_size"),
}


@pytest.mark.parametrize("name", MISMATCHES)
def test_parts_that_do_not_belong_together_are_refused_naming_both_files(exported_bert, name, tmp_path):
  """A vocab.txt, vocab_size, hidden_size or positions that are not the weights' (ids past the
  rows gather NaN, or every other character is [UNK]), or a config without a size, is refused
  naming the files."""
  folder = _copy(exported_bert, tmp_path)
  damage, says = MISMATCHES[name]
  damage(folder)
  with pytest.raises(ValueError, match=re.escape(says.format(folder, folder))):
    wyjax.hf.load(folder)


def test_a_workdirs_tokenizer_of_another_model_is_refused(exported, tmp_path):
  """A wyjax workdir (pretraining's, fine-tuning's init): tokenizer/vocab.txt against model.json
  and the checkpoint's embedding rows."""
  model = wyjax.hf.load(exported)
  workdir = tmp_path / "workdir"
  checkpoint_files.save_params(workdir, 1, model.params, model.config, tk.placeholder(model.config.vocab_size + 5))
  with pytest.raises(
    wyjax.hf.loading.PartsError,
    match=re.escape(f"{workdir}/tokenizer/vocab.txt has 102 tokens but {workdir}/model.json says vocab_size 97"),
  ):
    wyjax.hf.load(workdir)


def test_an_export_longer_than_its_positions_is_refused(tmp_path):
  """An exported task model whose wyjax_max_length is past its absolute positions: predict would
  feed positions with no embedding (NaN)."""
  from tests.hf.task_export_test import _fine_tuned

  folder = task_models.export(_fine_tuned("tlc", "bert"), tmp_path / "tlc")
  _edit_config(folder, wyjax_max_length=128)
  with pytest.raises(
    wyjax.hf.loading.PartsError,
    match=re.escape(f"{folder}/config.json: wyjax_max_length 128 is more than its max_position_embeddings 64"),
  ):
    task_models.load(folder)


def _swapped(vocab_file):
  """vocab.txt with two of its characters swapped: the same tokens and count, another order."""
  tokens = vocab_file.read_text(encoding="utf-8").splitlines()
  tokens[5], tokens[6] = tokens[6], tokens[5]  # (after the five special tokens)
  vocab_file.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")


def test_a_vocabulary_in_another_order_is_refused_by_every_loader(exported, tmp_path):
  """A vocab.txt of the right row count in another order would read every character as another:
  the vocabulary's SHA-256 in order is recorded (config.json's wyjax_vocab_sha256 by every export,
  model.json's vocab_sha256 in a workdir) and compared."""
  from tests.hf.task_export_test import _fine_tuned

  folder, task_folder, workdir = _copy(exported, tmp_path), tmp_path / "tlc", tmp_path / "workdir"
  task_models.export(_fine_tuned("tlc", "bert"), task_folder)
  model = wyjax.hf.load(exported)
  checkpoint_files.save_params(workdir, 1, model.params, model.config, model.tokenizer)
  for load, path, records, vocab_file in (
    (wyjax.hf.load, folder, folder / "config.json", folder / "vocab.txt"),
    (task_models.load, task_folder, task_folder / "config.json", task_folder / "vocab.txt"),
    (wyjax.hf.load, workdir, workdir / "model.json", workdir / "tokenizer" / "vocab.txt"),
  ):
    load(path)  # as it was saved
    _swapped(vocab_file)
    with pytest.raises(
      wyjax.hf.loading.PartsError, match=re.escape(f"{vocab_file} is not the vocabulary {records} records (its ")
    ):
      load(path)


def _tensors(folder):
  """The exported folder's weights as a state dict of torch tensors (what pytorch_model.bin holds)."""
  import torch

  return {k: torch.from_numpy(v.copy()) for k, v in load_file(folder / "model.safetensors").items()}


def _pytorch_file(kind: str, tensors: dict, file) -> None:
  """Writes `file` as a pytorch_model.bin damaged as `kind` says (issue 84's cases: cut short, foreign objects)."""
  import datetime

  import torch

  if kind == "cut short":
    torch.save(tensors, file)
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
  elif kind == "empty":
    file.write_bytes(b"")
  elif kind == "not a checkpoint":
    file.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
  elif kind == "a pickled object":  # weights_only refuses it, advising to turn itself off
    torch.save({**tensors, "saved_on": datetime.date(2026, 12, 3)}, file)
  elif kind == "a dict of strings":
    torch.save({"model": "deberta", "step": "10"}, file)
  elif kind == "a bare tensor":
    torch.save(next(iter(tensors.values())), file)


PYTORCH_DAMAGE = {
  "cut short": r"not a readable PyTorch checkpoint, cut short or damaged \(.+\); export or download it again$",
  "empty": r"not a readable PyTorch checkpoint, cut short or damaged \(EOFError\); export or download it again$",
  "not a checkpoint": r"not a readable PyTorch checkpoint, cut short or damaged \(RuntimeError: .*\); export or "
  r"download it again$",
  "a pickled object": r"holds a pickled datetime\.date, not only tensors, and wyjax runs no code from a file; save "
  r"the model's state_dict\(\) or model\.safetensors in its place, or download it again$",
  "a dict of strings": r"holds no state dict of tensors \('model' is of type str\); save the model's state_dict\(\)",
  "a bare tensor": r"holds no state dict of tensors \(its content is of type Tensor\); save the model's",
}


@pytest.mark.parametrize("kind", list(PYTORCH_DAMAGE))
def test_a_damaged_or_foreign_pytorch_file_is_one_line_naming_it_and_what_to_do(exported, kind, tmp_path):
  """Issue 84: a pytorch_model.bin cut short, or holding objects other than tensors, was a traceback (40–53
  lines) ending, for a pickled object, with torch's advice to load it with weights_only=False. Each is one line
  naming the file, what is wrong and what to do; no safety is ever advised off (weights_only=True stays)."""
  folder = _copy(exported, tmp_path)
  tensors = _tensors(folder)
  (folder / "model.safetensors").unlink()
  file = folder / "pytorch_model.bin"
  _pytorch_file(kind, tensors, file)
  with pytest.raises(weights.WeightsError) as error:
    wyjax.hf.loading.read_state_dict(folder)
  message = str(error.value)
  assert re.match(re.escape(f"{file}: ") + PYTORCH_DAMAGE[kind], message), message
  assert "\n" not in message and "weights_only" not in message and error.value.__cause__ is None


def test_pytorch_and_bfloat16_files_are_read_and_a_safetensors_file_cut_short_is_one_line(exported, tmp_path):
  """A pytorch_model.bin of tensors is read as saved; a model.safetensors of bfloat16 tensors (no numpy dtype) too,
  through torch (it was a KeyError traceback: safetensors' numpy reader raises KeyError for BF16); one cut short
  names itself."""
  import torch
  from safetensors.torch import save_file as save_torch_file

  folder = _copy(exported, tmp_path)
  tensors = _tensors(folder)
  file = folder / "model.safetensors"
  file.unlink()
  torch.save(tensors, folder / "pytorch_model.bin")
  state_dict, source = wyjax.hf.loading.read_state_dict(folder)
  assert source == str(folder / "pytorch_model.bin")
  assert state_dict.keys() == tensors.keys() and all(np.array_equal(state_dict[k], v) for k, v in tensors.items())
  save_torch_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, file)
  state_dict, source = wyjax.hf.loading.read_state_dict(folder)
  assert source == str(file)
  assert all(np.array_equal(state_dict[k], v.to(torch.bfloat16).float().numpy()) for k, v in tensors.items())
  file.write_bytes(file.read_bytes()[:-10])
  with pytest.raises(
    weights.WeightsError, match=re.escape(f"{file}: not a readable safetensors file (") + r".*; export or download"
  ):
    wyjax.hf.loading.read_state_dict(folder)


def test_a_pickled_object_in_pytorch_model_bin_ends_export_in_one_line(exported, tmp_path):
  """The same reader serves pretraining's and fine-tuning's --config.init, probe --model and export --checkpoint:
  export, run as a user runs it, ends in one line, exit 1, no traceback and none of torch's advice."""
  folder = _copy(exported, tmp_path)
  tensors = _tensors(folder)
  (folder / "model.safetensors").unlink()
  _pytorch_file("a pickled object", tensors, folder / "pytorch_model.bin")
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.export", f"--checkpoint={folder}", f"--out={tmp_path / 'out'}"],
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 1, result.stderr[-3000:]
  errors = [line for line in result.stderr.splitlines() if line.startswith("wyjax: error: ")]
  assert errors == [
    f"wyjax: error: {folder / 'pytorch_model.bin'}: holds a pickled datetime.date, not only tensors, "
    "and wyjax runs no code from a file; save the model's state_dict() or model.safetensors in its "
    "place, or download it again"
  ], result.stderr[-3000:]
  assert "Traceback" not in result.stderr and "weights_only" not in result.stderr, result.stderr[-3000:]
  assert result.stderr.splitlines()[-1] == errors[0]

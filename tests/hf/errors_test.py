"""Bad checkpoints give errors that name the file, the key and the shapes."""
import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import wyjax.hf
from tests.hf import parity_test, tiny_models
from wyjax.core.storage import FormatError
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


def test_conv_kernel_size_is_not_supported(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  config = json.loads((folder / "config.json").read_text())
  config["conv_kernel_size"] = 3
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(configs.UnsupportedConfigError, match="conv_kernel_size=3.*not supported"):
    wyjax.hf.load(folder)


def test_a_truncated_json_file_names_itself_and_its_line(exported, tmp_path):
  """config.json (hf loading, task model loading) and results.json (a fine-tuning workdir's best
  run, which predict, translate and export load) cut short: json's bare message named neither."""
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
  """A config.json or results.json holding an array or a string: .get on it was a traceback."""
  folder = _copy(exported, tmp_path)
  (folder / "config.json").write_text('\n  "deberta-v2"\n')
  with pytest.raises(FormatError, match=r"config\.json:2: expected a JSON object, not a string"):
    wyjax.hf.load(folder)
  (tmp_path / "results.json").write_text("[]")
  with pytest.raises(FormatError, match=r"results\.json:1: expected a JSON object, not an array"):
    task_models.load(tmp_path)


def test_non_finite_weights_are_refused_by_every_loader(exported, tmp_path):
  """wyjax.hf.load (translate, fine-tuning's init) took NaN weights silently, as task models did."""
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
  with pytest.raises(weights.WeightsError,
                     match=r"model.safetensors: missing tensor 'deberta.encoder.layer.1.attention.self"
                           r".value_proj.weight' .*expected shape \(32, 4, 8\)"):
    wyjax.hf.load(folder)


def test_wrongly_shaped_tensor_names_key_and_both_shapes(exported, tmp_path):
  folder = _copy(exported, tmp_path)
  tensors = load_file(folder / "model.safetensors")
  tensors["deberta.encoder.layer.0.intermediate.dense.weight"] = np.zeros((40, 32), np.float32)
  save_file(tensors, folder / "model.safetensors")
  with pytest.raises(weights.WeightsError,
                     match=r"'deberta.encoder.layer.0.intermediate.dense.weight' has shape \(40, 32\), "
                           r"expected \(48, 32\)"):
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

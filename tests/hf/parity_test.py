"""wyjax vs transformers (PyTorch): HF → wyjax, and wyjax → export → from_pretrained."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import wyjax.hf
from tests import checkpoint_files
from tests.hf import tiny_models
from wyjax.data.tokenizer import SPECIAL_TOKENS, Tokenizer
from wyjax.hf import configs, export_folder, loading, weights
from wyjax.models import MaskedLM, stack_layers

TOL = 1e-5
CASES = [
  ("deberta", layout, legacy)
  for layout in tiny_models.DEBERTA_LAYOUTS
  for legacy in ((True,) if layout == "embed_proj" else (True, False))
]
CASES += [("bert", None, True), ("roberta", None, True), ("electra", None, True)]


def _hf_model(family, layout, legacy):
  if family == "deberta":
    return tiny_models.deberta(layout, legacy=legacy)
  return getattr(tiny_models, family)()


def _inputs(config):
  ids, mask = tiny_models.padded_batch(config.vocab_size, pad_id=config.pad_token_id)
  types = None
  if config.type_vocab_size > 1:
    types = np.broadcast_to((np.arange(ids.shape[1]) >= 12).astype(np.int64), ids.shape) * mask
  return ids, mask, types


def _converted(hf_model) -> loading.Model:
  config = configs.from_hf(hf_model.config.to_dict())
  state_dict = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  params, unused = weights.from_hf(state_dict, config, loading.param_shapes(config, mlm=True))
  assert unused == []
  vocab = list(SPECIAL_TOKENS) + [chr(0x4E00 + i) for i in range(config.vocab_size - len(SPECIAL_TOKENS))]
  if config.pad_token_id != 0:  # RoBERTa: pad is id 1; keep the tokenizer consistent.
    vocab[0], vocab[1] = vocab[1], vocab[0]
  return loading.Model(config, params, Tokenizer(vocab))


def _assert_close(theirs, ours, mask, what):
  real = mask.astype(bool)
  diff = np.abs(theirs[real] - ours[real]).max()
  assert diff < TOL, f"{what}: max |diff| {diff:.2e} on non-pad positions"


# Both attention implementations ("pallas": the fused kernels, interpreted on CPU); `legacy` only
# names the MLM head's weights, so "pallas" runs each layout once.
ATTENTION_CASES = [(*case, "xla") for case in CASES] + [(*case, "pallas") for case in CASES if case[2]]


@pytest.mark.parametrize("family,layout,legacy,attention", ATTENTION_CASES)
def test_hf_to_wyjax(family, layout, legacy, attention):
  hf_model = _hf_model(family, layout, legacy)
  model = _converted(hf_model)
  model = loading.Model(model.config.replace(attention=attention), model.params, model.tokenizer)
  ids, mask, types = _inputs(model.config)
  hidden, logits = tiny_models.torch_outputs(hf_model, ids, mask, types)
  _assert_close(hidden, model.encode(ids, mask, types), mask, "last hidden state")
  _assert_close(logits, model.mlm_logits(ids, mask, types), mask, "MLM logits")


@pytest.mark.parametrize("family,layout,legacy", CASES)
def test_wyjax_export_to_transformers(family, layout, legacy, tmp_path):
  model = _converted(_hf_model(family, layout, legacy))
  out = export_folder.export(model, tmp_path / "hf", legacy=legacy)
  reloaded = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
  expected_class = configs.ARCHITECTURES[model.config.model_type]
  assert type(reloaded).__name__ == expected_class
  ids, mask, types = _inputs(model.config)
  hidden, logits = tiny_models.torch_outputs(reloaded, ids, mask, types)
  _assert_close(hidden, model.encode(ids, mask, types), mask, "last hidden state after export")
  _assert_close(logits, model.mlm_logits(ids, mask, types), mask, "MLM logits after export")


def test_scanned_layers_match_transformers_through_checkpoint_and_export(tmp_path):
  """A scan_layers model (the layers' params stacked) computes transformers' logits; its wyjax
  checkpoint loads per layer and exports to a transformers model with the same logits."""
  hf_model = tiny_models.deberta("bozhou", legacy=False)
  model = _converted(hf_model)
  config = model.config.replace(scan_layers=True)
  params = {**model.params, "encoder": stack_layers(model.params["encoder"])}
  ids, mask, types = _inputs(config)
  _, logits = tiny_models.torch_outputs(hf_model, ids, mask, types)
  _assert_close(logits, np.asarray(MaskedLM(config).apply({"params": params}, ids, mask)), mask, "MLM logits")
  checkpoint_files.save_params(tmp_path / "wyjax", 0, params, config, model.tokenizer)
  loaded = wyjax.hf.load(tmp_path / "wyjax")
  assert not loaded.config.scan_layers and "layer_1" in loaded.params["encoder"]
  reloaded = transformers.AutoModelForMaskedLM.from_pretrained(export_folder.export(loaded, tmp_path / "hf")).eval()
  _assert_close(logits, tiny_models.torch_outputs(reloaded, ids, mask, types)[1], mask, "MLM logits after export")


@pytest.mark.parametrize("layout", ["bozhou", "v3", "separate_keys"])
def test_gradients_equal_transformers(layout):
  """Every parameter's gradient of a loss over the MLM logits equals PyTorch's: the backward of
  the c2p/p2c terms by distance and skew (deberta_v2.relative_terms) included, at a length past
  the exact buckets."""
  hf_model = tiny_models.deberta(layout)
  model = _converted(hf_model)
  ids, mask, types = _inputs(model.config)
  weight = np.random.default_rng(0).normal(size=(*ids.shape, model.config.vocab_size)) * mask[..., None]
  kwargs = {"token_type_ids": torch.tensor(types)} if types is not None else {}
  logits = hf_model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), **kwargs).logits
  (logits * torch.tensor(weight, dtype=torch.float32)).sum().backward()
  torch_grads = {
    name: tensor.grad.numpy() if tensor.grad is not None else np.zeros(tuple(tensor.shape), np.float32)
    for name, tensor in {**dict(hf_model.named_buffers()), **dict(hf_model.named_parameters())}.items()
  }
  expected, _ = weights.from_hf(torch_grads, model.config, loading.param_shapes(model.config, mlm=True))
  types = np.zeros_like(ids) if types is None else types
  loss = lambda p: jnp.sum(MaskedLM(model.config).apply({"params": p}, ids, mask, types) * weight)
  ours = jax.grad(loss)(model.params)
  for path, theirs in jax.tree_util.tree_leaves_with_path(expected):
    mine = np.asarray(functools.reduce(lambda tree, key: tree[key.key], path, ours))
    scale = max(np.abs(theirs).max(), 1e-3)
    assert np.abs(mine - theirs).max() / scale < 1e-4, jax.tree_util.keystr(path)


def test_export_writes_every_relative_attention_field(tmp_path):
  model = _converted(tiny_models.deberta("bozhou", legacy=False))
  import json

  config = json.loads((export_folder.export(model, tmp_path / "hf") / "config.json").read_text())
  for field in (
    "relative_attention",
    "max_relative_positions",
    "position_buckets",
    "pos_att_type",
    "share_att_key",
    "norm_rel_ebd",
    "position_biased_input",
    "legacy",
    "type_vocab_size",
  ):
    assert field in config, field
  assert config["legacy"] is False and config["relative_attention"] is True
  assert config["position_buckets"] == 16 and sorted(config["pos_att_type"]) == ["c2p", "p2c"]


def test_three_d_mask_equals_broadcast_two_d_mask():
  model = _converted(tiny_models.deberta("bozhou"))
  ids, mask, _ = _inputs(model.config)
  mask3d = np.broadcast_to(mask[:, None, :], (mask.shape[0], mask.shape[1], mask.shape[1]))
  hidden2d = model.encode(ids, mask)
  hidden3d = model.encode(ids, mask3d)
  np.testing.assert_array_equal(hidden2d[mask.astype(bool)], hidden3d[mask.astype(bool)])


def test_prefix_mask_blocks_future_tokens():
  """A [batch, q, k] causal mask: changing a later token leaves earlier outputs unchanged."""
  model = _converted(tiny_models.deberta("bozhou"))
  length = 12
  ids = np.arange(5, 5 + length)[None]
  causal = np.tril(np.ones((length, length), np.int32))[None]
  changed = ids.copy()
  changed[0, -1] += 1
  a, b = model.encode(ids, causal), model.encode(changed, causal)
  np.testing.assert_allclose(a[0, :-1], b[0, :-1], atol=1e-6)
  assert np.abs(a[0, -1] - b[0, -1]).max() > 1e-3


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_base_model_with_pooler(family, tmp_path):
  """A bare BertModel/RobertaModel folder (no prefix, with pooler) loads and matches."""
  base = tiny_models._randomize(transformers.AutoModel.from_config(getattr(tiny_models, family)().config), 3)
  assert base.pooler is not None
  base.save_pretrained(tmp_path)
  model = wyjax.hf.load(tmp_path)
  assert not model.has_mlm
  ids, mask, _ = _inputs(model.config)
  with torch.no_grad():
    out = base(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
  _assert_close(out.last_hidden_state.numpy(), model.encode(ids, mask), mask, "last hidden state")
  diff = np.abs(out.pooler_output.numpy() - model.pooled(ids, mask)).max()
  assert diff < TOL, f"pooler output differs by {diff:.2e}"


def test_loading_an_export_builds_no_program(tmp_path):
  """Loading puts the weights on the device as they are, compiling no program (a jnp.asarray would
  compile one per parameter shape, in every fresh process)."""
  folder = export_folder.export(_converted(tiny_models.bert()), tmp_path / "hf")
  built = []

  def listen(event, seconds, fun_name="", **_):
    if event == "/jax/core/compile/backend_compile_duration":
      built.append(fun_name)

  jax.clear_caches()  # as in a fresh process
  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    model = loading.load(folder)
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)
  assert built == [] and len(jax.tree_util.tree_leaves(model.params)) > 10

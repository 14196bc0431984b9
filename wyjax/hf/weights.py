"""transformers state dict ↔ wyjax params, one explicit key table per architecture.

torch `Linear.weight` is [out, in]; a wyjax kernel is [in axes..., out axes...] (e.g. a query
kernel is [embed, heads, kv]), so a weight is transposed and reshaped on the way in, and
flattened back on the way out.
"""

from collections.abc import Iterator, Mapping

import jax
import numpy as np

from wyjax.models.config import EncoderConfig

PREFIXES = {"deberta-v2": "deberta.", "bert": "bert.", "roberta": "roberta.", "electra": "electra."}
# ELECTRA's discriminator head (ElectraForPreTraining), found by this key.
RTD_KEY = "discriminator_predictions.dense_prediction.weight"
# Which MLM head layout a state dict carries, found by its bias key.
MLM_LAYOUTS = {
  "cls.predictions.bias": "cls",
  "lm_predictions.lm_head.bias": "lm_predictions",
  "lm_head.bias": "lm_head",
  "generator_lm_head.bias": "generator",
}

# (transformers key, wyjax param path, number of input axes of a kernel or None for a copy)
Entry = tuple[str, tuple[str, ...], int | None]


class WeightsError(ValueError):
  """Weights that cannot be the model's: a tensor missing, misshapen, untied or not finite."""


def check_finite(params, source) -> None:
  """Refuses weights holding NaN or Inf (a model with them predicts nothing, silently), raising WeightsError.

  Checked on the host, where they were read (numpy), before they are put on a device.
  """
  flat, _ = jax.tree_util.tree_flatten_with_path(params)
  broken = [jax.tree_util.keystr(key) for key, x in flat if not np.isfinite(x).all()]
  if broken:
    raise WeightsError(
      f"{source}: {len(broken)} weight tensor(s) hold NaN or Inf ({', '.join(broken[:3])}); the model cannot predict"
    )


def _dense(hf: str, path: tuple[str, ...], n_in: int = 1, bias: bool = True) -> Iterator[Entry]:
  yield f"{hf}.weight", path + ("kernel",), n_in
  if bias:
    yield f"{hf}.bias", path + ("bias",), None


def _norm(hf: str, path: tuple[str, ...]) -> Iterator[Entry]:
  yield f"{hf}.weight", path + ("scale",), None
  yield f"{hf}.bias", path + ("bias",), None


def _embed(hf: str, path: tuple[str, ...]) -> Iterator[Entry]:
  yield f"{hf}.weight", path + ("embedding",), None


def encoder_entries(config: EncoderConfig, prefix: str) -> Iterator[Entry]:
  e, deberta = ("encoder",), config.model_type == "deberta-v2"
  p = prefix
  yield from _embed(f"{p}embeddings.word_embeddings", e + ("embeddings", "word_embeddings"))
  if config.position_biased_input:
    yield from _embed(f"{p}embeddings.position_embeddings", e + ("embeddings", "position_embeddings"))
  if config.type_vocab_size > 0:
    yield from _embed(f"{p}embeddings.token_type_embeddings", e + ("embeddings", "token_type_embeddings"))
  if deberta and config.embed_dim != config.hidden_size:
    yield from _dense(f"{p}embeddings.embed_proj", e + ("embeddings", "embed_proj"), bias=False)
  yield from _norm(f"{p}embeddings.LayerNorm", e + ("embeddings", "norm"))
  if not deberta and config.embed_dim != config.hidden_size:
    yield from _dense(f"{p}embeddings_project", e + ("embeddings_project",))
  if deberta and config.relative_attention:
    yield from _embed(f"{p}encoder.rel_embeddings", e + ("rel_embeddings",))
    if config.layer_norm_rel_embeddings:
      yield from _norm(f"{p}encoder.LayerNorm", e + ("rel_norm",))
  for i in range(config.num_hidden_layers):
    hf, ours = f"{p}encoder.layer.{i}", e + (f"layer_{i}",)
    attn = ours + ("attention",)
    suffix = "_proj" if deberta else ""
    for name in ("query", "key", "value"):
      yield from _dense(f"{hf}.attention.self.{name}{suffix}", attn + (name,))
    if deberta and config.relative_attention and not config.share_att_key:
      if "c2p" in config.pos_att_type:
        yield from _dense(f"{hf}.attention.self.pos_key_proj", attn + ("pos_key",))
      if "p2c" in config.pos_att_type:
        yield from _dense(f"{hf}.attention.self.pos_query_proj", attn + ("pos_query",))
    yield from _dense(f"{hf}.attention.output.dense", attn + ("out",), n_in=2)
    yield from _norm(f"{hf}.attention.output.LayerNorm", ours + ("attention_norm",))
    yield from _dense(f"{hf}.intermediate.dense", ours + ("mlp", "wi"))
    yield from _dense(f"{hf}.output.dense", ours + ("mlp", "wo"))
    yield from _norm(f"{hf}.output.LayerNorm", ours + ("mlp_norm",))


def mlm_entries(layout: str) -> Iterator[Entry]:
  """The MLM head's entries; ELECTRA's generator splits it into generator_predictions and generator_lm_head."""
  h = ("mlm_head",)
  if layout == "generator":
    yield from _dense("generator_predictions.dense", h + ("dense",))
    yield from _norm("generator_predictions.LayerNorm", h + ("norm",))
    yield "generator_lm_head.bias", h + ("bias",), None
    return
  hf = {"cls": "cls.predictions", "lm_predictions": "lm_predictions.lm_head", "lm_head": "lm_head"}[layout]
  transform = f"{hf}.transform" if layout == "cls" else hf
  yield from _dense(f"{transform}.dense", h + ("dense",))
  yield from _norm(f"{transform}.{'layer_norm' if layout == 'lm_head' else 'LayerNorm'}", h + ("norm",))
  yield f"{hf}.bias", h + ("bias",), None


def rtd_entries() -> Iterator[Entry]:
  """ELECTRA's discriminator head: discriminator_predictions.{dense,dense_prediction} ↔ rtd_head."""
  for name in ("dense", "dense_prediction"):
    yield from _dense(f"discriminator_predictions.{name}", ("rtd_head", name))


def pooler_entries(config: EncoderConfig, prefix: str) -> Iterator[Entry]:
  """The pooler's entry: BERT's in its base model (`bert.pooler.dense`), DeBERTa's in a task model (`pooler.dense`)."""
  yield from _dense(f"{'' if config.model_type == 'deberta-v2' else prefix}pooler.dense", ("pooler", "dense"))


def head_entries(config: EncoderConfig, prefix: str, names, *, classification_head: bool = False) -> Iterator[Entry]:
  """A task model's head, for the params of it among `names` (pooler, classifier, qa_outputs).

  classification_head: RoBERTa's and ELECTRA's *ForSequenceClassification, whose classification head is
  our pooler and classifier (token 0 → dense → tanh, ELECTRA's gelu → out_proj) named classifier.dense and
  classifier.out_proj; its base model has no pooler.
  """
  if classification_head:
    yield from _dense("classifier.dense", ("pooler", "dense"))
    yield from _dense("classifier.out_proj", ("classifier",))
    return
  if "pooler" in names:
    yield from pooler_entries(config, prefix)
  for name in ("classifier", "qa_outputs"):
    if name in names:
      yield from _dense(name, (name,))


def mlm_layout(config: EncoderConfig, legacy: bool) -> str:
  """The head layout transformers' *ForMaskedLM of this model type expects."""
  if config.model_type == "roberta":
    return "lm_head"
  if config.model_type == "electra":
    return "generator"
  if config.model_type == "deberta-v2" and not legacy:
    return "lm_predictions"
  return "cls"


def has_pooler(config: EncoderConfig, keys) -> bool:
  return config.model_type != "deberta-v2" and f"{encoder_prefix(config, keys)}pooler.dense.weight" in keys


def detect_mlm_layout(keys) -> str | None:
  found = [layout for key, layout in MLM_LAYOUTS.items() if key in keys]
  if len(found) > 1:
    raise WeightsError(f"state dict has more than one MLM head: {found}")
  return found[0] if found else None


def encoder_prefix(config: EncoderConfig, keys) -> str:
  """'deberta.' etc. for task models, '' for a bare base model's state dict."""
  prefix = PREFIXES[config.model_type]
  return prefix if any(k.startswith(prefix) for k in keys) else ""


def _get(tree: Mapping, path: tuple[str, ...]):
  for name in path:
    tree = tree[name]
  return tree


def _set(tree: dict, path: tuple[str, ...], value) -> None:
  for name in path[:-1]:
    tree = tree.setdefault(name, {})
  tree[path[-1]] = value


def _hf_shape(shape: tuple[int, ...], path: tuple[str, ...], n_in: int | None) -> tuple[int, ...]:
  """The torch shape of a wyjax param: [out, in] for kernels, flat for biases."""
  if n_in:
    return int(np.prod(shape[n_in:])), int(np.prod(shape[:n_in]))
  if path[-1] == "bias":
    return (int(np.prod(shape)),)
  return tuple(shape)


def from_hf(
  state_dict: Mapping[str, np.ndarray], config: EncoderConfig, target_shapes: Mapping, *, source: str = "state dict"
) -> tuple[dict, list[str]]:
  """A transformers state dict as wyjax params (numpy), and the keys it did not use.

  target_shapes: a params tree of shapes; a multiple-choice model's (its one-label classifier
  under 'scorer') gets its params there. Raises WeightsError for a tensor missing or misshapen.
  """
  if "scorer" in target_shapes:
    params, unused = from_hf(state_dict, config, target_shapes["scorer"], source=source)
    return {"scorer": params}, unused
  keys = set(state_dict)
  prefix = encoder_prefix(config, keys)
  entries = list(encoder_entries(config, prefix))
  entries += head_entries(
    config,
    prefix,
    target_shapes,
    classification_head="classifier.out_proj.weight" in keys and "pooler" in target_shapes,
  )
  if "rtd_head" in target_shapes:
    entries += rtd_entries()
  if "mlm_head" in target_shapes:
    layout = detect_mlm_layout(keys)
    if layout is None:
      raise WeightsError(f"{source}: no MLM head found (looked for {sorted(MLM_LAYOUTS)})")
    entries += mlm_entries(layout)
  params, used = {}, set()
  used |= _check_tied(state_dict, entries, source)
  for key, path, n_in in entries:
    shape = tuple(_get(target_shapes, path))
    if key not in state_dict:
      raise WeightsError(f"{source}: missing tensor {key!r} (wyjax {'/'.join(path)}, expected shape {shape})")
    value = np.asarray(state_dict[key], dtype=np.float32)
    expected = _hf_shape(shape, path, n_in)
    if value.shape != expected:
      raise WeightsError(
        f"{source}: tensor {key!r} has shape {value.shape}, expected {expected} (wyjax {'/'.join(path)} {shape})"
      )
    _set(params, path, (value.T if n_in else value).reshape(shape))
    used.add(key)
  return params, sorted(keys - used)


def _check_tied(state_dict: Mapping, entries: list[Entry], source: str) -> set[str]:
  """transformers writes the tied MLM decoder as copies; verify they really are copies."""
  by_path = {path: key for key, path, _ in entries}
  word = by_path[("encoder", "embeddings", "word_embeddings", "embedding")]
  tied = {}
  for layout_key in ("cls.predictions", "lm_head"):
    tied[f"{layout_key}.decoder.weight"] = word
    tied[f"{layout_key}.decoder.bias"] = f"{layout_key}.bias"
  tied["generator_lm_head.weight"] = word
  checked = set()
  for alias, original in tied.items():
    if alias in state_dict and original in state_dict:
      if not np.array_equal(np.asarray(state_dict[alias]), np.asarray(state_dict[original])):
        raise WeightsError(
          f"{source}: {alias!r} differs from {original!r}; wyjax ties the MLM decoder to the "
          "word embeddings and cannot hold an untied one"
        )
      checked.add(alias)
  return checked | {k for k in state_dict if k.endswith("position_ids")}


def to_hf(params: Mapping, config: EncoderConfig, *, legacy: bool = False) -> dict[str, np.ndarray]:
  """The transformers state dict of the model `params` make.

  That is *ForMaskedLM (an MLM head), ElectraForPreTraining (a discriminator head, 'rtd_head'), a task
  model (a classifier or qa_outputs; a multiple-choice model's under 'scorer'), else a base model (encoder
  and pooler: *ForMaskedLM has no pooler).
  """
  multiple_choice = "scorer" in params
  params = params["scorer"] if multiple_choice else params
  task_model = multiple_choice or any(name in params for name in ("mlm_head", "rtd_head", "classifier", "qa_outputs"))
  prefix = PREFIXES[config.model_type] if task_model else ""
  entries = list(encoder_entries(config, prefix))
  if "mlm_head" in params:
    entries += mlm_entries(mlm_layout(config, legacy))
  elif "rtd_head" in params:
    entries += rtd_entries()
  else:
    sequence_classifier = not multiple_choice and "pooler" in params and "classifier" in params
    entries += head_entries(
      config, prefix, params, classification_head=sequence_classifier and config.model_type in ("roberta", "electra")
    )
  state_dict = {}
  for key, path, n_in in entries:
    value = np.asarray(_get(params, path), dtype=np.float32)
    if n_in:
      value = value.reshape(int(np.prod(value.shape[:n_in])), -1).T
    state_dict[key] = np.ascontiguousarray(value.reshape(_hf_shape(value.shape, path, None)))
  return state_dict

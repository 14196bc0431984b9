"""transformers `config.json` ↔ `EncoderConfig`.

Only architectures wyjax can reproduce exactly are accepted; everything else is a clear
error rather than a silently different model.
"""

from wyjax.models.config import MODEL_TYPES, EncoderConfig

# transformers' model class names: <prefix><task model suffix>, e.g. DebertaV2ForTokenClassification.
CLASS_PREFIXES = {"deberta-v2": "DebertaV2", "bert": "Bert", "roberta": "Roberta", "electra": "Electra"}
ARCHITECTURES = {model_type: f"{prefix}ForMaskedLM" for model_type, prefix in CLASS_PREFIXES.items()}
# transformers' per-model defaults where they differ from EncoderConfig's.
_DEFAULTS = {
  "deberta-v2": dict(type_vocab_size=0, layer_norm_eps=1e-7, pad_token_id=0),
  "bert": dict(type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0),
  "roberta": dict(type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=1),
  "electra": dict(type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0, embedding_size=128),
}
_SHARED_FIELDS = (
  "vocab_size",
  "hidden_size",
  "num_hidden_layers",
  "num_attention_heads",
  "intermediate_size",
  "hidden_act",
  "hidden_dropout_prob",
  "attention_probs_dropout_prob",
  "max_position_embeddings",
  "type_vocab_size",
  "layer_norm_eps",
  "pad_token_id",
  "initializer_range",
)
_DEBERTA_FIELDS = (
  "embedding_size",
  "relative_attention",
  "max_relative_positions",
  "position_buckets",
  "pos_att_type",
  "share_att_key",
  "norm_rel_ebd",
  "position_biased_input",
)


# Sizes a config.json must give: transformers' defaults (BERT-base's) belong to no model of wyjax's.
REQUIRED_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


class UnsupportedConfigError(ValueError):
  """A config.json of a model wyjax cannot reproduce exactly."""


def _model_type(hf: dict, source: str) -> str:
  """config.json's model_type, or the one its `architectures` name.

  hfl's first Chinese releases name no model_type (transformers 5 refuses them; transformers 4
  guessed from the folder's name, so chinese-roberta-wwm-ext, a BERT, loaded as a RoBERTa).
  """
  if hf.get("model_type") is not None:
    return hf["model_type"]
  architectures = hf.get("architectures") or []
  named = {
    model_type
    for arch in architectures
    for model_type, prefix in CLASS_PREFIXES.items()
    if arch == f"{prefix}Model" or arch.startswith(f"{prefix}For")
  }
  if len(named) != 1:
    raise UnsupportedConfigError(
      f"{source} names no model_type{f' (architectures {architectures})' if architectures else ''}: add the "
      f"family its weights were saved from, \"model_type\": one of {', '.join(map(repr, MODEL_TYPES))} (hfl's "
      "RoBERTa-wwm-ext models are 'bert')"
    )
  return named.pop()


def from_hf(hf: dict, source: str = "config.json") -> EncoderConfig:
  """The EncoderConfig of a transformers config.json's fields; UnsupportedConfigError names `source`."""
  model_type = _model_type(hf, source)
  if model_type not in MODEL_TYPES:
    raise UnsupportedConfigError(
      f"{source}: model_type {model_type!r} is not supported; wyjax reads {', '.join(MODEL_TYPES)}"
    )
  missing = [k for k in REQUIRED_SIZES if hf.get(k) is None]
  if missing:
    raise UnsupportedConfigError(
      f"{source} gives no {' or '.join(missing)}; a model's config.json gives "
      f"{', '.join(REQUIRED_SIZES)}: use the one saved with its weights"
    )
  fields = {"model_type": model_type, **_DEFAULTS[model_type]}
  fields.update({k: hf[k] for k in _SHARED_FIELDS if hf.get(k) is not None})
  if model_type == "deberta-v2":
    if hf.get("conv_kernel_size", 0) > 0:
      raise UnsupportedConfigError(
        f"{source}: conv_kernel_size={hf['conv_kernel_size']} (the ConvLayer of DeBERTa-v2 "
        "xlarge/xxlarge) is not supported"
      )
    head_size = hf.get("attention_head_size")
    if head_size is not None and head_size * hf["num_attention_heads"] != hf["hidden_size"]:
      raise UnsupportedConfigError(
        f"{source}: attention_head_size={head_size} × num_attention_heads != hidden_size is not supported"
      )
    fields.update({k: hf[k] for k in _DEBERTA_FIELDS if hf.get(k) is not None})
  else:
    position_type = hf.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise UnsupportedConfigError(
        f"{source}: position_embedding_type={position_type!r} is not supported (only 'absolute')"
      )
    fields.update(relative_attention=False, position_biased_input=True)
    if model_type == "electra" and hf.get("embedding_size") is not None:
      fields["embedding_size"] = hf["embedding_size"]
  if fields.get("embedding_size") == fields["hidden_size"]:
    fields["embedding_size"] = None
  try:
    return EncoderConfig(**fields)
  except ValueError as e:
    raise UnsupportedConfigError(f"{source}: {e}") from e


def to_hf(config: EncoderConfig, *, legacy: bool | None = None, task_model: str = "ForMaskedLM") -> dict:
  """A config.json that transformers loads as the task model `task_model` names, every switch written out.

  task_model: the class name's suffix (the MLM model by default). Nothing is left to transformers'
  defaults: DeBERTa's `relative_attention` is False in its code although its docstring says True.
  """
  hf = {
    "model_type": config.model_type,
    "architectures": [CLASS_PREFIXES[config.model_type] + task_model],
    **{k: getattr(config, k) for k in _SHARED_FIELDS},
    "tie_word_embeddings": True,
    "dtype": "float32",
  }
  if config.model_type == "deberta-v2":
    hf.update(
      embedding_size=config.embed_dim,
      relative_attention=config.relative_attention,
      max_relative_positions=config.max_relative_positions,
      position_buckets=config.position_buckets,
      pos_att_type=list(config.pos_att_type),
      share_att_key=config.share_att_key,
      norm_rel_ebd=config.norm_rel_ebd,
      position_biased_input=config.position_biased_input,
      conv_kernel_size=0,
      legacy=default_legacy(config) if legacy is None else legacy,
      pooler_hidden_size=config.hidden_size,
      pooler_dropout=0.0,
      pooler_hidden_act=config.hidden_act,
    )
    if hf["legacy"] is False and config.embed_dim != config.hidden_size:
      raise ValueError(
        "legacy=False needs embedding_size == hidden_size: transformers' "
        "lm_predictions head maps hidden→hidden before the tied decoder"
      )
  else:
    hf["position_embedding_type"] = "absolute"
    if config.model_type == "electra":
      hf["embedding_size"] = config.embed_dim
    elif config.embed_dim != config.hidden_size:
      raise ValueError(f"embedding_size != hidden_size needs model_type 'electra' (a {config.model_type} has none)")
  return hf


def default_legacy(config: EncoderConfig) -> bool:
  """Microsoft's `lm_predictions` head (legacy=False) where it can hold the model.

  transformers' non-legacy head maps hidden→hidden before the tied decoder, so it only
  works when embedding_size == hidden_size; otherwise the legacy head is the only exact one.
  """
  return config.embed_dim != config.hidden_size

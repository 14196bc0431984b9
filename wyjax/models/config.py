"""The one config that describes every encoder wyjax builds.

Field names and defaults follow transformers' `DebertaV2Config` / `BertConfig`, so a
`config.json` maps onto it field by field (see `wyjax.hf.configs`).
"""

import dataclasses
import numbers

from wyjax.core.ranges import BOOLEAN, INT32, POSITIVE, Allowed, integer, number, one_of, or_none, wrong

MODEL_TYPES = ("deberta-v2", "bert", "roberta", "electra")
POS_ATT_TYPES = ("c2p", "p2c")
REMAT_MODES = ("none", "full", "dots")
ATTENTION_IMPLEMENTATIONS = ("auto", "xla", "pallas", "cudnn_dropout")
DTYPES = ("float32", "bfloat16", "float16")  # activations; parameters are always float32
_KINDS = {
  int: (numbers.Integral, "an integer"),
  float: (numbers.Real, "a number"),
  str: (str, "a string"),
  int | None: ((numbers.Integral, type(None)), "an integer or null"),
}
_SIZE, _DROPOUT = integer(1), number(0, 1, below=True)
_ANY_INTEGER = Allowed(integer(-INT32 - 1).accepts, "an integer")
# Each field's range (a config.json, a model.json or a run's --config.model.* may hold anything);
# hidden_act's names are wyjax.models.layers.ACTIVATIONS, checked where the layers are built.
FIELDS = {
  "vocab_size": _SIZE,
  "model_type": one_of(*MODEL_TYPES),
  "hidden_size": _SIZE,
  "num_hidden_layers": _SIZE,
  "num_attention_heads": _SIZE,
  "intermediate_size": _SIZE,
  "hidden_dropout_prob": _DROPOUT,
  "attention_probs_dropout_prob": _DROPOUT,
  "max_position_embeddings": _SIZE,
  "type_vocab_size": integer(0),
  "layer_norm_eps": POSITIVE,
  "pad_token_id": integer(0),
  "initializer_range": number(0),
  "embedding_size": or_none(_SIZE, "hidden_size"),
  "relative_attention": BOOLEAN,
  "max_relative_positions": _ANY_INTEGER,
  "position_buckets": _ANY_INTEGER,
  "share_att_key": BOOLEAN,
  "position_biased_input": BOOLEAN,
  "dtype": one_of(*DTYPES),
  "remat": one_of(*REMAT_MODES),
  "scan_layers": BOOLEAN,
  "scan_unroll": _SIZE,
  "attention": one_of(*ATTENTION_IMPLEMENTATIONS),
}
# Ranges that join fields: (fields, accepts their values, the range as an error states it).
JOINT = (
  (
    ("hidden_size", "num_attention_heads"),
    lambda hidden, heads: hidden % heads == 0,
    "a hidden_size that num_attention_heads divides (each head takes an equal part)",
  ),
)


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """Architecture of a DeBERTa-v2, BERT, RoBERTa or ELECTRA encoder.

  ELECTRA is BERT whose embeddings of `embedding_size` are projected to hidden_size, with no pooler.
  The DeBERTa-only fields (`relative_attention` … `position_biased_input`) are ignored by
  BERT, RoBERTa and ELECTRA, which always add absolute positions.
  """

  vocab_size: int
  model_type: str = "deberta-v2"
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 0
  layer_norm_eps: float = 1e-7
  pad_token_id: int = 0
  initializer_range: float = 0.02
  # Width of the token embeddings; None means hidden_size (no projection: DeBERTa's embed_proj,
  # ELECTRA's embeddings_project).
  embedding_size: int | None = None
  relative_attention: bool = False
  # < 1 means max_position_embeddings.
  max_relative_positions: int = -1
  # <= 0 means raw (unbucketed) relative positions.
  position_buckets: int = -1
  # Any subset of ("c2p", "p2c"); a "p2c|c2p" string is accepted.
  pos_att_type: tuple[str, ...] = ()
  share_att_key: bool = False
  # "none" or "layer_norm" (LayerNorm on the relative embeddings).
  norm_rel_ebd: str = "none"
  position_biased_input: bool = True
  # Activation dtype; parameters are always float32.
  dtype: str = "float32"
  # Per-layer rematerialisation in training: "none", "full" (the backward pass recomputes each
  # layer's forward), "dots" (keeps the outputs of matmuls without batch dimensions). Not part
  # of the architecture: the params are the same in every mode.
  remat: str = "none"
  # Run the layers with nn.scan (one compiled layer, however deep the model): the params of
  # `layer_<i>` are then stacked as `layers` on a leading axis. Not part of the architecture,
  # but of the params' layout: wyjax.models.stack_layers / unstack_layers convert.
  scan_layers: bool = False
  # Scanned layers run per iteration of the scan's loop (nn.scan's unroll); num_hidden_layers or
  # more runs them without a loop, as per-layer modules do, but keeps the params stacked: the
  # optimizer then updates each parameter of all the layers in one kernel (a GPU step launches
  # fewer kernels). Not part of the architecture.
  scan_unroll: int = 1
  # "xla" (einsums, the reference), "pallas" (fused kernels; interpreted on CPU), "auto" (pallas
  # on TPU, xla on CPU; see wyjax.models.attention) or "cudnn_dropout" ("auto", with cuDNN's own
  # attention dropout in training on a GPU; its masks ignore the seed). Not part of the architecture.
  attention: str = "auto"

  def __post_init__(self):
    for field in dataclasses.fields(self):  # a config.json or model.json may hold anything
      value, kind = getattr(self, field.name), _KINDS.get(field.type)
      if kind and not (isinstance(value, kind[0]) and not isinstance(value, bool)):
        raise ValueError(f"{field.name} is {value!r}; it must be {kind[1]}")
    values = {name: getattr(self, name) for name in FIELDS}
    out_of_range = wrong(values, FIELDS) or [
      ", ".join(f"{name} is {values[name]!r}" for name in names) + f"; allowed: {says}"
      for names, accepts, says in JOINT
      if not accepts(*(values[name] for name in names))
    ]
    if out_of_range:
      raise ValueError("; ".join(out_of_range))
    pos_att_type = self.pos_att_type
    if isinstance(pos_att_type, str):
      pos_att_type = [t for t in pos_att_type.lower().split("|") if t.strip()]
    pos_att_type = tuple(t.strip().lower() for t in pos_att_type or ())
    unknown = set(pos_att_type) - set(POS_ATT_TYPES)
    if unknown:
      raise ValueError(f"pos_att_type has unknown entries {sorted(unknown)}; allowed: {POS_ATT_TYPES}")
    object.__setattr__(self, "pos_att_type", pos_att_type)
    norms = {n.strip() for n in self.norm_rel_ebd.lower().split("|")}
    if not norms <= {"none", "layer_norm"}:
      raise ValueError(f"norm_rel_ebd {self.norm_rel_ebd!r} is not supported; use 'none' or 'layer_norm'")

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_attention_heads

  @property
  def embed_dim(self) -> int:
    """Width of the word embeddings (and of the MLM head's output transform)."""
    return self.embedding_size or self.hidden_size

  @property
  def relative_span(self) -> int:
    """S: the relative embedding table has 2S rows (transformers' `pos_ebd_size`)."""
    if self.position_buckets > 0:
      return self.position_buckets
    return self.max_relative_positions if self.max_relative_positions >= 1 else self.max_position_embeddings

  @property
  def max_relative_distance(self) -> int:
    """M: the distance the log buckets are scaled to."""
    if self.max_relative_positions >= 1:
      return self.max_relative_positions
    return self.max_position_embeddings

  @property
  def layer_norm_rel_embeddings(self) -> bool:
    return "layer_norm" in self.norm_rel_ebd.lower()

  @property
  def absolute_positions(self) -> bool:
    """Whether inputs are capped at max_position_embeddings: all but a relative-only DeBERTa."""
    return self.model_type != "deberta-v2" or self.position_biased_input

  @property
  def first_position(self) -> int:
    """The position id of an input's first token: pad_token_id + 1 for RoBERTa, else 0."""
    return self.pad_token_id + 1 if self.model_type == "roberta" else 0

  @property
  def max_tokens(self) -> int:
    """The most tokens an input's absolute positions cover (RoBERTa's 514 positions hold 512 with pad id 1)."""
    return self.max_position_embeddings - self.first_position

  def forward_flops_per_token(self, length: int, predicted_fraction: float = 1.0) -> float:
    """Forward FLOPs per token of the encoder and the MLM head (2 per multiply-add).

    Per layer: Q, K, V and output projections 8H²; feed-forward 4HI; attention scores and the
    weighted sum 4LH, counted in full (an encoder attends to every position, no causal halving);
    DeBERTa's c2p/p2c scores 4SH per term against the 2S relative rows, plus their projections
    of the relative table (2S rows × H² per term, amortised over the length L). Embedding
    projection 2EH; MLM head 2HE + 2EV for the `predicted_fraction` of positions it scores.
    """
    h, i, e, v = self.hidden_size, self.intermediate_size, self.embed_dim, self.vocab_size
    layer = 8 * h * h + 4 * h * i + 4 * length * h
    if self.relative_attention:
      terms = len(self.pos_att_type)
      span = self.relative_span
      layer += terms * (4 * span * h + 2 * 2 * span * h * h / length)
    flops = self.num_hidden_layers * layer + predicted_fraction * (2 * h * e + 2 * e * v)
    if e != h:
      flops += 2 * e * h
    return float(flops)

  def replace(self, **changes) -> "EncoderConfig":
    return dataclasses.replace(self, **changes)

  def without_run_choices(self) -> "EncoderConfig":
    """This config with remat, scan_unroll and attention (how a run executes) at their defaults.

    model.json records this, so that whoever loads the model chooses afresh.
    """
    return self.replace(remat="none", scan_unroll=1, attention="auto")

  def to_dict(self) -> dict:
    d = dataclasses.asdict(self)
    d["pos_att_type"] = list(self.pos_att_type)
    return d

  @classmethod
  def from_dict(cls, d: dict) -> "EncoderConfig":
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - fields
    if unknown:
      raise ValueError(f"unknown EncoderConfig fields: {sorted(unknown)}")
    return cls(**d)

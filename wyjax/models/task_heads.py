"""The fine-tuning heads by kind (a Task's `head`): HEADS.

Each Head says how it is built for a task's labels, how one example's row of a batch's logits is cut back
to the example's own size, and which transformers task model it is (or why there is none), for wyjax.export.
"""

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import numpy as np

from wyjax.models import prefix_lm
from wyjax.models.config import EncoderConfig
from wyjax.models.heads import (
  CosineMatch,
  MaskedLM,
  MultipleChoice,
  SequenceClassifier,
  SpanExtractor,
  SpanPairClassifier,
  TokenClassifier,
)


def _whole(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  """The row of logits as it is: it has no per-token or per-window axis."""
  return logits


def _per_token(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  """[length, …] of an example whose input_ids have `shape` (its own tokens)."""
  return logits[: shape[-1]]


def _per_window(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  """[windows, 2, length]: the example's own windows and tokens."""
  return logits[: shape[0], :, : shape[-1]]


@dataclasses.dataclass(frozen=True)
class Transformers:
  """The transformers task model a head computes exactly.

  Its class (DebertaV2<suffix>, AutoModel<suffix>), the Hub's pipeline_tag for it, and how its outputs
  line up with the head's logits.
  """

  suffix: str  # "ForTokenClassification"
  pipeline_tag: str
  flat_rows: bool = False  # it reads [batch × rows, length] where the head reads [batch, rows, length]
  outputs: tuple[str, ...] = ("logits",)  # its output fields, stacked on axis -2 into the head's logits
  id2label: bool = True  # its outputs are the task's labels (a multiple-choice model scores options)


# The features a linear probe of a frozen encoder fits for a head (wyjax.train.probes): one
# vector per example (the mean of its tokens'), or one per token.
POOLED, PER_TOKEN = "pooled", "per_token"


@dataclasses.dataclass(frozen=True)
class Head:
  """A kind of fine-tuning head: how to build it, trim its logits, and export it."""

  build: Callable[[EncoderConfig, int], nn.Module]  # (encoder config, number of labels) → the model
  trim: Callable[[np.ndarray, tuple[int, ...]], np.ndarray] = _whole  # (row of logits, input_ids shape)
  # (token types, padding mask) → the attention mask, when not the padding mask (the prefix LM's)
  attention_mask: Callable | None = None
  generates: bool = False  # predictions are generated text; the step predicts each position's argmax
  rows: bool = False  # input_ids are [batch, rows, length] (options, windows, sentences), not [batch, length]
  transformers: Transformers | None = None  # the transformers task model that is this head
  no_transformers: str = ""  # else the head's math, which no transformers class computes
  probe: str = ""  # POOLED or PER_TOKEN: the linear probe that stands for it; "": none


HEADS = {
  "sequence": Head(
    lambda config, labels: SequenceClassifier(config, labels),
    transformers=Transformers("ForSequenceClassification", "text-classification"),
    probe=POOLED,
  ),
  "token": Head(
    lambda config, labels: TokenClassifier(config, labels),
    trim=_per_token,
    transformers=Transformers("ForTokenClassification", "token-classification"),
    probe=PER_TOKEN,
  ),
  "choice": Head(
    lambda config, labels: MultipleChoice(config),
    rows=True,
    transformers=Transformers("ForMultipleChoice", "multiple-choice", id2label=False),
  ),
  "binary_choice": Head(
    lambda config, labels: MultipleChoice(config, labels_per_choice=2),
    rows=True,
    no_transformers="two logits, match or no match, for each option",
  ),
  "span_pair": Head(
    lambda config, labels: SpanPairClassifier(config, labels),
    rows=True,
    no_transformers="mean vectors of the target word in two sentences, [u; v; |u−v|] → dense",
  ),
  "match": Head(
    lambda config, labels: CosineMatch(config, two_encoders=True),
    rows=True,
    no_transformers="cosine of mean vectors, the query's and each candidate's, from two encoders",
  ),
  "match_shared": Head(
    lambda config, labels: CosineMatch(config, two_encoders=False),
    rows=True,
    no_transformers="cosine of mean vectors, the query's and each candidate's",
  ),
  "span": Head(
    lambda config, labels: SpanExtractor(config),
    trim=_per_window,
    rows=True,
    transformers=Transformers(
      "ForQuestionAnswering",
      "question-answering",
      flat_rows=True,
      outputs=("start_logits", "end_logits"),
      id2label=False,
    ),
  ),
  # transformers' MLM model without wyjax's prefix-LM attention mask: wyjax.translate generates with it.
  "prefix_lm": Head(
    lambda config, labels: MaskedLM(config),
    trim=_per_token,
    attention_mask=prefix_lm.attention_mask,
    generates=True,
    transformers=Transformers("ForMaskedLM", "translation", id2label=False),
  ),
}

"""The fine-tuning heads by kind (a Task's `head`): how each is built for a task's labels, and
how one example's row of a batch's logits is cut back to the example's own size."""
import dataclasses
from collections.abc import Callable

import flax.linen as nn
import numpy as np

from wyjax.models import prefix_lm
from wyjax.models.config import EncoderConfig
from wyjax.models.heads import (CosineMatch, MaskedLM, MultipleChoice, SequenceClassifier, SpanExtractor,
                                SpanPairClassifier, TokenClassifier)


def _whole(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  return logits


def _per_token(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  """[length, …] of an example whose input_ids have `shape` (its own tokens)."""
  return logits[:shape[-1]]


def _per_window(logits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  """[windows, 2, length]: the example's own windows and tokens."""
  return logits[:shape[0], :, :shape[-1]]


@dataclasses.dataclass(frozen=True)
class Head:
  build: Callable[[EncoderConfig, int], nn.Module]  # (encoder config, number of labels) → the model
  trim: Callable[[np.ndarray, tuple[int, ...]], np.ndarray] = _whole  # (row of logits, input_ids shape)
  # (token types, padding mask) → the attention mask, when not the padding mask (the prefix LM's)
  attention_mask: Callable | None = None
  generates: bool = False  # predictions are generated text; the step predicts each position's argmax


HEADS = {
    "sequence": Head(lambda config, labels: SequenceClassifier(config, labels)),
    "token": Head(lambda config, labels: TokenClassifier(config, labels), trim=_per_token),
    "choice": Head(lambda config, labels: MultipleChoice(config)),
    "binary_choice": Head(lambda config, labels: MultipleChoice(config, labels_per_choice=2)),
    "span_pair": Head(lambda config, labels: SpanPairClassifier(config, labels)),
    "match": Head(lambda config, labels: CosineMatch(config, two_encoders=True)),
    "match_shared": Head(lambda config, labels: CosineMatch(config, two_encoders=False)),
    "span": Head(lambda config, labels: SpanExtractor(config), trim=_per_window),
    "prefix_lm": Head(lambda config, labels: MaskedLM(config), trim=_per_token,
                      attention_mask=prefix_lm.attention_mask, generates=True),
}

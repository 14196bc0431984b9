"""Flax encoders (DeBERTa-v2, BERT, RoBERTa, ELECTRA) and their heads."""

from wyjax.models.bert import Bert
from wyjax.models.config import EncoderConfig
from wyjax.models.deberta_v2 import DebertaV2
from wyjax.models.heads import (
  CosineMatch,
  DiscriminatorHead,
  MaskedLM,
  MlmHead,
  MultipleChoice,
  Pooler,
  ReplacedTokenDetector,
  SequenceClassifier,
  SpanExtractor,
  SpanPairClassifier,
  TokenClassifier,
  encoder_class,
)
from wyjax.models.layers import stack_layers, unstack_layers

__all__ = [
  "Bert",
  "CosineMatch",
  "DebertaV2",
  "DiscriminatorHead",
  "EncoderConfig",
  "MaskedLM",
  "MlmHead",
  "MultipleChoice",
  "Pooler",
  "ReplacedTokenDetector",
  "SequenceClassifier",
  "SpanExtractor",
  "SpanPairClassifier",
  "TokenClassifier",
  "encoder_class",
  "stack_layers",
  "unstack_layers",
]

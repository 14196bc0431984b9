"""DeBERTa's pretraining step as XLA builds it for an H100, compiled on this CPU
(aot.devices("h100"), wyjax.core.gpu_program): without attention dropout, "auto" trains its
attention through cuDNN's flash attention, the relative terms (by distance and skew) its bias.

One tiny layer, bf16, batch 2 × 128: every layer is the same program, and what is asserted (the
custom calls, the dtypes of [batch, heads, L, L] buffers) does not depend on the width.
"""
import jax
import jax.numpy as jnp

from wyjax.core import aot, config_files, gpu_program
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import pretraining

LENGTH = 128


def test_deberta_trains_through_cudnn_on_an_h100_without_float32_scores():
  """configs/pretrain/deberta_tiny.py's step with attention dropout 0: cuDNN's attention with a
  bias, forward (twice: the backward pass recomputes the bias and runs it again) and backward
  (its gradient is the bias's), and no float32 [batch, heads, L, L] buffer (the XLA path's
  scores and probabilities). The relative terms' products by distance are written
  distance-minor, [heads, batch × L, 2L - 1], so that the skew reads them along rows (written
  distance-major, they made the bias's fusion a quarter of DeBERTa-base's step on an H200)."""
  config = config_files.load("pretrain/deberta_tiny.py")
  config.model.update(num_hidden_layers=1, attention_probs_dropout_prob=0.0)
  config.batch_size, config.dtype = 2, "bfloat16"
  run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), LENGTH, aot.devices("h100"))
  batch = jax.ShapeDtypeStruct((2, LENGTH), jnp.int32, sharding=run.program.data_sharding)
  _, program, _ = gpu_program.compile(run.train_step.lower(run.program.abstract_state, batch))
  assert program.custom_calls["__cudnn$fmhaScaleBiasSoftmax"] == 2, program.custom_calls
  assert program.custom_calls["__cudnn$fmhaScaleBiasSoftmaxBackward"] == 1, program.custom_calls
  assert not program.buffers_of("f32", 4, LENGTH)
  assert program.buffers_of("bf16", 4, LENGTH)  # the bias and its gradient
  distance = 2 * LENGTH - 1
  products = {b.shape for b in program.buffers if b.dtype == "bf16" and len(b.shape) == 3 and distance in b.shape}
  assert products == {(config.model.num_attention_heads, 2 * LENGTH, distance)}, products

"""DeBERTa's pretraining step as XLA builds it for H100s, compiled on this CPU
(targets.devices("h100"), wyjax.aot.gpu_program): without attention dropout, "auto" trains its
attention through cuDNN's flash attention, the relative terms (by distance and skew) its bias.

Six narrow layers (width 256), bf16, 8 × 512 per GPU: what is asserted (the custom calls, the
dtypes and layouts of the big buffers, what several GPUs hold against one) does not depend on
the width, and the products by distance are as long as DeBERTa-base's.
"""

import jax
import jax.numpy as jnp
import pytest

from wyjax.aot import gpu_program, targets
from wyjax.core import config_files
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import pretraining

LAYERS, LENGTH, PER_GPU = 6, 512, 8


def _lowered(topology: str, gpus: int):
  config = config_files.load("pretrain/deberta_tiny.py")
  config.model.update(
    num_hidden_layers=LAYERS,
    hidden_size=256,
    intermediate_size=1024,
    max_position_embeddings=LENGTH,
    attention_probs_dropout_prob=0.0,
  )
  config.batch_size, config.dtype = PER_GPU * gpus, "bfloat16"
  run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), LENGTH, targets.devices(topology))
  batch = jax.ShapeDtypeStruct((config.batch_size, LENGTH), jnp.int32, sharding=run.program.data_sharding)
  return config, run.train_step.lower(run.program.abstract_state, batch)


@pytest.fixture(scope="module")
def one_gpu():
  config, lowered = _lowered("h100", 1)
  compiled, program, _ = gpu_program.compile(lowered)
  return config, compiled, program


def test_deberta_trains_through_cudnn_on_an_h100_without_float32_scores(one_gpu):
  """configs/pretrain/deberta_tiny.py's step with attention dropout 0: cuDNN's attention with a
  bias, forward (twice: the backward pass recomputes the bias and runs it again) and backward
  (its gradient is the bias's), and no float32 [batch, heads, L, L] buffer (the XLA path's
  scores and probabilities). The relative terms' products by distance are written
  distance-minor, [heads, batch × L, 2L - 1], so that the skew reads them along rows (written
  distance-major, they made the bias's fusion a quarter of DeBERTa-base's step on an H200)."""
  config, _, program = one_gpu
  assert program.custom_calls["__cudnn$fmhaScaleBiasSoftmax"] == 2 * LAYERS, program.custom_calls
  assert program.custom_calls["__cudnn$fmhaScaleBiasSoftmaxBackward"] == LAYERS, program.custom_calls
  assert not program.buffers_of("f32", 4, LENGTH)
  assert program.buffers_of("bf16", 4, LENGTH)  # the bias and its gradient
  distance, tokens = 2 * LENGTH - 1, PER_GPU * LENGTH
  products = {
    b.shape
    for b in program.buffers
    if b.dtype == "bf16" and len(b.shape) == 3 and distance in b.shape and tokens in b.shape
  }
  assert products == {(config.model.num_attention_heads, tokens, distance)}, products


def test_eight_gpus_hold_what_one_does(one_gpu):
  """The same step for eight H100s (data 8, 8 × 512 each) holds no more than 1.3 times one GPU's
  temporaries. XLA's latency-hiding scheduler, overlapping the gradients' all-reduces with the
  backward pass, deferred each layer's relative rows' gradient to the end of the step and kept
  its products' gradients alive until then: 1.8 times here; DeBERTa-base on eight H100s held
  17.8 GiB against one GPU's 7.0, and 256 × 512 per GPU (47 GiB on one) did not fit in 80."""
  _, one, _ = one_gpu
  _, lowered = _lowered("h100:8", 8)
  eight_gpus, _, _ = gpu_program.compile(lowered, estimates=False)  # as one_gpu's: no autotuning without a GPU
  eight = eight_gpus.memory_analysis().temp_size_in_bytes
  assert eight <= 1.3 * one.memory_analysis().temp_size_in_bytes, (eight, one.memory_analysis().temp_size_in_bytes)

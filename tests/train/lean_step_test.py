"""Base-size BERT and DeBERTa pretraining steps as XLA builds them for an H100, compiled on this
CPU (aot.devices("h100"), wyjax.core.gpu_program): kernels per step, BERT's attention through
cuDNN forward and backward, its buffers at 32 × 512.

A 12-layer step takes minutes to compile on 2 cores. Every layer is the same program, so each
model is compiled at base width with 1 and 2 layers (batch 32 × 512 compiles no slower than a
small batch) and its 12-layer figures are extrapolated affinely: f(12) = f(1) + 11 (f(2) − f(1)).
The 12-layer steps compiled whole, once, are in docs/benchmarks.md ("#48").
"""
import functools

import jax
import jax.numpy as jnp
import pytest

from wyjax.core import aot, config_files, gpu_program
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import pretraining

GiB = 2**30
LENGTH = 512


@functools.cache
def _compiled(model: str, layers: int):
  """(GpuProgram, bytes of the step's buffers) of configs/pretrain/<model>_base.py's train step with
  `layers` layers, batch 32 × 512, compiled for one H100."""
  config = config_files.load(f"pretrain/{model}_base.py")
  config.model.num_hidden_layers = layers
  config.batch_size = 32
  run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), LENGTH, aot.devices("h100"))
  batch = jax.ShapeDtypeStruct((32, LENGTH), jnp.int32, sharding=run.program.data_sharding)
  compiled, program, _ = gpu_program.compile(run.train_step.lower(run.program.abstract_state, batch))
  memory = compiled.memory_analysis()
  held = (memory.argument_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes
          + memory.temp_size_in_bytes)
  return program, held


def _at_12_layers(model: str, figure) -> float:
  one, two = (figure(*_compiled(model, layers)) for layers in (1, 2))
  return one + 11 * (two - one)


@pytest.mark.parametrize("model, most_kernels", [
    # Measured 2026-11-26 (jax 0.12.0.1): BERT 200 + 11 × 90 = 1,190 (compiled whole: 1,184),
    # DeBERTa 265 + 11 × 141 = 1,816; before #48, 2,411 and 2,711 (issue #48's targets: 1,000
    # and 1,200, not met).
    ("bert", 1_200), ("deberta", 1_830)])
def test_kernels_per_step_at_12_layers(model, most_kernels):
  """The update adds no reduction per parameter: the gradients' norm (clip, guard, metric) is
  reduced over a few stacks of like leaves, so a layer adds its forward, its backward and its 16
  parameters' updates (one fused kernel each, the guard's select in it)."""
  kernels = _at_12_layers(model, lambda program, _: program.kernel_count)
  assert kernels <= most_kernels, (kernels, [dict(_compiled(model, n)[0].kernels) for n in (1, 2)])
  one, two = (_compiled(model, n)[0].kernels["reduction"] for n in (1, 2))
  # A layer's own (LayerNorms, bias gradients in two passes each): 22 for BERT, 27 for DeBERTa;
  # 94 for both before, when each of its 16 parameters added four to six.
  assert two - one <= 30, (one, two)


def test_bert_trains_through_cudnn_within_11_gib():
  """configs/pretrain/bert_base.py's step: cuDNN's flash attention forward and backward in
  every layer, no float32 [batch, heads, L, L] buffer, and at most 11 GiB of buffers at 12
  layers (transformers with SDPA: 11.0 GiB measured on an H200)."""
  for layers in (1, 2):
    program, _ = _compiled("bert", layers)
    assert program.custom_calls["__cudnn$fmhaSoftmax"] == layers, program.custom_calls
    assert program.custom_calls["__cudnn$fmhaSoftmaxBackward"] == layers, program.custom_calls
    assert not program.buffers_of("f32", 4, LENGTH)
  held = _at_12_layers("bert", lambda _, held: held)
  assert held <= 11 * GiB, held / GiB

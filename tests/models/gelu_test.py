"""The exact GELU (layers.gelu): transformers' x Φ(x), erf on accelerators, erfc on the CPU."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import layers


def test_gelu_and_its_gradient_are_the_exact_erf_form():
  x = np.linspace(-6, 6, 2001, dtype=np.float32)
  cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
  density = np.exp(-0.5 * x.astype(np.float64) ** 2) / math.sqrt(2 * math.pi)
  np.testing.assert_allclose(layers.gelu(x), x * cdf, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(jax.grad(lambda v: layers.gelu(v).sum())(x), cdf + x * density, rtol=1e-5, atol=1e-6)
  assert layers.gelu(jnp.ones(3, jnp.bfloat16)).dtype == jnp.bfloat16


def test_the_gpu_program_takes_erf_and_the_cpu_program_erfc():
  """erfc expands to ~100 operations per element on a GPU; erf in XLA:CPU's fusions doubled
  WYWMT's evaluation buffers (tests/train/config_memory_test.py pins those)."""
  traced = jax.jit(jax.grad(lambda v: layers.gelu(v).sum())).trace(jnp.ones(8))
  gpu = traced.lower(lowering_platforms=("cuda",)).as_text()
  cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
  assert "chlo.erf " in gpu and "erfc" not in gpu, gpu
  assert "chlo.erfc" in cpu and "chlo.erf " not in cpu, cpu

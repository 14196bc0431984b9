"""JAX's persistent compilation cache, which every command turns on at its start."""

import os

import jax

from wyjax.core.storage import cache_dir


def use_compilation_cache(compile_only: str | None = None) -> None:
  """Keeps compiled programs under <wyjax cache>/xla, unless JAX_COMPILATION_CACHE_DIR names a cache.

  A rerun of the same step loads it instead of compiling, small programs too. On a GPU, XLA's
  autotuning results are kept beside it, fusion by fusion (xla/xla_gpu_per_fusion_autotune_cache_dir),
  unless XLA_FLAGS names --xla_gpu_per_fusion_autotune_cache_dir. Off when compiling for other
  hardware (compile_only other than None and "local"): a compile-only client cannot load an
  executable back.
  """
  if compile_only not in (None, "local"):
    jax.config.update("jax_enable_compilation_cache", False)
  else:
    # JAX keeps only programs over a second by default; a warm TLC fine-tuning run recompiled 118 smaller ones.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if not jax.config.jax_compilation_cache_dir:
      jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "xla"))
    if "--xla_gpu_per_fusion_autotune_cache_dir" in os.environ.get("XLA_FLAGS", ""):
      # jax (jax_persistent_cache_enable_xla_caches' default) would override the folder XLA_FLAGS names.
      jax.config.update("jax_persistent_cache_enable_xla_caches", None)

"""Hugging Face interop: config and weight conversion, loading, export and Hub upload."""

from wyjax.hf.loading import Model, init_params, load

__all__ = ["Model", "init_params", "load"]

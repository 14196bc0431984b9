"""wyjax: JAX/Flax language models for classical Chinese (文言文)."""
__version__ = "0.1.0"

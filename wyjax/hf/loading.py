"""Reads a transformers folder or a wyjax checkpoint: one code path for every reader.

- `read`: its config, params (host numpy, per layer or stacked) and tokenizer, checked; no model built.
- `load`: the same as a Model, its params on the device, for inference and export.
"""

import logging
import pickle
import re
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from wyjax.core import checkpoints, guards, storage
from wyjax.data.tokenizer import Tokenizer
from wyjax.hf import configs, weights
from wyjax.models import (
  DiscriminatorHead,
  EncoderConfig,
  MaskedLM,
  Pooler,
  ReplacedTokenDetector,
  encoder_class,
  rtd_pair,
  stack_layers,
  unstack_layers,
)

log = logging.getLogger(__name__)

# config.json's record of the vocabulary's SHA-256 in order (storage.lines_sha256), written by
# wyjax's exports: a vocab.txt of the right size in another order reads every text wrongly.
VOCAB_KEY = "wyjax_vocab_sha256"


def init_params(
  config: EncoderConfig, rng: jax.Array, *, mlm: bool = True, pooler: bool = False, rtd: bool = False
) -> dict:
  """Randomly initialised params (unboxed), {'encoder': ...[, 'mlm_head': ...][, 'pooler': ...][, 'rtd_head': ...]}.

  rtd: ELECTRA's discriminator head (wyjax.models.DiscriminatorHead).
  """
  ids = jnp.zeros((1, 8), jnp.int32)
  encoder_rng, pooler_rng = jax.random.split(rng)
  if mlm:
    params = nn.unbox(MaskedLM(config).init(encoder_rng, ids)["params"])
  else:
    params = {"encoder": nn.unbox(encoder_class(config)(config).init(encoder_rng, ids)["params"])}
  hidden = jnp.zeros((1, 8, config.hidden_size), jnp.float32)
  if pooler:
    params["pooler"] = nn.unbox(Pooler(config).init(pooler_rng, hidden)["params"])
  if rtd:
    params["rtd_head"] = nn.unbox(DiscriminatorHead(config).init(jax.random.fold_in(pooler_rng, 1), hidden)["params"])
  return params


def param_shapes(config: EncoderConfig, *, mlm: bool, pooler: bool = False, rtd: bool = False) -> dict:
  """The shape of each of init_params' params, traced (no program built, nothing on a device)."""
  shapes = jax.eval_shape(lambda: init_params(config, jax.random.key(0), mlm=mlm, pooler=pooler, rtd=rtd))
  return jax.tree_util.tree_map(lambda s: s.shape, shapes)


def per_layer(params: dict) -> dict:
  """Params of a scan_layers model with each encoder's layers unstacked."""
  return _each_encoder(unstack_layers, params)


def _each_encoder(convert, params: dict) -> dict:
  """Params with `convert` applied to each encoder's params.

  A multiple-choice model keeps its encoder under 'scorer'; CCPM Match has a 'candidate_encoder' too.
  """
  return {
    k: convert(v) if k.endswith("encoder") else _each_encoder(convert, v) if k == "scorer" else v
    for k, v in params.items()
  }


class Model:
  """An encoder (and MLM or discriminator head, when the checkpoint has one) with numpy in, numpy out.

  Its params are per layer, as transformers' are, whatever layout the checkpoint was trained in.
  """

  def __init__(self, config: EncoderConfig, params: dict, tokenizer: Tokenizer | None = None):
    if config.scan_layers:
      config, params = config.replace(scan_layers=False), per_layer(params)
    self.config = config
    self.params = jax.device_put(params)  # on the device as they are: jnp.asarray compiles a program per shape
    self.tokenizer = tokenizer
    encoder = encoder_class(config)(config)
    self._encode = jax.jit(lambda p, ids, mask, types: encoder.apply({"params": p}, ids, mask, types))
    self._mlm = jax.jit(lambda p, ids, mask, types: MaskedLM(config).apply({"params": p}, ids, mask, types))
    self._rtd = jax.jit(
      lambda p, ids, mask, types: ReplacedTokenDetector(config).apply({"params": p}, ids, mask, types)
    )

  @property
  def has_mlm(self) -> bool:
    return "mlm_head" in self.params

  @property
  def has_rtd(self) -> bool:
    """Whether it has ELECTRA's discriminator head ('rtd_head')."""
    return "rtd_head" in self.params

  @staticmethod
  def _inputs(input_ids, attention_mask, token_type_ids):
    input_ids = np.asarray(input_ids, dtype=np.int32)
    mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask, np.int32)
    types = np.zeros_like(input_ids) if token_type_ids is None else np.asarray(token_type_ids, np.int32)
    return input_ids, mask, types

  def encode(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
    """Last hidden state [batch, length, hidden]."""
    inputs = self._inputs(input_ids, attention_mask, token_type_ids)
    return np.asarray(self._encode(self.params["encoder"], *inputs))

  def pooled(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
    """BERT's pooler output [batch, hidden] (first token → dense → tanh), when loaded."""
    if "pooler" not in self.params:
      raise ValueError("this checkpoint has no pooler")
    hidden = self._encode(self.params["encoder"], *self._inputs(input_ids, attention_mask, token_type_ids))
    return np.asarray(Pooler(self.config).apply({"params": self.params["pooler"]}, hidden))

  def mlm_logits(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
    """MLM logits [batch, length, vocab]."""
    if not self.has_mlm:
      raise ValueError("this checkpoint has no MLM head")
    return np.asarray(self._mlm(self.params, *self._inputs(input_ids, attention_mask, token_type_ids)))

  def rtd_logits(self, input_ids, attention_mask=None, token_type_ids=None) -> np.ndarray:
    """The discriminator's logits [batch, length] that each token was replaced."""
    if not self.has_rtd:
      raise ValueError("this checkpoint has no discriminator head")
    params = {"encoder": self.params["encoder"], "rtd_head": self.params["rtd_head"]}
    return np.asarray(self._rtd(params, *self._inputs(input_ids, attention_mask, token_type_ids)))


class PartsError(ValueError):
  """A model folder's files that were not made together (its config, weights, tokenizer)."""


def embedding_shapes(state_dict: dict, config: EncoderConfig) -> dict[str, tuple[int, ...]]:
  """{"word_embeddings"|"position_embeddings": the wyjax-layout shape} of a transformers state dict."""
  prefix = weights.encoder_prefix(config, state_dict)
  return {
    name: state_dict[key].shape
    for name in ("word_embeddings", "position_embeddings")
    if (key := f"{prefix}embeddings.{name}.weight") in state_dict
  }


def param_embedding_shapes(params: dict) -> dict[str, tuple[int, ...]]:
  """embedding_shapes of wyjax params (a multiple-choice model's encoder is under 'scorer')."""
  embeddings = params.get("scorer", params)["encoder"]["embeddings"]
  return {
    name: embeddings[name]["embedding"].shape
    for name in ("word_embeddings", "position_embeddings")
    if name in embeddings
  }


def check_parts(
  config: EncoderConfig,
  config_file,
  embeddings: dict,
  weights_file,
  tokenizer: Tokenizer | None = None,
  vocab_file=None,
  vocab_sha256: str | None = None,
) -> None:
  """Refuses a config, weights and tokenizer that do not belong together, naming two of their files.

  Raises PartsError when the embeddings' shapes are not the config's, the tokenizer's size is not
  its vocab_size, or its tokens in order are not those `vocab_sha256` (config_file's record) names.
  """
  width = "embedding_size" if config.embedding_size else "hidden_size"
  expected = {
    "word_embeddings": (
      (config.vocab_size, config.embed_dim),
      f"vocab_size {config.vocab_size}, {width} {config.embed_dim}",
    ),
    "position_embeddings": (
      (config.max_position_embeddings, config.embed_dim),
      f"max_position_embeddings {config.max_position_embeddings}, {width} {config.embed_dim}",
    ),
  }
  for name, shape in embeddings.items():
    if tuple(shape) != expected[name][0]:
      raise PartsError(
        f"{config_file} says {expected[name][1]} but {weights_file} holds {name} of "
        f"{shape[0]} × {shape[1]}: the config is not these weights'; use the "
        f"{epath.Path(config_file).name} they were saved with"
      )
  if tokenizer is not None and len(tokenizer) != config.vocab_size:
    raise PartsError(
      f"{vocab_file} has {len(tokenizer)} tokens but {config_file} says vocab_size "
      f"{config.vocab_size} (the weights' embedding rows): the tokenizer is not this model's; use "
      "the vocab.txt it was trained with"
    )
  if tokenizer is not None and vocab_sha256 and (found := storage.lines_sha256(tokenizer.vocab)) != vocab_sha256:
    raise PartsError(
      f"{vocab_file} is not the vocabulary {config_file} records (its {len(tokenizer)} tokens are "
      f"others, or in another order: SHA-256 {found[:12]}, recorded {vocab_sha256[:12]}), and each "
      "token would stand for another character; use the vocab.txt the model was saved with"
    )


def read_state_dict(folder: epath.Path) -> tuple[dict[str, np.ndarray], str]:
  """A folder's model.safetensors, else pytorch_model.bin (needs torch), as float32 numpy arrays, and its path.

  Each file is read whole (the folder may be in a bucket). Raises WeightsError, naming the file, for one cut
  short, damaged, or holding anything but tensors.
  """
  safetensors_file = folder / "model.safetensors"
  if safetensors_file.exists():
    return _read_safetensors(safetensors_file), str(safetensors_file)
  torch_file = folder / "pytorch_model.bin"
  if not torch_file.exists():
    raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin")
  return _read_pytorch(torch_file), str(torch_file)


def _torch(file: epath.Path):
  """The torch module, which reading `file` needs; raises ImportError naming it without."""
  try:
    import torch
  except ImportError as e:
    raise ImportError(f"reading {file} needs PyTorch (pip install torch==2.13.0)") from e
  return torch


def _read_safetensors(file: epath.Path) -> dict[str, np.ndarray]:
  """model.safetensors' tensors as numpy; bfloat16 ones (no numpy dtype) widened to float32 through torch."""
  from safetensors import SafetensorError
  from safetensors.numpy import load

  data = file.read_bytes()
  try:
    return load(data)
  except (TypeError, KeyError):  # bfloat16 tensors have no numpy dtype: go through torch.
    _torch(file)
    from safetensors.torch import load as torch_load

    return {k: v.float().numpy() for k, v in torch_load(data).items()}
  except SafetensorError as e:  # truncated or overwritten
    raise weights.WeightsError(f"{file}: not a readable safetensors file ({e}); export or download it again") from None


def _read_pytorch(file: epath.Path) -> dict[str, np.ndarray]:
  """pytorch_model.bin's state dict, unpickled with weights_only=True: no code in it runs, nothing but tensors loads."""
  torch = _torch(file)
  replace = "save the model's state_dict() or model.safetensors in its place, or download it again"
  with file.open("rb") as f:  # a file that cannot be opened is an OSError naming it
    try:
      state_dict = torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # weights_only's refusal; its advice to turn it off is dropped
      if found := re.search(r"Unsupported global: GLOBAL (\S+)", str(e)):
        raise weights.WeightsError(
          f"{file}: holds a pickled {found[1]}, not only tensors, and wyjax runs no code from a file; {replace}"
        ) from None
      raise weights.WeightsError(
        f"{file}: not a PyTorch checkpoint (damaged, or another kind of file); export or download it again"
      ) from None
    except Exception as e:  # torch's parser on damaged bytes: RuntimeError, EOFError, OSError, KeyError, …
      first = str(e).split(". ")[0].strip()
      raise weights.WeightsError(
        f"{file}: not a readable PyTorch checkpoint, cut short or damaged "
        f"({type(e).__name__}{': ' if first else ''}{first}); export or download it again"
      ) from None
  if not isinstance(state_dict, dict):
    raise weights.WeightsError(
      f"{file}: holds no state dict of tensors (its content is of type {type(state_dict).__name__}); {replace}"
    )
  for key, value in state_dict.items():
    if not isinstance(value, torch.Tensor):
      raise weights.WeightsError(
        f"{file}: holds no state dict of tensors ({key!r} is of type {type(value).__name__}); {replace}"
      )
  return {k: v.float().numpy() for k, v in state_dict.items()}


def files(path) -> list[epath.Path]:
  """The files `read` reads from `path`: a transformers folder's config, weights and tokenizer, or a workdir's.

  A wyjax workdir's are checkpoints.model_files.
  """
  path = epath.Path(path)
  if not (path / "config.json").exists():
    return checkpoints.model_files(path)
  weights_file = "model.safetensors" if (path / "model.safetensors").exists() else "pytorch_model.bin"
  names = ("config.json", weights_file, "vocab.txt", "tokenizer_config.json")
  return [path / name for name in names if (path / name).exists()]


def architecture(path) -> EncoderConfig:
  """The encoder config of the model `read` reads from `path`, read without its weights."""
  path = epath.Path(path)
  if (path / "config.json").exists():
    return configs.from_hf(storage.read_json(path / "config.json"), source=str(path / "config.json"))
  encoder, _ = checkpoints.read_model_info(path)
  return EncoderConfig.from_dict(encoder)


class Checkpoint(NamedTuple):
  """A model read to the host: its encoder config, params (numpy) and tokenizer (None without a vocab.txt)."""

  config: EncoderConfig
  params: dict
  tokenizer: Tokenizer | None


def read(path, *, scan_layers: bool = False, generator: bool = False) -> Checkpoint:
  """A transformers folder (deberta-v2, bert, roberta, electra) or wyjax checkpoint read to wyjax's layout and checked.

  Host numpy only: no model is built and nothing goes to a device.

  Args:
    path: a transformers folder (config.json beside model.safetensors or pytorch_model.bin), or a
      wyjax workdir, its checkpoints folder or one step's folder (model.json).
    scan_layers: each encoder's layers stacked (the scan_layers layout), else per layer, as
      transformers' are; the returned config says which.
    generator: a replaced-token detection run's generator (a MaskedLM) rather than its discriminator.

  Raises:
    weights.WeightsError: a tensor missing, misshapen, or holding NaN or Inf.
    PartsError: a config, weights and tokenizer that were not saved together.
    guards.RunError: a generator asked of what is no replaced-token detection run.
  """
  path = epath.Path(path)
  hf = (path / "config.json").exists()
  if generator and hf:
    raise guards.RunError(f"{path}: a transformers folder holds no generator; give the wyjax run that trained it")
  config, params, tokenizer = _read_hf(path) if hf else _read_workdir(path, generator)
  if config.scan_layers != scan_layers:
    convert = stack_layers if scan_layers else unstack_layers
    config, params = config.replace(scan_layers=scan_layers), _each_encoder(convert, params)
  return Checkpoint(config, params, tokenizer)


def load(path, *, generator: bool = False) -> Model:
  """The model `read` reads from `path`, its params per layer on the device."""
  return Model(*read(path, generator=generator))


def _read_hf(folder: epath.Path) -> Checkpoint:
  config_file = folder / "config.json"
  hf = storage.read_json(config_file)
  config = configs.from_hf(hf, source=str(config_file))
  state_dict, source = read_state_dict(folder)
  tokenizer = Tokenizer.load(folder) if (folder / "vocab.txt").exists() else None
  check_parts(
    config,
    config_file,
    embedding_shapes(state_dict, config),
    source,
    tokenizer,
    folder / "vocab.txt",
    hf.get(VOCAB_KEY),
  )
  has_mlm = weights.detect_mlm_layout(state_dict) is not None
  shapes = param_shapes(
    config, mlm=has_mlm, pooler=weights.has_pooler(config, state_dict), rtd=weights.RTD_KEY in state_dict
  )
  params, unused = weights.from_hf(state_dict, config, shapes, source=source)
  if unused:
    log.warning("%s: %d tensors not used by wyjax: %s", source, len(unused), ", ".join(unused[:10]))
  weights.check_finite(params, folder)
  return Checkpoint(config, params, tokenizer)


def _read_workdir(path: epath.Path, generator: bool = False) -> Checkpoint:
  config, params = checkpoints.restore_model(path)
  weights.check_finite(params, path)
  config = EncoderConfig.from_dict(config)
  if generator and "generator" not in params:
    raise guards.RunError(f"{path}: holds no generator: not a replaced-token detection run (--config.objective=rtd)")
  if generator:
    config, params = rtd_pair.generator_of(params, config)
  elif "discriminator" in params:  # replaced-token detection's pair: the model is its discriminator
    params = rtd_pair.merged_discriminator(params, rtd_pair.sharing_of(params))
  tokenizer_dir = checkpoints.tokenizer_dir(path)  # <workdir>/tokenizer, beside model.json
  tokenizer = Tokenizer.load(tokenizer_dir) if (tokenizer_dir / "vocab.txt").exists() else None
  check_parts(
    config,
    tokenizer_dir.parent / "model.json",
    param_embedding_shapes(params),
    tokenizer_dir.parent / "checkpoints",
    tokenizer,
    tokenizer_dir / "vocab.txt",
    checkpoints.vocab_sha256(path),
  )
  return Checkpoint(config, params, tokenizer)

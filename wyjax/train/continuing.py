"""Pretraining continued from a checkpoint (config.init), as GuwenBERT was from RoBERTa-wwm-ext.

- The checkpoint (a transformers folder of a BERT, RoBERTa or DeBERTa-v2 encoder, a wyjax
  pretraining workdir or export, or a Hub id) decides the architecture.
- The prepared corpus decides the vocabulary: the checkpoint's own, an extension of it, or the
  corpus's own, into which each row is carried from the checkpoint's row for the same token or its
  OpenCC counterpart (wyjax.data.vocab_map). Rows with no source start from the checkpoint's
  embedding statistics.
- `config.freeze_encoder_steps` trains the embeddings and the MLM head alone first (`trains_first`).
"""

import logging

import jax
import numpy as np
from etils import epath

from wyjax.core import guards, run_config, storage
from wyjax.data import vocab_map
from wyjax.hf import loading
from wyjax.models import EncoderConfig

# Model fields a run may set over the checkpoint's: how it trains, not what the weights mean.
TRAINING_CHOICES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def local_init(init: str) -> str:
  """config.init as a local path (a Hub id is downloaded: wyjax.hf.hub.fetch); one naming nothing is refused."""
  if storage.hub_id(init):
    from wyjax.hf import hub  # huggingface_hub's HTTP stack only for a Hub id: a GPU image may lack it

    init = hub.fetch(init)
  if not epath.Path(init).exists():
    raise guards.RunError(
      f"--config.init {init}: no such folder (a transformers folder, a wyjax workdir or export, or a Hub id ORG/NAME)"
    )
  return init


def architecture(init: str, config, typed=()) -> dict:
  """The checkpoint's encoder fields, with the TRAINING_CHOICES typed on the command line.

  typed: the keys of the --config.* overrides (config_files.typed). Any other --config.model.*
  typed that differs from the checkpoint's is refused, naming both: the weights are of that
  architecture. The config file's model is not read.
  """
  checkpoint = loading.architecture(init)
  fields = [key.removeprefix("model.") for key in typed if key.startswith("model.")]
  for key in fields:
    if key in TRAINING_CHOICES or key == "vocab_size":  # the corpus decides the vocabulary
      continue
    value = config.model[key]
    try:
      given = checkpoint.replace(**{key: value})
    except (TypeError, ValueError) as e:
      raise guards.RunError(f"--config.model.{key}={value}: {e}") from None
    if getattr(given, key) != getattr(checkpoint, key):
      raise guards.RunError(
        f"--config.model.{key}={value} contradicts --config.init {init}, whose {key} is "
        f"{getattr(checkpoint, key)!r}: the architecture is the checkpoint's; drop the flag"
      )
  return {**checkpoint.to_dict(), **{k: config.model[k] for k in TRAINING_CHOICES if k in fields}}


def fingerprint(init: str) -> dict:
  """The checkpoint's files by content (data_files.json's "init"): a resume from another is refused."""
  return run_config.data_fingerprint(init, {"init": loading.files(init)})


def trains_first(path: tuple[str, ...]) -> bool:
  """Whether a frozen first stage trains the param at `path`: the embeddings and the heads do.

  The layers do not, nor does DeBERTa's relative-position table, which belongs to their attention.
  In replaced-token detection's pair, the same holds for the generator and the discriminator, and
  the GDES embedding delta trains.
  """
  if path[0] in ("generator", "discriminator"):
    path = path[1:]
  return path[0] in ("mlm_head", "rtd_head", "embedding_delta") or path[:2] == ("encoder", "embeddings")


def initial_params(init: str, model_config: EncoderConfig, vocab: list[str], seed: int) -> tuple[dict, str]:
  """The checkpoint's parts for step 0 (numpy, in `model_config`'s layout) and a line counting rows copied, mapped, new.

  The parts are the checkpoint's encoder, its MLM head (a fresh head when it has none) and its
  replaced-token head where it has one (an ELECTRA discriminator's), read on the
  host (loading.read), with every vocabulary row carried over as vocab_map.row_sources says, and
  RoBERTa's positions moved with its pad id (the model's pad id is its vocabulary's [PAD]).
  """
  checkpoint = loading.read(init, scan_layers=model_config.scan_layers)
  if checkpoint.tokenizer is None:
    raise guards.RunError(f"--config.init {init}: no vocab.txt beside the model; its rows cannot be matched to tokens")
  rng = np.random.default_rng(seed)
  if "mlm_head" in checkpoint.params:
    head = checkpoint.params["mlm_head"]
  else:
    logging.warning("%s has no MLM head: the run starts one afresh", init)
    head = loading.init_params(model_config.replace(scan_layers=False), jax.random.key(seed))["mlm_head"]
  heads = {"mlm_head": head, **{k: v for k, v in checkpoint.params.items() if k == "rtd_head"}}
  params = jax.tree_util.tree_map(np.asarray, {"encoder": checkpoint.params["encoder"], **heads})
  sources = vocab_map.row_sources(checkpoint.tokenizer.vocab, vocab)
  embeddings = params["encoder"]["embeddings"]
  table = embeddings["word_embeddings"]["embedding"]
  embeddings["word_embeddings"]["embedding"] = _carried(
    table, sources.rows, rng.normal(table.mean(0), table.std(0), (len(vocab), table.shape[1]))
  )
  bias = params["mlm_head"]["bias"]
  params["mlm_head"]["bias"] = _carried(bias, sources.rows, np.full(len(vocab), bias.mean(), bias.dtype))
  if model_config.model_type == "roberta":
    embeddings["position_embeddings"]["embedding"] = _positions_moved(
      embeddings["position_embeddings"]["embedding"], checkpoint.config.pad_token_id, model_config.pad_token_id
    )
  return params, (
    f"vocabulary {vocab_map.kind(checkpoint.tokenizer.vocab, vocab)}, {len(vocab):,} tokens (the "
    f"checkpoint's {len(checkpoint.tokenizer):,}): {sources.describe()}"
  )


def _carried(rows: np.ndarray, sources: np.ndarray, new: np.ndarray) -> np.ndarray:
  """rows[sources] where a source exists, else the row of `new`."""
  kept = (sources >= 0).reshape(-1, *([1] * (rows.ndim - 1)))
  return np.where(kept, rows[np.maximum(sources, 0)], new).astype(rows.dtype)


def _positions_moved(table: np.ndarray, old_pad: int, new_pad: int) -> np.ndarray:
  """RoBERTa's position table for a pad id moved from `old_pad` to `new_pad`.

  Its position ids start after the pad id, so the row of the i-th token moves with it (rows left
  without a source keep theirs).
  """
  shift = new_pad - old_pad
  moved = table.copy()
  if shift > 0:
    moved[shift:] = table[:-shift]
  elif shift < 0:
    moved[:shift] = table[-shift:]
  return moved

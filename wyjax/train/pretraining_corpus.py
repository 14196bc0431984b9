"""The prepared corpus a pretraining run reads: where it lies, its preparing, and its fingerprint."""

import hashlib
import json
import logging

import jax
import numpy as np
from etils import epath
from jax.experimental import multihost_utils

from wyjax.core import guards
from wyjax.core.storage import cache_dir
from wyjax.data import prepare
from wyjax.data.corpus import source_place


def corpus_dir(config) -> epath.Path:
  """Where the prepared corpus is or goes: config.data_dir, else <cache>/corpora/<source>-<length>.

  The source is named by its place: one folder spelled two ways is one corpus.
  """
  name = f"{source_place(config.corpus.source).replace(':', '-').replace('/', '_')}-{config.corpus.sequence_length}"
  return epath.Path(config.data_dir or cache_dir() / "corpora" / name)


def prepared_data_dir(config, *, prepare_corpus: bool = False) -> epath.Path:
  """The folder of the prepared corpus, prepared there first (by process 0) when it must be.

  config.data_dir when it holds a prepared corpus (used as is); otherwise config.corpus is prepared
  into the cache's corpus folder (wyjax's own, rebuilt when the options change) or, when
  `prepare_corpus` says so, into data_dir.

  Raises:
    guards.RunError: data_dir holds no finished corpus (a mistyped path, an interrupted build) and
      `prepare_corpus` is False.
  """
  corpus = config.corpus
  data_dir = corpus_dir(config)
  if config.data_dir and (data_dir / prepare.MANIFEST).exists():
    return data_dir
  if config.data_dir and not prepare_corpus:
    raise guards.RunError(
      f"--config.data_dir {data_dir} {prepare.unprepared(data_dir)}; prepare a corpus there with `python -m "
      f"wyjax.data prepare-corpus --out={data_dir} --source=…`, or pass --prepare_corpus to prepare config.corpus "
      f"({corpus.source}) there"
    )
  if jax.process_index() == 0:
    options = prepare.Options(
      source=corpus.source,
      sequence_length=corpus.sequence_length,
      valid_fraction=corpus.valid_fraction,
      t2s=corpus.t2s,
      char_filter=corpus.char_filter,
      min_count=corpus.min_count,
      max_vocab=corpus.max_vocab or None,
      extend_vocab=corpus.extend_vocab,
    )
    prepare.prepare_corpus(
      data_dir,
      options,
      vocab_dir=corpus.vocab or None,
      workers=corpus.workers or None,
      overwrite=not config.data_dir,
      log=logging.info,
      flags=prepare.CONFIG_FLAGS,
    )
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("corpus prepared")
  return data_dir


def corpus_fingerprint(data_dir, manifest: dict) -> dict:
  """The prepared corpus as run_config.check_data compares data, which a resume checks.

  The manifest: the bytes of its sequences and a SHA-256 of what it says was built (source,
  options, vocabulary, sequences and shards per split; not its timings). Each shard: its bytes and
  the SHA-256 the manifest records (none in an older manifest). A corpus rebuilt under the same
  path is seen, and its changed shards named.
  """
  built = {k: manifest[k] for k in ("source", "fingerprint", "vocab_hash", "sequences", "tokens", "shards")}
  sequence_bytes = manifest["sequence_length"] * np.dtype(manifest["dtype"]).itemsize
  shards = {
    name: {"bytes": (epath.Path(data_dir) / name).stat().length, "sha256": sha256}
    for name, sha256 in manifest.get("shard_sha256", {}).items()
  }
  return {
    "corpus": {
      prepare.MANIFEST: {
        "bytes": sum(manifest["sequences"].values()) * sequence_bytes,
        "sha256": hashlib.sha256(json.dumps(built, sort_keys=True).encode()).hexdigest(),
      },
      **shards,
    }
  }

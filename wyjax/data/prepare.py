"""Prepares a corpus: source text → vocabulary → packed fixed-length sequences in ArrayRecord shards.

    python -m wyjax.data prepare-corpus --source=daizhige:DIR|poetry|text:PATH --out=DIR

Output folder:
    tokenizer/                        the vocabulary (built here, or copied from --vocab)
    train-00000.array_record …        sequences of `sequence_length` token ids (dtype in the
    valid-00000.array_record …        manifest): [CLS] then the token stream, in which every
                                      document ends with [SEP]; the last one padded with [PAD]
    manifest.json                     counts, shards and their SHA-256s, vocab hash; written last

Paragraphs are de-duplicated exactly; a document goes whole to one split. A finished folder of the same
build (source content, options, vocabulary) is left as is; another non-empty folder is refused unless
`overwrite`, and an --out inside its source or --vocab always. One command writes a folder at a time;
a refused or failed build removes what it wrote there.
"""

import collections
import contextlib
import dataclasses
import errno
import hashlib
import json
import multiprocessing
import sys
import tempfile
import time

import numpy as np
from etils import epath

from wyjax.core import guards, io_paths, locks, storage
from wyjax.data import corpus, corpus_vocab, corpus_workers, packing, worker_pool
from wyjax.data import tokenizer as tokenizer_lib

SPLITS = ("train", "valid")
MANIFEST = "manifest.json"
BUILDING = "preparing.json"  # the fingerprint of the build under way: its folder may be rebuilt


@dataclasses.dataclass(frozen=True)
class Flags:
  """How the command that prepares a corpus names its options, for its messages."""

  out: str = "--out"
  source: str = "--source"
  vocab: str = "--vocab"
  overwrite: str | None = "--overwrite"  # None: the command has no such flag
  command: str = "prepare-corpus"


# Pretraining prepares config.corpus into config.data_dir, and has no --overwrite.
CONFIG_FLAGS = Flags("--config.data_dir", "--config.corpus.source", "--config.corpus.vocab", None, "pretraining")


@dataclasses.dataclass(frozen=True)
class Options:
  source: str
  sequence_length: int = 512
  valid_fraction: float = 0.01
  t2s: bool = True
  char_filter: str = "none"
  min_count: int = 1
  max_vocab: int | None = None
  shard_sequences: int = 65536
  # With a given vocabulary (--vocab): append the corpus's characters it lacks (a model continued from
  # the vocabulary's checkpoint keeps every row in place and learns the new ones; wyjax.data.vocab_map).
  extend_vocab: bool = False

  def __post_init__(self):
    if self.sequence_length < 8:
      raise ValueError(f"sequence_length {self.sequence_length}: at least 8 tokens ([CLS], text, [SEP])")
    if not 0 <= self.valid_fraction < 1:
      raise ValueError(f"valid_fraction {self.valid_fraction}: expected a fraction in [0, 1)")
    counts = {"min_count": self.min_count, "shard_sequences": self.shard_sequences, "max_vocab": self.max_vocab}
    if small := [f"{name} is {value}" for name, value in counts.items() if value is not None and value < 1]:
      raise ValueError(f"{', '.join(small)}; allowed: an integer ≥ 1")


def _fingerprint(kind: str, content: str, options: Options, vocab: list[str] | None, casing: dict) -> str:
  """What a build is made from: the source's kind and content (not its place), the options and the given vocabulary."""
  options = {k: v for k, v in dataclasses.asdict(options).items() if k != "source"}
  if not options["extend_vocab"]:  # added later: a corpus prepared before it keeps its fingerprint
    del options["extend_vocab"]
  casing = {k: v for k, v in casing.items() if v}  # likewise: a corpus of a cased vocabulary
  payload = json.dumps(
    {
      "kind": kind,
      "content": content,
      "options": options,
      **casing,
      "vocab": hashlib.sha256("\n".join(vocab).encode()).hexdigest() if vocab else None,
    },
    sort_keys=True,
  )
  return hashlib.sha256(payload.encode()).hexdigest()


def vocab_hash(tokenizer) -> str:
  return storage.lines_sha256(tokenizer.vocab)


def _made_by_a_build(name: str) -> bool:
  return name.endswith(".array_record") or name in ("tokenizer", MANIFEST, MANIFEST + ".partial", BUILDING)


def _build_record(out: epath.Path) -> dict | None:
  """The record (preparing.json) of the unfinished build in `out`; {} when cut short (a full disk), None if none."""
  building = out / BUILDING
  if not building.exists():
    return None
  try:
    return storage.read_json(building)
  except ValueError:
    return {}


def _unfinished_build(out: epath.Path, build: dict) -> bool:
  """Whether `out` holds an unfinished build that this one replaces.

  That is its own, or, in a folder holding nothing else, one of the same source with other options (a
  failed run's leftovers must not refuse the rerun that fixes its options); never another source's.
  """
  record = _build_record(out)
  if record is None:
    return False
  if record.get("fingerprint") == build["fingerprint"]:
    return True
  return (
    _same_source(record, build)
    and not (out / MANIFEST).exists()
    and all(_made_by_a_build(p.name) for p in _entries(out))
  )


def _same_source(record: dict, build: dict) -> bool:
  """Whether a build record (preparing.json, a manifest) names the source `build` reads, however spelled."""
  return corpus.source_place(record.get("source", build["source"])) == build["source"]


def unprepared(data_dir) -> str:
  """What a folder without a finished corpus holds, for a message: nothing, an unfinished build, or no corpus."""
  data_dir = epath.Path(data_dir)
  if not data_dir.exists():
    return "does not exist"
  if record := _build_record(data_dir):
    return (
      f"holds an unfinished build of {record.get('source', 'a corpus')} ({BUILDING}, no {MANIFEST}): "
      "interrupted, or still being written"
    )
  return f"holds no prepared corpus (no {MANIFEST})"


def _entries(out: epath.Path) -> list[epath.Path]:
  """What `out` holds, but the lock of the command writing it."""
  return [p for p in out.iterdir() if p.name != locks.LOCK]


def _prepared_otherwise(manifest: dict, build: dict) -> str:
  """How the corpus of `manifest` differs from `build`, for a refusal."""
  same_options = {**manifest.get("options", {}), "source": None} == {**build["options"], "source": None}
  if _same_source(manifest, build) and same_options:
    return "holds a corpus prepared from other text (the source's files changed since)"
  return "holds a corpus prepared with other options"


def _check_free(out: epath.Path, build: dict, overwrite: bool, flags: Flags) -> None:
  """Refuses an `out` (locked, so it exists) holding anything but an unfinished build this one replaces.

  With `overwrite`, any `out` is free: _claim removes its corpus files, and keeps the rest.
  """
  if _entries(out) and not (overwrite or _unfinished_build(out, build)):
    other_source = not _same_source(_build_record(out) or {}, build)
    held = (
      _prepared_otherwise(storage.read_json(out / MANIFEST), build)
      if (out / MANIFEST).exists()
      else unprepared(out)
      if other_source
      else "holds files that are not this corpus"
    )
    replace = (
      f"or pass {flags.overwrite} to replace"
      if flags.overwrite
      else "or let `python -m wyjax.data prepare-corpus --overwrite` replace"
    )
    raise guards.RunError(f"{flags.out} {out} {held}; choose an empty or new folder, {replace} the corpus files there")


def _claim(out: epath.Path, build: dict) -> None:
  """Removes the corpus files in `out` (_check_free passed), and records the build there."""
  for stale in _entries(out):
    if _made_by_a_build(stale.name) and stale.name != BUILDING:
      _remove(stale)
  (out / BUILDING).write_text(json.dumps(build, ensure_ascii=False))


def _remove(path: epath.Path) -> None:
  path.rmtree() if path.is_dir() else path.unlink()


@contextlib.contextmanager
def _removed_on_failure(out: epath.Path):
  """Removes the corpus files in `out` (all the claimed build's: _claim) when the block fails or is stopped.

  A refused or failed build leaves `out` as it was before it, but for the corpus files `overwrite` replaced.
  """
  try:
    yield
  except BaseException:
    for made in _entries(out):
      if _made_by_a_build(made.name):
        _remove(made)
    raise


def prepare_corpus(
  out,
  options: Options,
  *,
  vocab_dir=None,
  workers: int | None = None,
  progress: bool | None = None,
  overwrite: bool = False,
  log=print,
  flags: Flags = Flags(),
) -> dict:
  """Builds (or finds up to date) the prepared corpus in `out` (a folder or gs://…); returns its manifest.

  The manifest is written last: a corpus without one is incomplete. Another command writing `out`
  meanwhile is refused (locks.held); a finished corpus on a read-only disk is read without the lock.
  """
  out = epath.Path(out)
  io_paths.check_folder(flags.out, out)
  if options.extend_vocab and not vocab_dir:
    raise ValueError(f"extend_vocab extends the vocabulary {flags.vocab} gives: set {flags.vocab}")
  kind, _, arg = options.source.partition(":")
  # Resolve the poetry download once here, not in every worker.
  source = f"poetry:{corpus.fetch_poetry()}" if kind == "poetry" and not arg else options.source
  reader = corpus.reader_for(source)  # a source that does not read fails here, before `out` is touched
  io_paths.check_apart({flags.out: out}, {flags.source: arg, flags.vocab: vocab_dir}, flags.command)
  units = reader.units()
  given = corpus_vocab.given(vocab_dir, flags.vocab) if vocab_dir else None
  content = corpus.content_sha256(reader, units)
  build = {
    "fingerprint": _fingerprint(kind, content, options, given.vocab if given else None, _casing(given)),
    "source_sha256": content,
    "source": corpus.source_place(options.source),
    "options": dataclasses.asdict(options),
  }
  with contextlib.ExitStack() as lock:
    try:
      lock.enter_context(locks.held(out, "prepare-corpus"))
    except OSError as e:
      if e.errno not in _CANNOT_WRITE or _finished(out, build) is None:
        raise
    if (manifest := _finished(out, build)) is not None:
      log(f"{out}: already prepared ({manifest['sequences']} sequences); nothing to do")
      return manifest
    _check_free(out, build, overwrite, flags)
    start = time.perf_counter()
    workers = workers or multiprocessing.cpu_count()
    progress = sys.stderr.isatty() if progress is None else progress
    _log_left_out(options.source, reader, log)
    # A vocabulary refused ([UNK]) refuses the build before `out` changes.
    vocab = corpus_vocab.vocabulary(options, source, units, given, workers=workers, progress=progress, log=log)
    _claim(out, build)
    with _removed_on_failure(out), tempfile.TemporaryDirectory() as local:
      # ArrayRecord writes local files: a corpus for a bucket is built in `local`, then uploaded.
      folder = out if storage.is_local(out) else epath.Path(local)
      manifest = _build(
        folder, options, source, reader, units, build, given, vocab, start, workers=workers, progress=progress, log=log
      )
      if folder != out:
        storage.upload(local, out, last=MANIFEST)
        log(f"uploaded to {out}")
    (out / BUILDING).unlink()
    return manifest


_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM)  # a read-only disk, a folder the user may not write


def _finished(out: epath.Path, build: dict) -> dict | None:
  """The manifest of the finished corpus in `out`, when it is the one `build` would make."""
  manifest_file = out / MANIFEST
  if not manifest_file.exists():
    return None
  manifest = storage.read_json(manifest_file)
  return manifest if manifest.get("fingerprint") == build["fingerprint"] else None


def _casing(tokenizer: tokenizer_lib.Tokenizer | None) -> dict:
  """The casing (lower-casing, accent stripping) a corpus tokenised for `tokenizer`'s model takes from it."""
  return {"lowercase": tokenizer.lowercase, "strip_accents": tokenizer.strip_accents} if tokenizer else {}


def _log_left_out(source: str, reader, log) -> None:
  """Logs the files of `source` that are no text: special files, tokenizer vocabularies."""
  if reader.special:
    log(
      f"{source}: skipped {len(reader.special)} special files (FIFOs, devices, sockets: never opened), "
      f"e.g. {reader.special[0]}"
    )
  if reader.vocabularies:
    log(
      f"{source}: left out {len(reader.vocabularies)} tokenizer vocabularies (a prepared corpus's or a "
      f"model's: no text), e.g. {reader.vocabularies[0]}"
    )


def _build(
  out: epath.Path,
  options: Options,
  source: str,
  reader,
  units: list[str],
  build: dict,
  given: tokenizer_lib.Tokenizer | None,
  vocab: list[str],
  start: float,
  *,
  workers: int,
  progress: bool,
  log,
) -> dict:
  """Builds the corpus `build` records, of vocabulary `vocab`, into the local folder `out`; returns its manifest.

  The manifest is written last; its timings count from `start` (perf_counter), its vocabulary's reading included.
  """
  tokenizer = tokenizer_lib.Tokenizer(
    vocab, t2s=options.t2s, model_max_length=options.sequence_length, **_casing(given)
  )
  tokenizer.save(out / "tokenizer")
  dtype = np.uint16 if len(vocab) <= np.iinfo(np.uint16).max + 1 else np.int32
  packers = {
    s: packing.Packer(packing.ShardWriter(out, s, options.shard_sequences, dtype), options.sequence_length, tokenizer)
    for s in SPLITS
  }
  seen: set[int] = set()  # 64-bit paragraph hashes: ~70 bytes per unique paragraph, the only memory that grows
  stats = collections.Counter()
  with (
    packing.removed_on_failure(out, packers),
    worker_pool.processes(
      workers, corpus_workers.start, (source, options.t2s, options.char_filter, vocab, _casing(given))
    ) as pool,
  ):
    for documents in worker_pool.ordered_map(pool, corpus_workers.tokenize_unit, units, progress, "tokenising"):
      for doc_id, raw_chars, kept_chars, hashes, ids, starts in documents:
        stats["raw_characters"] += raw_chars
        stats["characters"] += kept_chars
        stats["paragraphs"] += len(hashes)
        bounds = np.append(starts, len(ids))
        unique = []
        for i, h in enumerate(hashes.tolist()):
          if h in seen:
            stats["duplicate_paragraphs"] += 1
            continue
          seen.add(h)
          unique.append(ids[bounds[i] : bounds[i + 1]])
        unique = [u for u in unique if len(u)]
        stats["unk_tokens"] += sum(int((u == tokenizer.unk_id).sum()) for u in unique)
        stats["text_tokens"] += sum(map(len, unique))
        split = "valid" if corpus.is_validation(doc_id, options.valid_fraction) else "train"
        if not unique:
          stats["empty_documents"] += 1
          continue
        stats[f"{split}_documents"] += 1
        packers[split].add_document(np.concatenate(unique))
    for packer in packers.values():
      packer.finish()
  if not packers["train"].writer.sequences:
    raise guards.RunError(
      f"{options.source}: no text to train on ({stats['raw_characters']} characters read, "
      f"{stats['characters']} kept after cleaning, in {stats['train_documents']} training "
      f"and {stats['valid_documents']} validation documents)"
    )
  if options.valid_fraction and not packers["valid"].writer.sequences:
    raise guards.RunError(
      f"{options.source}: no validation sequences: none of its {stats['train_documents']} documents fell into the "
      f"validation split (valid_fraction {options.valid_fraction}; a document, e.g. a file, goes whole to one "
      "split, by a hash of its name), and pretraining evaluates on it; add documents or raise valid_fraction"
    )
  if given:  # another model's vocabulary may lack much of the text
    tokenizer_lib.unknown_share(
      stats["unk_tokens"],
      stats["text_tokens"],
      log,
      advice="" if options.extend_vocab else "--extend_vocab appends what it lacks",
    )
  seconds = time.perf_counter() - start
  manifest = {
    "fingerprint": build["fingerprint"],
    "source": build["source"],
    "source_sha256": build["source_sha256"],
    "options": dataclasses.asdict(options),
    "sequence_length": options.sequence_length,
    "dtype": np.dtype(dtype).name,
    "vocab_size": len(vocab),
    "vocab_hash": vocab_hash(tokenizer),
    "documents": {s: stats[f"{s}_documents"] for s in SPLITS},
    "empty_documents": stats["empty_documents"],
    "skipped_special_files": reader.special,
    "paragraphs": stats["paragraphs"],
    "duplicate_paragraphs": stats["duplicate_paragraphs"],
    "raw_characters": stats["raw_characters"],
    "characters": stats["characters"],
    "unk_tokens": stats["unk_tokens"],
    "tokens": {s: packers[s].tokens for s in SPLITS},
    "sequences": {s: packers[s].writer.sequences for s in SPLITS},
    "shards": {s: packers[s].writer.names for s in SPLITS},
    "shard_sha256": {name: sha256 for s in SPLITS for name, sha256 in packers[s].writer.sha256.items()},
    "seconds": round(seconds, 2),
    "characters_per_second": round(stats["raw_characters"] / seconds),
    "workers": workers,
  }
  partial = out / (MANIFEST + ".partial")
  partial.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
  partial.rename(out / MANIFEST)
  log(
    f"{out}: {manifest['raw_characters']:,} characters, {sum(manifest['sequences'].values()):,} "
    f"sequences of {options.sequence_length} in {seconds:.1f} s ({manifest['characters_per_second']:,} chars/s)"
  )
  return manifest


def read_manifest(data_dir) -> dict:
  manifest_file = epath.Path(data_dir) / MANIFEST
  if not manifest_file.exists():
    raise FileNotFoundError(f"{data_dir} {unprepared(data_dir)}: run `python -m wyjax.data prepare-corpus` first")
  return storage.read_json(manifest_file)

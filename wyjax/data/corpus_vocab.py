"""The vocabulary a corpus is prepared with: a given one (--vocab), that one extended, or the corpus's own."""

import collections

from etils import epath

from wyjax.core import guards, storage
from wyjax.data import corpus_workers, vocab_map, worker_pool
from wyjax.data import tokenizer as tokenizer_lib

_VOCAB_FILES = ("vocab.txt", "tokenizer.json")
_ACCEPTED = (
  "a folder holding vocab.txt or tokenizer.json (a tokenizer's, a wyjax export's, a transformers model's), "
  "that file, or a wyjax run's folder (model.json beside tokenizer/)"
)


def given(typed, flag: str) -> tokenizer_lib.Tokenizer:
  """The tokenizer of the vocabulary `typed` (the value of `flag`) names.

  `typed`: a folder holding vocab.txt or tokenizer.json, one of those files, or a folder whose tokenizer/ holds
  them (a wyjax workdir, its checkpoints or one step's folder; a prepared corpus).

  Raises:
    guards.RunError: `typed` names no vocabulary; the message names it and what to pass instead.
    ValueError: a vocabulary wyjax cannot use, naming its file.
  """
  return tokenizer_lib.Tokenizer.load(_folder(typed, flag))


def _folder(typed, flag: str) -> epath.Path:
  """The folder whose vocab.txt or tokenizer.json `typed` names (see `given`)."""
  path = epath.Path(typed)
  if path.is_file():
    if path.name in _VOCAB_FILES:
      return path.parent
    raise guards.RunError(f"{flag} {typed} is a file of no vocabulary wyjax reads; pass {_ACCEPTED}")
  if not path.exists():
    if storage.hub_id(str(typed)):
      raise guards.RunError(
        f"{flag} {typed}: no such folder; a Hub model's vocabulary is read from a copy: download it "
        f"(`hf download {typed} vocab.txt tokenizer_config.json --local-dir=DIR`) and pass {flag}=DIR"
      )
    raise guards.RunError(f"{flag} {typed}: no such file or folder; pass {_ACCEPTED}")
  if _holds_vocab(path):
    return path
  from wyjax.core import checkpoints  # orbax, a second's import, only for a folder that is no tokenizer's

  if _holds_vocab(tokenizer := checkpoints.tokenizer_dir(path)):
    return tokenizer
  runs = sorted(path.glob("*/model.json"))  # a fine-tuning workdir's seed runs
  hint = f" ({runs[0].parent} is one)" if runs else ""
  raise guards.RunError(f"{flag} {typed} holds no vocabulary; pass {_ACCEPTED}{hint}")


def _holds_vocab(folder: epath.Path) -> bool:
  return any((folder / name).exists() for name in _VOCAB_FILES)


def vocabulary(options, source: str, units: list[str], given_tokenizer, *, workers: int, progress: bool, log):
  """The vocabulary the corpus of `units` is prepared with; reads the text (in `workers` processes) where it must.

  `given_tokenizer`'s vocabulary (None: the corpus's own, built from its characters); with options.extend_vocab,
  that one with the corpus's characters it lacks appended (vocab_map.extended).

  Raises:
    ValueError: the vocabulary leaves most of the text's characters [UNK] (tokenizer.build_vocab).
  """
  if given_tokenizer and not options.extend_vocab:
    return given_tokenizer.vocab
  counts = collections.Counter()
  with worker_pool.processes(
    workers, corpus_workers.start, (source, options.t2s, options.char_filter, None, {})
  ) as pool:
    for unit_counts in worker_pool.ordered_map(pool, corpus_workers.count_unit, units, progress, "counting characters"):
      counts.update(unit_counts)
  if given_tokenizer is None:
    return tokenizer_lib.build_vocab(counts=counts, min_count=options.min_count, max_size=options.max_vocab, t2s=False)
  given_vocab = given_tokenizer.vocab
  built = tokenizer_lib.build_vocab(
    counts=given_tokenizer.folded_counts(counts),  # "A" extends nothing where the model reads it as "a"
    min_count=options.min_count,
    max_size=options.max_vocab,
    t2s=False,
    extends=given_vocab,
  )
  vocab = vocab_map.extended(given_vocab, built)
  log(
    f"{options.source}: the given vocabulary's {len(given_vocab):,} tokens extended by the "
    f"{len(vocab) - len(given_vocab):,} of the corpus's it lacks"
  )
  return vocab

"""Pretraining data (the WYWEB tasks built from Daizhige: python -m wyjax.tasks).

    python -m wyjax.data prepare-corpus --source=daizhige:DIR|poetry|text:PATH --out=DIR
        [--sequence_length=512] [--vocab=PATH [--extend_vocab]] [--valid_fraction=0.01] [--workers=N]
        [--no_t2s] [--char_filter=none|no_ascii_alnum|no_private_use] [--min_count=1] [--max_vocab=N]
        [--overwrite]

A folder already holding the same corpus is left as is; any other non-empty --out is refused
unless --overwrite (which replaces the corpus files there and keeps the rest), and an --out inside
the source always. A refused or failed build leaves --out as it was (but for what --overwrite replaced).
"""

import os

from absl import app, flags

from wyjax.core import cli
from wyjax.data import corpus, prepare

_COMMANDS = ("prepare-corpus",)

# Each range is checked as the flags are parsed; pretraining's config.corpus has the same ones (config_values).
_SOURCE = flags.DEFINE_string("source", None, "daizhige:DIR, poetry, or text:PATH (required).")
_OUT = flags.DEFINE_string("out", None, "Output folder (required).")
_SEQUENCE_LENGTH = flags.DEFINE_integer(
  "sequence_length", 512, "Tokens per packed sequence.", lower_bound=8, upper_bound=1 << 20
)
_VOCAB = flags.DEFINE_string(
  "vocab",
  None,
  "Reuse this vocabulary (a model's, to continue it) instead of building one: a folder holding vocab.txt or "
  "tokenizer.json (a tokenizer's, an export's, a transformers model's), that file, or a wyjax run's folder.",
)
_EXTEND_VOCAB = flags.DEFINE_bool(
  "extend_vocab",
  False,
  "With --vocab: append the corpus's characters it lacks (the model continued from it keeps its rows in place).",
)
_VALID_FRACTION = flags.DEFINE_float(
  "valid_fraction", 0.01, "Fraction of documents held out for validation.", lower_bound=0, upper_bound=1
)
flags.register_validator("valid_fraction", lambda f: f < 1, "--valid_fraction must be below 1: the rest is trained on")
_NO_T2S = flags.DEFINE_bool("no_t2s", False, "Keep traditional characters.")
_CHAR_FILTER = flags.DEFINE_enum("char_filter", "none", sorted(corpus.CHAR_FILTERS), "Characters dropped in cleaning.")
_MIN_COUNT = flags.DEFINE_integer(
  "min_count", 1, "Fewest occurrences for a character to enter the vocabulary.", lower_bound=1
)
_MAX_VOCAB = flags.DEFINE_integer("max_vocab", None, "Largest vocabulary (default: no limit).", lower_bound=1)
_SHARD_SEQUENCES = flags.DEFINE_integer(
  "shard_sequences", 65536, "Sequences per ArrayRecord shard.", lower_bound=1, upper_bound=2**31 - 1
)
_WORKERS = flags.DEFINE_integer(
  "workers", None, "Worker processes (default: all cores).", lower_bound=1, upper_bound=os.cpu_count()
)
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a corpus prepared in --out with other options.")


def main(argv):
  if len(argv) != 2 or argv[1] not in _COMMANDS:
    raise app.UsageError(f"expected one command ({' | '.join(_COMMANDS)}), got: {' '.join(argv[1:]) or 'none'}")
  if _SOURCE.value is None or _OUT.value is None:
    raise app.UsageError("prepare-corpus needs --source and --out")
  options = prepare.Options(
    source=_SOURCE.value,
    sequence_length=_SEQUENCE_LENGTH.value,
    valid_fraction=_VALID_FRACTION.value,
    t2s=not _NO_T2S.value,
    char_filter=_CHAR_FILTER.value,
    min_count=_MIN_COUNT.value,
    max_vocab=_MAX_VOCAB.value,
    shard_sequences=_SHARD_SEQUENCES.value,
    extend_vocab=_EXTEND_VOCAB.value,
  )
  prepare.prepare_corpus(
    _OUT.value, options, vocab_dir=_VOCAB.value, workers=_WORKERS.value, overwrite=_OVERWRITE.value
  )


if __name__ == "__main__":
  cli.run(main)

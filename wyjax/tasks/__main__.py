"""Build WYWEB's two unpublished tasks from a Daizhige tree, in WYWEB's formats.

    python -m wyjax.tasks build-punc --daizhige=DIR --out=DIR [--collections=史藏,…] [--max_length=510]
    python -m wyjax.tasks build-gjc --daizhige=DIR --out=DIR [--per_collection=10000] [--max_length=510]

build-punc labels each character of the punctuated texts with the mark that follows it; build-gjc
labels passages with their collection. Both take [--dev_fraction=0.05] [--test_fraction=0.05]
[--min_length=N] [--no_t2s] [--overwrite]. An --out already holding train/dev/test.tsv or
summary.json (yours, or an earlier build's) is refused unless --overwrite, and one inside --daizhige
always. Each flag's range is declared with it and checked as the flags are parsed, before
anything is read.
"""

from absl import app, flags

from wyjax.core import cli, io_paths
from wyjax.data.corpus import DAIZHIGE_COLLECTIONS
from wyjax.tasks.builders import gjc, punc

_COMMANDS = ("build-punc", "build-gjc")

_DAIZHIGE = flags.DEFINE_string("daizhige", None, "Daizhige tree (required).")
_OUT = flags.DEFINE_string("out", None, "Output folder (required).")
_COLLECTIONS = flags.DEFINE_list("collections", ["史藏"], "build-punc: collections to read (default: history).")
_PER_COLLECTION = flags.DEFINE_integer(
  "per_collection", 10_000, "build-gjc: passages per collection at most.", lower_bound=1
)
_DEV_FRACTION = flags.DEFINE_float(
  "dev_fraction", 0.05, "Fraction of documents in the dev split.", lower_bound=0, upper_bound=1
)
_TEST_FRACTION = flags.DEFINE_float(
  "test_fraction", 0.05, "Fraction of documents in the test split.", lower_bound=0, upper_bound=1
)
_MIN_LENGTH = flags.DEFINE_integer(
  "min_length", None, "Shortest text kept (default: 8 for build-punc, 16 for build-gjc).", lower_bound=1
)
_MAX_LENGTH = flags.DEFINE_integer("max_length", 510, "Longest text written; longer ones are cut.", lower_bound=1)
# A typo builds nothing from a collection that is not there (exit 0, empty splits).
flags.register_validator(
  "collections",
  lambda names: bool(names) and set(names) <= set(DAIZHIGE_COLLECTIONS),
  f"expected Daizhige's collections, among {','.join(DAIZHIGE_COLLECTIONS)}",
)
flags.register_multi_flags_validator(  # 1.5 sent every document to dev; the fractions leave train the rest
  ["dev_fraction", "test_fraction"],
  lambda f: f["dev_fraction"] + f["test_fraction"] < 1,
  "--dev_fraction + --test_fraction must be below 1: the documents left are the train split",
)
flags.register_multi_flags_validator(
  ["min_length", "max_length"],
  lambda f: f["min_length"] is None or f["min_length"] <= f["max_length"],
  "--min_length is more than --max_length: no text would be kept",
)
_NO_T2S = flags.DEFINE_bool("no_t2s", False, "Keep traditional characters.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace train/dev/test.tsv and summary.json already in --out.")

# Flags only one command reads: given to the other, they would be silently ignored.
_OWNER = {_COLLECTIONS.name: "build-punc", _PER_COLLECTION.name: "build-gjc"}


def main(argv):
  if len(argv) != 2 or argv[1] not in _COMMANDS:
    raise app.UsageError(f"expected one command ({' | '.join(_COMMANDS)}), got: {' '.join(argv[1:]) or 'none'}")
  command = argv[1]
  for name, owner in _OWNER.items():
    if owner != command and flags.FLAGS[name].present:
      raise app.UsageError(f"--{name} is for {owner}, not {command}")
  if _DAIZHIGE.value is None or _OUT.value is None:
    raise app.UsageError(f"{command} needs --daizhige and --out")
  io_paths.check_apart({"--out": _OUT.value}, {"--daizhige": _DAIZHIGE.value}, command)
  options = {
    "dev_fraction": _DEV_FRACTION.value,
    "test_fraction": _TEST_FRACTION.value,
    "max_length": _MAX_LENGTH.value,
    "t2s": not _NO_T2S.value,
    "overwrite": _OVERWRITE.value,
  }
  if _MIN_LENGTH.value is not None:  # else the builder's own default
    options["min_length"] = _MIN_LENGTH.value
  if command == "build-gjc":
    summary = gjc.build_gjc(_DAIZHIGE.value, _OUT.value, per_collection=_PER_COLLECTION.value, **options)
  else:
    summary = punc.build_punc(_DAIZHIGE.value, _OUT.value, collections_=tuple(_COLLECTIONS.value), **options)
  print(f"{_OUT.value}: {summary}")


if __name__ == "__main__":
  cli.run(main)

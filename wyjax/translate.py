"""Translate classical Chinese to modern Chinese, one sentence per line, with a WYWMT model.

    python -m wyjax.translate --init=WORKDIR [--beam=4] < classical.txt > modern.txt

--init is a WYWMT fine-tuning workdir (its best-dev run is used), one of its seed_<k> runs,
or the folder `wyjax.export` made of one; any other model (a pretrained encoder, another task's)
is refused before its weights are read. Only `\n` ends a line (`\r\n` too, as one
ending). Empty, over-long and undecodable (not UTF-8) lines are errors that name their line;
with --skip_bad_lines they are reported, counted and left empty in the output, so output line
k still translates input line k.
"""

import os
import pathlib
import sys

import jax
from absl import flags

from wyjax.core import checkpoints, cli, guards, io_paths, logs, storage
from wyjax.hf import loading, task_models
from wyjax.models import MaskedLM, prefix_lm
from wyjax.tasks import user_inputs
from wyjax.train import config_values

_INIT = flags.DEFINE_string("init", None, "WYWMT fine-tuning workdir, seed run or transformers folder.", required=True)
_INPUT = flags.DEFINE_string("input", "-", "Input file, one classical sentence per line ('-': stdin).")
_BEAM = flags.DEFINE_integer("beam", 4, "Beam size (1: greedy).", lower_bound=1)
_LENGTH_PENALTY = flags.DEFINE_float(
  "length_penalty", 0.6, "GNMT length penalty exponent.", lower_bound=0, upper_bound=config_values.MAX_LENGTH_PENALTY
)
_MAX_RATIO = flags.DEFINE_float(
  "max_ratio", 2.0, "At most max_ratio × source + max_extra target characters.", lower_bound=0
)
_MAX_EXTRA = flags.DEFINE_integer("max_extra", 32, "See --max_ratio.", lower_bound=0)
flags.register_multi_flags_validator(  # both 0: room for no target token (an IndexError deep in decoding)
  ["max_ratio", "max_extra"],
  lambda f: f["max_ratio"] > 0 or f["max_extra"] > 0,
  "--max_ratio 0 and --max_extra 0 leave a translation no token; raise either",
)
# [CLS] source [SEP] target [SEP]: one source and one target token at the least.
# A row's keys and values are allocated whole, for max_length tokens (_check_decoding_fits costs them).
_MAX_LENGTH = flags.DEFINE_integer(
  "max_length", 512, "Tokens of [CLS] source [SEP] target [SEP].", lower_bound=5, upper_bound=1 << 20
)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
_SKIP_BAD_LINES = flags.DEFINE_bool("skip_bad_lines", False, "Report bad lines and leave them empty.")


def _model_dir(init: pathlib.Path):
  if (init / "results.json").exists():  # a fine-tuning workdir: its best-dev run
    return checkpoints.best_run(init)
  return init


def _max_length(model: loading.Model) -> int:
  if model.config.absolute_positions:
    return min(_MAX_LENGTH.value, model.config.max_position_embeddings)
  return _MAX_LENGTH.value


def _memory_bytes() -> int:
  """What the device holds: its allocator's limit, or the host's memory on the CPU."""
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("bytes_limit") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _check_decoding_fits(model: loading.Model, max_length: int) -> None:
  """Refuses a --beam × --batch_size whose key/value cache cannot fit, before XLA fails in the first compile.

  The cache holds every layer's keys and values of each beam's max_length tokens.
  """
  config, rows = model.config, _BEAM.value * _BATCH_SIZE.value
  cache = 2 * config.num_hidden_layers * rows * max_length * config.hidden_size * 4
  logits = 4 * rows * config.vocab_size * 4  # a step's logits, log-probabilities and their top candidates
  needed, available = cache + logits, _memory_bytes()
  if needed > available:
    raise guards.RunError(
      f"--beam {_BEAM.value} × --batch_size {_BATCH_SIZE.value} needs about {_size(needed)} "
      f"to decode ({rows:,} rows of {max_length} tokens), more than the {_size(available)} "
      "here: lower --beam, --batch_size or --max_length"
    )


def _size(n: float) -> str:
  for unit in ("B", "KB", "MB", "GB", "TB"):
    if n < 1000:
      return f"{n:.1f} {unit}"
    n /= 1000
  return f"{n:.1f} PB"


def main(argv):
  del argv
  logs.to_file(None, "translate")
  if storage.same_file(_INPUT.value, "-"):
    read = f"the input file {_INPUT.value}" if _INPUT.value != "-" else "the file on standard input"
    raise guards.RunError(f"standard output is {read}; writing it would destroy the input: write to another file")
  io_paths.check_apart({"standard output": io_paths.STDOUT}, {"--init": _INIT.value}, "translate")
  task_models.check_fine_tuned(_INIT.value, "--init", generating="python -m wyjax.finetune --config=wywmt.py")
  model = loading.load(_model_dir(pathlib.Path(_INIT.value)))
  max_length = _max_length(model)
  _check_decoding_fits(model, max_length)
  name = "stdin" if _INPUT.value == "-" else _INPUT.value
  stream = sys.stdin.buffer if _INPUT.value == "-" else open(_INPUT.value, "rb")
  with stream:
    lines = list(user_inputs.lines(stream))
  sources, bad = [], {}
  for number, line in enumerate(lines, 1):
    try:
      ids = model.tokenizer.encode_chars(user_inputs.decoded(line, name, number))[0]
      if not len(ids):
        bad[number] = "empty line"
      elif len(ids) + 3 > max_length:
        bad[number] = f"{len(ids)} characters; at most {max_length - 3} fit (--max_length {max_length})"
    except storage.FormatError as e:  # not UTF-8
      ids, bad[number] = [], e.message
    sources.append(ids)
  for number, reason in bad.items():
    print(f"{name}:{number}: {reason}", file=sys.stderr)
  if bad and not _SKIP_BAD_LINES.value:
    raise guards.RunError(f"{len(bad)} bad line(s) of {len(lines)}; fix them or pass --skip_bad_lines")
  good = [i for i in range(len(lines)) if i + 1 not in bad]
  params = jax.tree_util.tree_map(jax.numpy.asarray, model.params)
  targets = prefix_lm.translate(
    MaskedLM(model.config),
    params,
    model.tokenizer,
    [sources[i] for i in good],
    max_length=max_length,
    max_ratio=_MAX_RATIO.value,
    max_extra=_MAX_EXTRA.value,
    batch_size=_BATCH_SIZE.value,
    beam_size=_BEAM.value,
    length_penalty=_LENGTH_PENALTY.value,
  )
  out = [""] * len(lines)
  for i, target in zip(good, targets):
    out[i] = model.tokenizer.decode(target)
  sys.stdout.write("".join(line + "\n" for line in out))
  if bad:
    print(f"{len(bad)} bad line(s) left empty, {len(good)} translated", file=sys.stderr)


if __name__ == "__main__":
  cli.run(main)

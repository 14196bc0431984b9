"""The values a run's config may hold, checked where fine-tuning and pretraining read their config.

A value out of its range is one ValueError naming the key and the range, before anything is read,
built or written. Each check runs where what it needs is known:
- `check`: each key's range (counters, seeds and sizes fit int32; every float is finite) and the
  ranges that join keys;
- `check_data`: the ranges the task's data sets, before anything is compiled;
- memory: by the compiled steps themselves (wyjax.core.host_memory.admit).
"""

import logging
import math
import os

from wyjax.core import ranges
from wyjax.core.ranges import BOOLEAN, INT32, POSITIVE, PROBABILITY, Allowed, integer, number, one_of, or_none
from wyjax.data.corpus import CHAR_FILTERS
from wyjax.models import config as model_config
from wyjax.models.config import ATTENTION_IMPLEMENTATIONS, DTYPES, REMAT_MODES
from wyjax.models.layers import ACTIVATIONS
from wyjax.models.rtd_pair import SHARINGS
from wyjax.train import replaced_tokens
from wyjax.train.pretraining_steps import OBJECTIVES

# Padded lengths a fine-tuning run may ask for: each is a program compiled (seconds each on a CPU,
# up to a minute on a GPU), and more cannot pad less than one per multiple of 8 up to 512.
MAX_LENGTH_BUCKETS = 64
# A beam's length penalty ((5 + length) / 6) ** penalty overflows float32 past about 19 at 512 tokens.
MAX_LENGTH_PENALTY = 10.0


def _axis_rules(rules) -> bool:
  names = lambda axes: (
    axes is None or isinstance(axes, str) or (isinstance(axes, (list, tuple)) and all(isinstance(a, str) for a in axes))
  )
  return isinstance(rules, (list, tuple)) and all(
    isinstance(r, (list, tuple)) and len(r) == 2 and isinstance(r[0], str) and names(r[1]) for r in rules
  )


MESH_AXIS = Allowed(lambda v: v == -1 or integer(1).accepts(v), "an integer ≥ 1, or -1 (the devices left)")

_TRAINING = {  # what both loops read
  "seed": integer(0),
  "batch_size": integer(1),
  "num_train_steps": integer(0),
  "learning_rate": number(0),
  "weight_decay": number(0),
  "b1": number(0, 1, below=True),
  "b2": number(0, 1, below=True),
  "eps": POSITIVE,
  "max_grad_norm": POSITIVE,
  "dtype": one_of(*DTYPES),
  "remat": one_of(*REMAT_MODES),
  "attention": one_of(*ATTENTION_IMPLEMENTATIONS),
  "log_every": integer(1),
  "eval_every": integer(1),
  "max_nonfinite_steps": integer(1),
  "stop_check_every": integer(1),
  "scan_layers": BOOLEAN,
  "scan_unroll": integer(1),
  "mesh.data": MESH_AXIS,
  "mesh.fsdp": MESH_AXIS,
  "mesh.tensor": MESH_AXIS,
  "logical_axis_rules": Allowed(
    _axis_rules, "pairs (logical axis, mesh axis, axes or None), as wyjax.core.partitioning.LOGICAL_AXIS_RULES"
  ),
}
# "best_dev": the evaluation with the best dev score (main metric); "last": the last evaluation,
# the end of training (as CLUE's classification scripts, which predict with the last model).
KEEP_CHECKPOINT = ("best_dev", "last")
FINETUNING = {
  **_TRAINING,
  "learning_rate": or_none(number(0), "chosen from the model's size"),
  "base_learning_rate": POSITIVE,
  "max_length": Allowed(
    lambda v: v == 0 or integer(8).accepts(v), f"0 (the task's), or an integer ≥ 8 and ≤ {INT32:,}"
  ),
  "eval_batch_size": integer(1),
  "sort_window": integer(1),
  "num_epochs": integer(1),
  "length_buckets": integer(0, MAX_LENGTH_BUCKETS),
  "init_weights": one_of(
    "pretrained",
    "random",
    says="'pretrained' (init's weights) or 'random' (init's architecture and vocabulary from random weights)",
  ),
  "warmup_fraction": PROBABILITY,
  "patience": integer(0),
  "seeds": integer(1),
  "keep_checkpoint": one_of(
    *KEEP_CHECKPOINT, says="'best_dev' (the best dev score's parameters) or 'last' (the last evaluation's)"
  ),
  # Tasks' options (Task.options); a task without one has no such key.
  "decoding.beam_size": integer(1),
  "decoding.length_penalty": number(0, MAX_LENGTH_PENALTY),
  "decoding.max_ratio": POSITIVE,
  "decoding.max_extra": integer(0),
  "folds": integer(2),
  "joint_blanks": BOOLEAN,
  "train_on_lines": BOOLEAN,
  "dev_finetune": BOOLEAN,
  "score_chars": integer(0),
}
PRETRAINING = {
  **_TRAINING,
  "grad_accum_steps": integer(1),
  "warmup_steps": integer(0),
  "eval_batches": integer(1),
  "checkpoint_every": integer(1),
  "keep_checkpoints": integer(1),
  "peak_flops_per_device": number(0),
  "masking.rate": number(0, 1, above=True),
  "masking.max_ngram": integer(1),
  "masking.mask_prob": PROBABILITY,
  "masking.random_prob": PROBABILITY,
  "probe_examples": integer(2),
  "probes": Allowed(lambda v: isinstance(v, str), "TASK:FOLDER pairs joined by commas (wyjax.train.probes), or ''"),
  # The corpus a run prepares (prepare.Options; 0: no limit, all cores); a packer allocates a sequence whole.
  "corpus.sequence_length": integer(8, 1 << 20),
  "corpus.valid_fraction": number(0, 1, below=True),
  "corpus.t2s": BOOLEAN,
  "corpus.char_filter": one_of(*CHAR_FILTERS),
  "corpus.min_count": integer(1),
  "corpus.max_vocab": integer(0),
  "corpus.workers": integer(0, os.cpu_count()),
  # The model (its vocabulary's size is the corpus's: check_decided).
  **{f"model.{name}": allowed for name, allowed in model_config.FIELDS.items()},
  "model.hidden_act": one_of(*ACTIVATIONS),
  "init": Allowed(lambda v: isinstance(v, str), "a path or a Hub id, or '' (random weights)"),
  "freeze_encoder_steps": integer(0),
  "corpus.extend_vocab": BOOLEAN,
  "objective": one_of(*OBJECTIVES),
  "rtd.generator_layers": integer(0),
  "rtd.generator_hidden_size": integer(0),
  "rtd.discriminator_weight": number(0, above=True),
  "rtd.embedding_sharing": one_of(*SHARINGS),
  "rtd.generator_init": one_of(*replaced_tokens.GENERATOR_INITS),
}


# Ranges that join keys: (keys, accepts their values, the range as the error states it).
_JOINT = (
  (("seed", "seeds"), lambda seed, seeds: seed + seeds - 1 <= INT32, f"seed + seeds - 1 ≤ {INT32:,}"),
  (
    ("decoding.beam_size", "eval_batch_size"),
    lambda beam, batch: beam <= batch,
    "a beam of at most eval_batch_size rows (each beam is as many rows as a batch holds sequences)",
  ),
  *((tuple(f"model.{name}" for name in names), accepts, says) for names, accepts, says in model_config.JOINT),
  (
    ("freeze_encoder_steps", "num_train_steps"),
    lambda frozen, steps: frozen <= steps,
    "at most num_train_steps (the frozen stage is the run's first steps)",
  ),
  (
    ("freeze_encoder_steps", "init"),
    lambda frozen, init: not frozen or bool(init),
    "0 without --config.init (a frozen encoder of random weights learns nothing)",
  ),
)


def _read(config, key: str):
  """config's value at a dotted key, or KeyError."""
  *parents, name = key.split(".")
  for parent in parents:
    config = config.get(parent) or {}
  return config[name]


def _floats(config, prefix: str = ""):
  """(dotted key, value) of every float in config, nested ones and those in lists included."""
  items = config.items() if hasattr(config, "items") else enumerate(config)
  for key, value in items:
    dotted = f"{prefix}{key}" if hasattr(config, "items") else f"{prefix.rstrip('.')}[{key}]"
    if isinstance(value, float):
      yield dotted, value
    elif hasattr(value, "items") or isinstance(value, (list, tuple)):
      yield from _floats(value, dotted + ".")


def check(config, allowed: dict[str, Allowed]) -> None:
  """Checks `config` (an ml_collections.ConfigDict) against `allowed` (a dotted key reads a nested one).

  Raises:
    ValueError: naming every key out of its range, every float that is not finite, and every joint
      range of keys in `allowed` that their values leave.
  """
  values = {}
  for key in allowed:
    try:
      values[key] = _read(config, key)
    except KeyError:
      continue
  refused = ranges.wrong(values, allowed, "config.")
  refused += [
    f"config.{key} is {value!r}; allowed: a finite number"
    for key, value in _floats(config)
    if not math.isfinite(value) and key not in allowed
  ]
  if not refused:
    for keys, accepts, says in _JOINT:
      if all(key in values for key in keys) and not accepts(*(values[key] for key in keys)):
        refused.append(", ".join(f"config.{k} is {values[k]!r}" for k in keys) + f"; allowed: {says}")
  if refused:
    raise ValueError("; ".join(refused))


def check_decided(config, decided: dict, by: str, typed=()) -> None:
  """Checks the config's values of what the data or a checkpoint decides.

  A differing value from a config file (a plan, as a --compile_only without data uses) is logged,
  and the decided value used.

  Args:
    decided: {dotted key: its value}.
    by: whose decision, for the message (the corpus's vocabulary, an init checkpoint's architecture).
    typed: the keys of the command line's --config.<key> overrides.

  Raises:
    ValueError: naming each typed flag whose value differs (the run would silently use another).
  """
  refused = []
  for key, value in decided.items():
    try:
      held = _read(config, key)
    except KeyError:
      continue
    if held is None or held == value:
      continue
    if key in typed:
      refused.append(
        f"--config.{key}={held!r}, but {by} decides it: {value!r}; leave --config.{key} out, or give {value!r}"
      )
    else:
      logging.info("config.%s is %r in the config; %s decides it: %r", key, held, by, value)
  if refused:
    raise ValueError("; ".join(refused))


def check_data(config, *, train_examples: int, longest: int, max_length: int) -> None:
  """Checks the keys whose values the task's data must honour.

  Args:
    train_examples: the train split's size (a batch no larger; a sort window of at most an epoch).
    longest: the most tokens of any featurized example (its layout may need more than a small
      max_length gives: [CLS], separators, a question and a window).
    max_length: the run's.

  Raises:
    ValueError: naming each key the data cannot honour.
  """
  wrong = []
  if longest > max_length:
    wrong.append(
      f"config.max_length is {config.max_length!r}: the task's examples need {longest} tokens; allowed: 0 "
      f"(the task's), or at least {longest}"
    )
  if config.batch_size > train_examples:
    wrong.append(
      f"config.batch_size is {config.batch_size!r}; allowed: at most the {train_examples:,} training examples"
    )
  else:
    epoch = train_examples // config.batch_size
    if config.sort_window > epoch:
      wrong.append(f"config.sort_window is {config.sort_window!r}; allowed: at most an epoch's {epoch:,} batches")
    if not config.num_train_steps and epoch * config.num_epochs > INT32:
      wrong.append(
        f"config.num_epochs is {config.num_epochs!r}; allowed: at most {INT32 // epoch:,} epochs of "
        f"{epoch:,} steps (a step counter is int32)"
      )
  if wrong:
    raise ValueError("; ".join(wrong))

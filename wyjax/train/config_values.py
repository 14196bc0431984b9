"""The values a run's config may hold, checked in one place, where a loop reads its config
(fine-tuning, pretraining and their --compile_only; the benchmark and the demo go through them):
a value out of its range is one error naming the key and the range, before anything is read,
built or written, not a ZeroDivisionError deep in the loop, nor a run that trains nonsense.

Three checks, each where what it needs is known: `check`, each key's range (a step's counters,
seeds and sizes fit int32; every float anywhere in the config is finite), and ranges that join
keys; `check_data`, the ranges the task's data sets (a batch no larger than the train split, a
sort window of at most an epoch, every feature within max_length), before anything is
compiled; memory, by the compiled steps themselves (wyjax.core.host_memory.admit).
"""
import dataclasses
import math
from collections.abc import Callable

from wyjax.models.config import ATTENTION_IMPLEMENTATIONS, DTYPES, REMAT_MODES

INT32 = 2**31 - 1  # a step counter, a seed and a size on the device are int32
# Padded lengths a fine-tuning run may ask for: each is a program compiled (seconds each on a CPU,
# up to a minute on a GPU), and more cannot pad less than one per multiple of 8 up to 512.
MAX_LENGTH_BUCKETS = 64
# A beam's length penalty ((5 + length) / 6) ** penalty overflows float32 past about 19 at 512 tokens.
MAX_LENGTH_PENALTY = 10.0


@dataclasses.dataclass(frozen=True)
class Allowed:
  accepts: Callable[[object], bool]
  says: str  # the range, as the error states it


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(low: int, high: int = INT32) -> Allowed:
  return Allowed(lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high,
                 f"an integer ≥ {low} and ≤ {high:,}")


def number(low: float, high: float | None = None, *, above: bool = False, below: bool = False) -> Allowed:
  """A finite number from `low` to `high`; `above` / `below` leave the bound itself out."""
  def accepts(v):
    return (_is_number(v) and (v > low if above else v >= low)
            and (high is None or (v < high if below else v <= high)))
  if high is None:
    return Allowed(accepts, f"a number {'>' if above else '≥'} {low:g}")
  return Allowed(accepts, f"a number in {'(' if above else '['}{low:g}, {high:g}{')' if below else ']'}")


def one_of(*choices, says: str = "") -> Allowed:
  return Allowed(lambda v: v in choices, says or "one of " + ", ".join(map(repr, choices)))


def or_none(allowed: Allowed, meaning: str) -> Allowed:
  return Allowed(lambda v: v is None or allowed.accepts(v), f"{allowed.says}, or None ({meaning})")


def _axis_rules(rules) -> bool:
  names = lambda axes: axes is None or isinstance(axes, str) or (
      isinstance(axes, (list, tuple)) and all(isinstance(a, str) for a in axes))
  return isinstance(rules, (list, tuple)) and all(
      isinstance(r, (list, tuple)) and len(r) == 2 and isinstance(r[0], str) and names(r[1]) for r in rules)


POSITIVE = number(0, above=True)
PROBABILITY = number(0, 1)
BOOLEAN = Allowed(lambda v: isinstance(v, bool), "True or False")
MESH_AXIS = Allowed(lambda v: v == -1 or integer(1).accepts(v), "an integer ≥ 1, or -1 (the devices left)")

_TRAINING = {  # what both loops read
    "seed": integer(0), "batch_size": integer(1), "num_train_steps": integer(0), "learning_rate": number(0),
    "weight_decay": number(0), "b1": number(0, 1, below=True), "b2": number(0, 1, below=True), "eps": POSITIVE,
    "max_grad_norm": POSITIVE, "dtype": one_of(*DTYPES), "remat": one_of(*REMAT_MODES),
    "attention": one_of(*ATTENTION_IMPLEMENTATIONS), "log_every": integer(1), "eval_every": integer(1),
    "max_nonfinite_steps": integer(1), "stop_check_every": integer(1), "scan_layers": BOOLEAN,
    "scan_unroll": integer(1), "mesh.data": MESH_AXIS, "mesh.fsdp": MESH_AXIS, "mesh.tensor": MESH_AXIS,
    "logical_axis_rules": Allowed(_axis_rules, "pairs (logical axis, mesh axis, axes or None), as "
                                  "wyjax.core.partitioning.LOGICAL_AXIS_RULES"),
}
# "best_dev": the evaluation with the best dev score (main metric); "last": the last evaluation,
# the end of training (as CLUE's classification scripts, which predict with the last model).
KEEP_CHECKPOINT = ("best_dev", "last")
FINETUNING = {
    **_TRAINING,
    "learning_rate": or_none(number(0), "chosen from the model's size"), "base_learning_rate": POSITIVE,
    "max_length": Allowed(lambda v: v == 0 or integer(8).accepts(v), "0 (the task's), or an integer ≥ 8 and ≤ "
                          f"{INT32:,}"),
    "eval_batch_size": integer(1), "sort_window": integer(1), "num_epochs": integer(1),
    "length_buckets": integer(0, MAX_LENGTH_BUCKETS),
    "init_weights": one_of("pretrained", "random", says="'pretrained' (init's weights) or 'random' (init's "
                           "architecture and vocabulary from random weights)"),
    "warmup_fraction": PROBABILITY, "patience": integer(0), "seeds": integer(1),
    "keep_checkpoint": one_of(*KEEP_CHECKPOINT, says="'best_dev' (the best dev score's parameters) or 'last' "
                              "(the last evaluation's)"),
    # Tasks' options (Task.options); a task without one has no such key.
    "decoding.beam_size": integer(1), "decoding.length_penalty": number(0, MAX_LENGTH_PENALTY),
    "decoding.max_ratio": POSITIVE,
    "decoding.max_extra": integer(0), "folds": integer(2), "joint_blanks": BOOLEAN, "train_on_lines": BOOLEAN,
    "dev_finetune": BOOLEAN, "score_chars": integer(0),
}
PRETRAINING = {
    **_TRAINING,
    "grad_accum_steps": integer(1), "warmup_steps": integer(0), "eval_batches": integer(1),
    "checkpoint_every": integer(1), "keep_checkpoints": integer(1), "peak_flops_per_device": number(0),
    "masking.rate": number(0, 1, above=True), "masking.max_ngram": integer(1), "masking.mask_prob": PROBABILITY,
    "masking.random_prob": PROBABILITY, "probe_examples": integer(2),
    "probes": Allowed(lambda v: isinstance(v, str), "TASK:FOLDER pairs joined by commas (wyjax.train.probes), or ''"),
}


# Ranges that join keys: (keys, accepts their values, the range as the error states it).
_JOINT = (
    (("seed", "seeds"), lambda seed, seeds: seed + seeds - 1 <= INT32, f"seed + seeds - 1 ≤ {INT32:,}"),
    (("decoding.beam_size", "eval_batch_size"), lambda beam, batch: beam <= batch,
     "a beam of at most eval_batch_size rows (each beam is as many rows as a batch holds sequences)"),
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
  """Raises ValueError naming every key of `allowed` whose value in `config` (an
  ml_collections.ConfigDict; a dotted key reads a nested one) is out of its range, every float
  that is not finite, and every joint range of keys in `allowed` that their values leave."""
  wrong = []
  for key, rule in allowed.items():
    try:
      value = _read(config, key)
    except KeyError:
      continue
    if not rule.accepts(value):
      wrong.append(f"config.{key} is {value!r}; allowed: {rule.says}")
  wrong += [f"config.{key} is {value!r}; allowed: a finite number" for key, value in _floats(config)
            if not math.isfinite(value) and key not in allowed]
  if not wrong:
    for keys, accepts, says in _JOINT:
      try:
        values = [_read(config, key) for key in keys]
      except KeyError:
        continue
      if all(key in allowed for key in keys) and not accepts(*values):
        wrong.append(", ".join(f"config.{k} is {v!r}" for k, v in zip(keys, values)) + f"; allowed: {says}")
  if wrong:
    raise ValueError("; ".join(wrong))


def check_data(config, *, train_examples: int, longest: int, max_length: int) -> None:
  """Raises ValueError naming the keys whose values the task's data cannot honour: `longest`,
  the most tokens of any featurized example (the task's own layout may need more than a small
  max_length gives: [CLS], separators, a question and a window), `max_length` the run's."""
  wrong = []
  if longest > max_length:
    wrong.append(f"config.max_length is {config.max_length!r}: the task's examples need {longest} tokens; allowed: 0 "
                 f"(the task's), or at least {longest}")
  if config.batch_size > train_examples:
    wrong.append(f"config.batch_size is {config.batch_size!r}; allowed: at most the {train_examples:,} training "
                 "examples")
  else:
    epoch = train_examples // config.batch_size
    if config.sort_window > epoch:
      wrong.append(f"config.sort_window is {config.sort_window!r}; allowed: at most an epoch's {epoch:,} batches")
    if not config.num_train_steps and epoch * config.num_epochs > INT32:
      wrong.append(f"config.num_epochs is {config.num_epochs!r}; allowed: at most {INT32 // epoch:,} epochs of "
                   f"{epoch:,} steps (a step counter is int32)")
  if wrong:
    raise ValueError("; ".join(wrong))

"""The values a run's config may hold, checked in one place, where a loop reads its config
(fine-tuning, pretraining and their --compile_only; the benchmark and the demo go through them):
a value out of its range is one error naming the key and the range, before anything is read,
built or written, not a ZeroDivisionError deep in the loop, nor a run that trains nonsense."""
import dataclasses
import math
from collections.abc import Callable

from wyjax.models.config import ATTENTION_IMPLEMENTATIONS, DTYPES, REMAT_MODES


@dataclasses.dataclass(frozen=True)
class Allowed:
  accepts: Callable[[object], bool]
  says: str  # the range, as the error states it


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(low: int) -> Allowed:
  return Allowed(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low, f"an integer ≥ {low}")


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


POSITIVE = number(0, above=True)
PROBABILITY = number(0, 1)

_TRAINING = {  # what both loops read
    "seed": integer(0), "batch_size": integer(1), "num_train_steps": integer(0), "learning_rate": number(0),
    "weight_decay": number(0), "b1": number(0, 1, below=True), "b2": number(0, 1, below=True), "eps": POSITIVE,
    "max_grad_norm": POSITIVE, "dtype": one_of(*DTYPES), "remat": one_of(*REMAT_MODES),
    "attention": one_of(*ATTENTION_IMPLEMENTATIONS), "log_every": integer(1), "eval_every": integer(1),
    "max_nonfinite_steps": integer(1), "stop_check_every": integer(1),
}
# "best_dev": the evaluation with the best dev score (main metric); "last": the last evaluation,
# the end of training (as CLUE's classification scripts, which predict with the last model).
KEEP_CHECKPOINT = ("best_dev", "last")
FINETUNING = {
    **_TRAINING,
    "learning_rate": or_none(number(0), "chosen from the model's size"), "base_learning_rate": POSITIVE,
    "max_length": integer(0), "eval_batch_size": integer(1), "sort_window": integer(1), "num_epochs": integer(1),
    "length_buckets": integer(0),
    "init_weights": one_of("pretrained", "random", says="'pretrained' (init's weights) or 'random' (init's "
                           "architecture and vocabulary from random weights)"),
    "warmup_fraction": PROBABILITY, "patience": integer(0), "seeds": integer(1),
    "keep_checkpoint": one_of(*KEEP_CHECKPOINT, says="'best_dev' (the best dev score's parameters) or 'last' "
                              "(the last evaluation's)"),
}
PRETRAINING = {
    **_TRAINING,
    "grad_accum_steps": integer(1), "warmup_steps": integer(0), "eval_batches": integer(1),
    "checkpoint_every": integer(1), "keep_checkpoints": integer(1), "peak_flops_per_device": number(0),
    "masking.rate": number(0, 1, above=True), "masking.max_ngram": integer(1), "masking.mask_prob": PROBABILITY,
    "masking.random_prob": PROBABILITY,
}


def check(config, allowed: dict[str, Allowed]) -> None:
  """Raises ValueError naming every key of `allowed` whose value in `config` (an
  ml_collections.ConfigDict; a dotted key reads a nested one) is out of its range."""
  wrong = []
  for key, rule in allowed.items():
    *parents, name = key.split(".")
    holder = config
    for parent in parents:
      holder = holder.get(parent) or {}
    if name in holder and not rule.accepts(holder[name]):
      wrong.append(f"config.{key} is {holder[name]!r}; allowed: {rule.says}")
  if wrong:
    raise ValueError("; ".join(wrong))

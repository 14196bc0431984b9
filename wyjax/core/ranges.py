"""A value's range, as one check and the words an error states it in.

config_values holds one for every key of a run's config, and EncoderConfig for every field of a model's.
"""

import dataclasses
import math
from collections.abc import Callable

INT32 = 2**31 - 1  # a step counter, a seed and a size on the device are int32


@dataclasses.dataclass(frozen=True)
class Allowed:
  accepts: Callable[[object], bool]
  says: str  # the range, as the error states it


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(low: int, high: int = INT32) -> Allowed:
  return Allowed(
    lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high, f"an integer ≥ {low} and ≤ {high:,}"
  )


def number(low: float, high: float | None = None, *, above: bool = False, below: bool = False) -> Allowed:
  """A finite number from `low` to `high`; `above` / `below` leave the bound itself out."""

  def accepts(v):
    return _is_number(v) and (v > low if above else v >= low) and (high is None or (v < high if below else v <= high))

  if high is None:
    return Allowed(accepts, f"a number {'>' if above else '≥'} {low:g}")
  return Allowed(accepts, f"a number in {'(' if above else '['}{low:g}, {high:g}{')' if below else ']'}")


def one_of(*choices, says: str = "") -> Allowed:
  return Allowed(lambda v: v in choices, says or "one of " + ", ".join(map(repr, choices)))


def or_none(allowed: Allowed, meaning: str) -> Allowed:
  return Allowed(lambda v: v is None or allowed.accepts(v), f"{allowed.says}, or None ({meaning})")


POSITIVE = number(0, above=True)
PROBABILITY = number(0, 1)
BOOLEAN = Allowed(lambda v: isinstance(v, bool), "True or False")


def wrong(values: dict, allowed: dict[str, Allowed], prefix: str = "") -> list[str]:
  """`prefix<key> is <value>; allowed: <range>` for each key of `values` out of its range in `allowed`."""
  return [
    f"{prefix}{key} is {value!r}; allowed: {allowed[key].says}"
    for key, value in values.items()
    if key in allowed and not allowed[key].accepts(value)
  ]

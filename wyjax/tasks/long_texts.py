"""Character tagging of a text of any length (a whole book), in overlapping windows the model can take.

A window is [CLS] + a run of `room` character tokens + [SEP], so a text that fits is its own single window, as the
task's featurize gives it. Each token's logits come from the one window where it has most context.
"""

from collections.abc import Iterable

import numpy as np


def window_starts(tokens: int, room: int) -> list[int]:
  """Where windows of `room` character tokens start: half a window apart, the last one ending at the text's end."""
  if tokens <= room:
    return [0]
  stride = max(room // 2, 1)
  return list(range(0, tokens - room, stride)) + [tokens - room]


def cut(features: dict, start: int, room: int) -> dict:
  """The window of character tokens [start, start + room) of a text's features; [CLS] and [SEP] kept."""
  length = features["input_ids"].shape[-1]
  keep = np.r_[0, np.arange(1 + start, min(1 + start + room, length - 1)), length - 1]
  return {k: v[keep] if np.ndim(v) == 1 and len(v) == length else v for k, v in features.items()}


def owners(tokens: int, starts: list[int], room: int) -> np.ndarray:
  """For each character token, the window where its nearer window edge is farthest (the earlier among equals).

  A text's own ends are no edge.
  """
  best = np.full(tokens, -1)
  best_context = np.full(tokens, -1.0)
  for window, start in enumerate(starts):
    positions = np.arange(start, min(start + room, tokens))
    left = positions - start if start > 0 else np.full(len(positions), np.inf)
    right = start + room - 1 - positions if start + room < tokens else np.full(len(positions), np.inf)
    context = np.minimum(left, right)
    better = context > best_context[positions]
    best[positions[better]] = window
    best_context[positions[better]] = context[better]
  return best


def stitch(window_logits: Iterable[np.ndarray], starts: list[int], room: int, tokens: int) -> np.ndarray:
  """The whole text's [tokens + 2, labels] logits, each character token's row from its owner window.

  [CLS] and [SEP] rows are zero. `window_logits` (one per start, in order) may be a generator: each window's rows
  are taken as it comes, so the windows' logits are never all held at once.
  """
  owner = owners(tokens, starts, room)
  logits = None
  for window, (start, rows) in enumerate(zip(starts, window_logits, strict=True)):
    if logits is None:
      logits = np.zeros((tokens + 2, rows.shape[-1]), np.float32)
    positions = start + np.flatnonzero(owner[start : start + room] == window)
    logits[1 + positions] = rows[1 + positions - start]
  return logits

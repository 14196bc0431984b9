"""Generated text for a generating task's sources: a TaskModel's prefix LM decodes them in batches."""

import logging

import numpy as np

from wyjax.core import guards
from wyjax.models import prefix_lm


def translate(model, params, examples, beam_size: int) -> list[str]:
  """Generated target text for each example's source, by `model` (a TaskModel) with the config's `decoding`.

  The source alone is encoded: only one longer than max_length − 4 (room for one target token)
  loses its tail, with a warning.
  """
  room = model.max_length - 4
  sources = [model.tokenizer.encode_chars(e.source)[0] for e in examples]
  cut = sum(max(0, len(s) - room) for s in sources)
  if cut:
    logging.warning("sources longer than %d tokens lose %d characters before decoding", room, cut)
  decoding, batch_size = model.config.decoding, max(1, model.config.eval_batch_size // beam_size)
  order = np.argsort([min(len(s), room) for s in sources], kind="stable")  # prefix_lm.translate's batches
  targets = [None] * len(sources)
  for count, start in enumerate(range(0, len(order), batch_size)):  # one at a time: a stop is honoured between
    guards.honour_stop(count)
    indices = order[start : start + batch_size]
    batch = prefix_lm.translate(
      model.module,
      params,
      model.tokenizer,
      [sources[i][:room] for i in indices],
      max_length=model.max_length,
      max_ratio=decoding.max_ratio,
      max_extra=decoding.max_extra,
      batch_size=batch_size,
      beam_size=beam_size,
      length_penalty=decoding.length_penalty,
    )
    for i, target in zip(indices, batch):
      targets[i] = target
  return [model.tokenizer.decode(t) for t in targets]

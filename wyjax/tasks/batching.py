"""Batches of task features through grain, padded to a few bucket lengths.

- Each batch is padded to the smallest bucket that holds its longest sequence: a task compiles at most one step
  per bucket. Buckets are fitted to the batches a run will draw (`fitted_buckets`).
- Training batches can hold examples close in length (sorted within windows of shuffled examples).
- Batches always have `batch_size` rows: the evaluation's last batch is filled with padding rows of weight 0.
"""

import functools
import sys

import grain
import numpy as np

from wyjax.tasks.tagging import IGNORE

# Training buckets are fitted to this many batches from the start of the run's stream.
FITTED_BATCHES = 512
# Unless a count is asked for, a bucket is added only while it pads at least this share fewer
# tokens than one fewer: each is a program compiled, which on a CPU takes seconds (3.5 s for the
# demo model's fine-tuning step on 2 cores, 0.5-1 s to load from the compilation cache).
MIN_SAVING = 0.1
# Feature → padding value ('label' and 'labels' padding is ignored by the loss and metrics).
_PAD_VALUES = {"labels": IGNORE, "label": IGNORE, "char_index": -1}


def buckets(max_length: int) -> tuple[int, ...]:
  """32, 48, 64, 96, 128, 192, 256, 384, 512, … below max_length, then max_length.

  1 and 1.5 times each power of two: at most ~2 log2(max_length) shapes, ≤ 50% padding.
  """
  out, length = [], 32
  while length < max_length:
    out.append(length)
    power = 1 << (length.bit_length() - 1)
    length = length + power // 2 if length == power else 2 * power
  return (*out, max_length)


def fitted_buckets(batch_maxima: np.ndarray, max_length: int, count: int | None = None) -> tuple[int, ...]:
  """`count` lengths that pad these batches least, then max_length for any longer batch.

  The lengths are multiples of 8, at most max_length. Without a count: as many as each pads MIN_SAVING fewer tokens
  than one fewer, and at most as many as `buckets` would pad them to.
  """
  candidates, batches = np.unique(np.minimum(-(-np.asarray(batch_maxima) // 8) * 8, max_length), return_counts=True)
  covered = np.cumsum(batches)  # batches at or below each candidate
  most = len(candidates) if count is None else min(count, len(candidates))  # more lengths than candidates pad no less
  if count is None:
    geometric = buckets(max_length)
    most = min(most, len({next(b for b in geometric if b >= m) for m in candidates}))
  # plans[j]: (padded tokens, lengths) of the best plan for the batches up to candidate j, ending at it.
  plans = [(int(length * n), (int(length),)) for length, n in zip(candidates, covered)]
  for _ in range(most - 1):
    more = _one_more_length(plans, candidates, covered)
    if count is None and more[-1][0] > (1 - MIN_SAVING) * plans[-1][0]:
      break
    plans = more
  return tuple(sorted({*plans[-1][1], max_length}))


def _one_more_length(plans: list, candidates: np.ndarray, covered: np.ndarray) -> list:
  """The best plans of one length more: plan j, or plan i < j then candidate j, whichever pads less.

  The smaller lengths win a tie. The sums are taken for every (i, j) at once; only ties are compared as tuples.
  """
  tokens = np.array([plan[0] for plan in plans])
  extended = tokens[:, None] + candidates[None, :] * (covered[None, :] - covered[:, None])  # [i, j]
  extended[np.tril_indices(len(plans))] = np.iinfo(extended.dtype).max  # only i < j
  best = extended.min(axis=0)
  return [
    min(
      [plans[j]]
      + [
        (int(best[j]), plans[i][1] + (int(candidates[j]),))
        for i in (np.flatnonzero(extended[:, j] == best[j]) if j else ())
      ]
    )
    for j in range(len(plans))
  ]


def _pad_to(array: np.ndarray, length: int, value) -> np.ndarray:
  widths = [(0, 0)] * (array.ndim - 1) + [(0, length - array.shape[-1])]
  return np.pad(array, widths, constant_values=value)


def _pad_rows(array: np.ndarray, rows: int, value) -> np.ndarray:
  return np.pad(array, [(0, rows - array.shape[0])] + [(0, 0)] * (array.ndim - 1), constant_values=value)


def collate(items: list[dict], *, batch_size: int, lengths: tuple[int, ...], pad_id: int) -> dict:
  """Stacks items, pads the sequence (last) axis to a bucket and the batch to batch_size.

  - 'label' is per example (a scalar, or one per row: CCPM Cls's pairs, a span task's windows), never padded
    along the sequence.
  - Items of a varying number of rows (C3's 2 to 4 choices) get padding rows: all padding tokens, label IGNORE.
  - Adds 'weight': 1 for a real row, 0 for a padding row.
  """
  longest = max(item["input_ids"].shape[-1] for item in items)
  length = next((b for b in lengths if b >= longest), None)
  if length is None:
    raise ValueError(f"a sequence of {longest} tokens is longer than the largest bucket {lengths[-1]}")
  has_rows = items[0]["input_ids"].ndim == 2
  most_rows = max(item["input_ids"].shape[0] for item in items) if has_rows else 0
  batch = {}
  for key in items[0]:
    value = pad_id if key == "input_ids" else _PAD_VALUES.get(key, 0)
    rows = [_pad_to(item[key], length, value) if item[key].ndim and key != "label" else item[key] for item in items]
    if has_rows:
      rows = [_pad_rows(r, most_rows, value) if r.ndim else r for r in rows]
    filler = np.full_like(rows[0], value)
    batch[key] = np.stack(rows + [filler] * (batch_size - len(rows)))
  batch["weight"] = (np.arange(batch_size) < len(items)).astype(np.float32)
  return batch


class LengthSortedBatches(grain.MapDataset):
  """Batch i (a list of example indices) of an endless stream of shuffled examples, reshuffled each epoch.

  `sort_window` 1: each batch's examples as the shuffle drew them. Above 1, each window of that many batches' worth
  is sorted by length, then cut into batches that come in shuffled order: a batch pads little, but its examples are
  alike (docs/finetuning.md).
  """

  def __init__(self, lengths: np.ndarray, *, batch_size: int, sort_window: int, seed: int):
    super().__init__()
    self._lengths, self._batch_size, self._sort_window, self._seed = lengths, batch_size, sort_window, seed

  def __len__(self) -> int:
    return sys.maxsize

  def __getitem__(self, index: int) -> np.ndarray:
    window, position = divmod(index, self._sort_window)
    return self._window(window)[position]

  @functools.lru_cache(maxsize=2)  # noqa: B019 (a class-wide cache of 2: it keeps at most two datasets alive)
  def _epoch(self, epoch: int) -> np.ndarray:
    return np.random.default_rng([self._seed, epoch]).permutation(len(self._lengths))

  @functools.lru_cache(maxsize=2)  # noqa: B019 (as _epoch's)
  def _window(self, window: int) -> np.ndarray:
    count, size = len(self._lengths), self._batch_size * self._sort_window
    start, stop = window * size, (window + 1) * size
    stream = np.concatenate([self._epoch(epoch) for epoch in range(start // count, (stop - 1) // count + 1)])
    examples = stream[start % count :][:size]
    batches = examples[np.argsort(self._lengths[examples], kind="stable")].reshape(self._sort_window, -1)
    return np.random.default_rng([self._seed, window, count]).permutation(batches)


def train_lengths(
  features: list[dict],
  *,
  batch_size: int,
  max_length: int,
  seed: int,
  sort_window: int,
  bucket_count: int | None = None,
) -> tuple[int, ...]:
  """The padded lengths of train_batches' stream: `fitted_buckets` of its first FITTED_BATCHES batches.

  bucket_count of them, or as many as pay.
  """
  lengths = np.array([f["input_ids"].shape[-1] for f in features])
  ds = LengthSortedBatches(lengths, batch_size=batch_size, sort_window=sort_window, seed=seed)
  return fitted_buckets([lengths[ds[i]].max() for i in range(FITTED_BATCHES)], max_length, bucket_count)


def train_batches(
  features: list[dict],
  *,
  batch_size: int,
  max_length: int,
  pad_id: int,
  seed: int,
  sort_window: int,
  bucket_count: int | None = None,
):
  """Endless iterator of full batches (LengthSortedBatches) through grain, padded to `train_lengths`."""
  if len(features) < batch_size:
    raise ValueError(f"{len(features)} training examples are fewer than one batch of {batch_size}")
  lengths = np.array([f["input_ids"].shape[-1] for f in features])
  bucket_lengths = train_lengths(
    features,
    batch_size=batch_size,
    max_length=max_length,
    seed=seed,
    sort_window=sort_window,
    bucket_count=bucket_count,
  )
  ds = LengthSortedBatches(lengths, batch_size=batch_size, sort_window=sort_window, seed=seed)
  batch_fn = functools.partial(collate, batch_size=batch_size, lengths=bucket_lengths, pad_id=pad_id)
  ds = ds.map(lambda indices: batch_fn([features[i] for i in indices]))
  return iter(ds.to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=8)))


def eval_lengths(
  features: list[dict], *, batch_size: int, max_length: int, bucket_count: int | None = None
) -> tuple[int, ...]:
  """The padded lengths of eval_batches: `fitted_buckets` of its batches, drawn in order of length."""
  lengths = np.sort([f["input_ids"].shape[-1] for f in features])
  maxima = np.append(lengths[batch_size - 1 :: batch_size], lengths[-1])  # each batch's longest
  return fitted_buckets(maxima, max_length, bucket_count)


def eval_batches(
  features: list[dict], *, batch_size: int, max_length: int, pad_id: int, bucket_count: int | None = None
):
  """(indices into features, batch) in order of length, so each batch pads little: to `eval_lengths`."""
  order = np.argsort([f["input_ids"].shape[-1] for f in features], kind="stable")
  bucket_lengths = eval_lengths(features, batch_size=batch_size, max_length=max_length, bucket_count=bucket_count)
  for start in range(0, len(order), batch_size):
    indices = order[start : start + batch_size]
    yield indices, collate([features[i] for i in indices], batch_size=batch_size, lengths=bucket_lengths, pad_id=pad_id)


def largest_batch(features: list[dict], *, batch_size: int, lengths: tuple[int, ...], pad_id: int) -> dict:
  """The largest batch `features` padded to `lengths` can give: the largest program a run compiles.

  The most rows (options, windows) of any feature, at the bucket of the longest. Its rows are one row repeated, a
  view that takes no memory.
  """
  most_rows = max(
    range(len(features)), key=lambda i: features[i]["input_ids"].shape[0] if features[i]["input_ids"].ndim == 2 else 0
  )
  longest = max(range(len(features)), key=lambda i: features[i]["input_ids"].shape[-1])
  items = [features[i] for i in sorted({most_rows, longest})]
  batch = collate(items, batch_size=len(items), lengths=lengths, pad_id=pad_id)
  return {key: np.broadcast_to(value[:1], (batch_size, *value.shape[1:])) for key, value in batch.items()}

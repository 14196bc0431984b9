"""grain input pipeline over prepared ArrayRecord shards.

Each process reads only its rows of every global batch (process p of n takes per-process batches p,
p+n, p+2n…), so global batch s holds the same sequences, in the same order, whatever the number of
processes. A corpus in a bucket is read from a local copy (wyjax.core.storage.staged).
"""

import grain
import numpy as np
from etils import epath

from wyjax.core import storage
from wyjax.data import prepare


def _source(data_dir, split: str):
  manifest = prepare.read_manifest(data_dir)
  names = manifest["shards"][split]
  if not names:
    raise ValueError(f"{data_dir}: the {split} split is empty")
  if not storage.is_local(data_dir):  # ArrayRecord reads local files
    data_dir = storage.staged(data_dir, names, storage.cache_dir() / "staged" / manifest["fingerprint"][:16])
  paths = [str(epath.Path(data_dir) / n) for n in names]
  dtype = np.dtype(manifest["dtype"])
  return grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths)), dtype


def changed_shards(data_dir, manifest: dict) -> list[str]:
  """The shards of a prepared corpus whose bytes no longer match its manifest's SHA-256s.

  None for a manifest that records no SHA-256 (built before wyjax recorded them).
  """
  return [
    name
    for name, sha256 in manifest.get("shard_sha256", {}).items()
    if storage.file_sha256(epath.Path(data_dir) / name) != sha256
  ]


def _decode(dtype):
  return lambda record: np.frombuffer(record, dtype).astype(np.int32)


def train_dataset(
  data_dir, *, global_batch_size: int, seed: int, process_index: int = 0, process_count: int = 1
) -> grain.IterDataset:
  """Endless, reshuffled each epoch; yields this process's [batch / processes, length] rows."""
  if global_batch_size % process_count:
    raise ValueError(f"global batch {global_batch_size} does not split over {process_count} processes")
  ds, dtype = _source(data_dir, "train")
  per_process = global_batch_size // process_count
  ds = ds.seed(seed).shuffle().repeat(None).map(_decode(dtype)).batch(per_process, drop_remainder=True)
  return ds[process_index::process_count].to_iter_dataset()


def eval_batches(
  data_dir, *, global_batch_size: int, num_batches: int, process_index: int = 0, process_count: int = 1
) -> list[np.ndarray]:
  """The first validation sequences, unshuffled: the same batches at every evaluation."""
  ds, dtype = _source(data_dir, "valid")
  per_process = global_batch_size // process_count
  available = len(ds) // global_batch_size
  if available == 0:
    raise ValueError(
      f"{data_dir}: {len(ds)} validation sequences are fewer than one global batch of {global_batch_size}"
    )
  ds = ds.map(_decode(dtype)).batch(per_process, drop_remainder=True)
  return [ds[b * process_count + process_index] for b in range(min(num_batches, available))]

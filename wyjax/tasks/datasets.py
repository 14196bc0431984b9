"""Task files as TFDS datasets (ArrayRecord, no TensorFlow), read back through grain.

The builder reads a task folder with its Task's strict reader (a malformed line fails the build with file:line).
Records keep the example's typed fields, its line number and the file's order. Builds are cached under
<cache>/tfds, keyed by the files' SHA-256.
"""

import contextlib
import dataclasses
import functools
import hashlib
import io
import logging
import os
import pathlib
import shutil
import typing

import grain
import numpy as np
import tensorflow_datasets as tfds

from wyjax.core import guards, storage
from wyjax.core.storage import cache_dir
from wyjax.tasks.task import Files

SPLITS = ("train", "dev", "test")


_SPAN = {"start": np.int32, "end": np.int32, "type": tfds.features.Text()}


def _feature(annotation):
  """The TFDS feature that stores one example field of this type."""
  if annotation is str:
    return tfds.features.Text()
  if annotation in (int, bool):
    return tfds.features.Scalar(np.int32 if annotation is int else np.bool_)
  if annotation == int | None:
    return tfds.features.Scalar(np.int32)  # None stored as -1
  if annotation == tuple[str, ...]:
    return tfds.features.Sequence(tfds.features.Text())
  if annotation == tuple[int, int]:
    return tfds.features.Tensor(shape=(2,), dtype=np.int32)
  if annotation == tuple[tuple[int, int, str], ...]:
    return tfds.features.Sequence(_SPAN)
  raise TypeError(f"no TFDS feature for {annotation}")


@functools.cache  # asked once per record when building and reading
def _fields(example_type) -> dict:
  return typing.get_type_hints(example_type)


def _to_record(example) -> dict:
  record = dataclasses.asdict(example)
  if "spans" in record:
    record["spans"] = [dict(zip(("start", "end", "type"), span)) for span in example.spans]
  for name, annotation in _fields(type(example)).items():
    if annotation == int | None and record[name] is None:
      record[name] = -1
  return record


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _from_record(example_type, record: dict):
  values = {}
  for name, annotation in _fields(example_type).items():
    value = record[name]
    if annotation is str:
      value = _text(value)
    elif annotation is int:
      value = int(value)
    elif annotation is bool:
      value = bool(value)
    elif annotation == int | None:
      value = None if int(value) < 0 else int(value)
    elif annotation == tuple[str, ...]:
      value = tuple(_text(v) for v in value)
    elif annotation == tuple[int, int]:
      value = tuple(int(v) for v in value)
    else:  # spans: a dict of parallel lists
      value = tuple((int(s), int(e), _text(t)) for s, e, t in zip(value["start"], value["end"], value["type"]))
    values[name] = value
  return example_type(**values)


class TaskFiles(tfds.core.GeneratorBasedBuilder):
  """One config per folder format (a Task's `files`); the manual directory is the folder."""

  # 1.1.0: RelationExample.given_predicate; 1.2.0: NerExample.tags; 1.3.0: CmrcExample.unlocated
  VERSION = tfds.core.Version("1.3.0")
  MANUAL_DOWNLOAD_INSTRUCTIONS = "Pass the task folder (its benchmark's files as released) as manual_dir."

  def __init__(self, files: Files, **kwargs):
    self.files = files
    super().__init__(config=tfds.core.BuilderConfig(name=files.name), **kwargs)

  def _info(self):
    fields = _fields(self.files.example_type)
    return tfds.core.DatasetInfo(
      builder=self,
      features=tfds.features.FeaturesDict({k: _feature(v) for k, v in fields.items()}),
      disable_shuffling=True,
    )  # file order: predictions are written in the order of the file

  def _split_generators(self, dl_manager):
    generators = {}
    for split in SPLITS:
      examples = self.files.read_split(dl_manager.manual_dir, split)
      if examples:
        generators[split] = self._generate_examples(examples)
      elif examples is not None:
        logging.warning("%s has no examples: no %s split", self.files.split_files(dl_manager.manual_dir, split), split)
    return generators

  def _generate_examples(self, examples):
    for index, example in enumerate(examples):  # line numbers repeat across AC-EVAL's subject files
      yield index, _to_record(example)


def _fingerprint(data_dir: pathlib.Path, files: Files) -> str:
  digest = hashlib.sha256()
  for split in SPLITS:
    for path in files.split_files(data_dir, split):
      digest.update(path.name.encode())
      digest.update(hashlib.sha256(path.read_bytes()).digest())
  return digest.hexdigest()[:16]


def _build_dir(files: Files, data_dir: pathlib.Path) -> pathlib.Path:
  """Where the folder's build is cached, keyed by its files' SHA-256."""
  if not data_dir.is_dir():
    raise FileNotFoundError(f"{data_dir}: no such task folder")
  if not files.split_files(data_dir, "train"):
    raise FileNotFoundError(f"{data_dir}: no {files.train_files} for {files.name}")
  return cache_dir() / "tfds" / f"{files.name}-{_fingerprint(data_dir, files)}"


def builder(files: Files, data_dir) -> TaskFiles:
  """The folder's builder, prepared (built once per distinct set of files)."""
  return _prepared(files, pathlib.Path(data_dir), _build_dir(files, pathlib.Path(data_dir)))


def _prepared(files: Files, data_dir: pathlib.Path, tfds_dir: pathlib.Path) -> TaskFiles:
  result = TaskFiles(files, data_dir=str(tfds_dir), file_format="array_record")
  if not result.is_prepared():
    logging.info("building TFDS %s from %s into %s", files.name, data_dir, tfds_dir)
    tfds.disable_progress_bar()
    with contextlib.redirect_stdout(io.StringIO()), _no_room_named(tfds_dir):  # TFDS prints where it builds
      result.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(data_dir)))
  return result


@contextlib.contextmanager
def _no_room_named(tfds_dir: pathlib.Path):
  """A full disk during a build as one line naming the cache.

  ArrayRecord's writer reports it as a RuntimeError holding the system's message; TFDS removes its incomplete
  folder.
  """
  try:
    yield
  except (OSError, RuntimeError) as e:
    reason = next((os.strerror(n) for n in storage.NO_ROOM if os.strerror(n) in str(e)), None)
    if reason is None:
      raise
    raise guards.RunError(
      f"{tfds_dir}: {reason} while building the dataset; free space there (or set WYJAX_CACHE "
      "to a disk with room) and rerun"
    ) from e


def _read(files: Files, data_dir: pathlib.Path, tfds_dir: pathlib.Path) -> dict[str, list]:
  ds_builder = _prepared(files, data_dir, tfds_dir)
  # In order, in this thread: grain's default read-ahead (16 threads, 500 records) made reading
  # TLC's 4,280 lines 4× slower (0.9 s instead of 0.25 on 2 cores).
  in_order = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)
  source = lambda split: grain.MapDataset.source(ds_builder.as_data_source(split))
  return {
    split: list(source(split).map(lambda record: _from_record(files.example_type, record)).to_iter_dataset(in_order))
    for split in ds_builder.info.splits
  }


def load_splits(files: Files, data_dir) -> dict[str, list]:
  """{split: examples} for the splits present (test may be absent), read through grain.

  A split whose files hold no example is an error, not an absent split. A cached build that cannot be read (a
  truncated shard, a damaged dataset_info.json) is rebuilt, once.
  """
  data_dir = pathlib.Path(data_dir)
  tfds_dir = _build_dir(files, data_dir)
  cached = any(tfds_dir.glob("*/*/*/dataset_info.json"))  # a finished build: <builder>/<config>/<version>/
  try:
    out = _read(files, data_dir, tfds_dir)
  except Exception as e:  # pylint: disable=broad-except: whatever a damaged cache raises, a rebuild mends
    if not cached or isinstance(e, guards.RunError):
      raise
    logging.warning("%s cannot be read (%s: %s); rebuilding it", tfds_dir, type(e).__name__, _first_line(e))
    shutil.rmtree(tfds_dir)
    out = _read(files, data_dir, tfds_dir)
  for split in SPLITS:
    if not out.get(split) and files.split_files(data_dir, split):
      raise ValueError(f"{file_of(files, data_dir, split)}: the {split} split has no examples (empty file)")
  return {split: out[split] for split in SPLITS if split in out}


def _first_line(error: Exception) -> str:
  return (str(error).strip().splitlines() or [""])[0]


def file_of(files: Files, data_dir, split: str) -> pathlib.Path | None:
  """The split's (first) file, for messages; None when the split is absent."""
  paths = files.split_files(data_dir, split)
  return paths[0] if paths else None

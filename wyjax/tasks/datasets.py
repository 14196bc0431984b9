"""WYWEB task files as TFDS datasets (ArrayRecord, no TensorFlow), read back through grain.

The builder reads a task folder exactly as WYWEB publishes it (its manual directory) with the
strict readers of `wyweb.py`, so a malformed line fails the build with `file:line`. Records
keep the example's fields, typed, and its line number; file order is kept. Builds are cached
under <cache>/tfds keyed by the files' SHA-256, so edited files are rebuilt and unchanged ones
are read from disk.
"""
import dataclasses
import hashlib
import logging
import pathlib
import typing

import grain
import numpy as np
import tensorflow_datasets as tfds

from wyjax.data.corpus import cache_dir
from wyjax.tasks import files, wyweb

SPLITS = ("train", "dev", "test")
EXAMPLE_TYPES = {
    "tlc": wyweb.TlcExample, "gjc": wyweb.GjcExample, "punc": wyweb.PuncExample, "glner": wyweb.GlnerExample,
    "fspc": wyweb.FspcExample, "xuci": wyweb.XuciExample, "irc": wyweb.ChoiceExample,
    "wywrc": wyweb.ChoiceExample, "wywmt": wyweb.MtExample,
}
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


def _fields(example_type) -> dict:
  return typing.get_type_hints(example_type)


def _to_record(example) -> dict:
  record = dataclasses.asdict(example)
  if isinstance(example, wyweb.GlnerExample):
    record["spans"] = [dict(zip(("start", "end", "type"), span)) for span in example.spans]
  if isinstance(example, wyweb.ChoiceExample) and example.kind is None:
    record["kind"] = -1
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
    else:  # GLNER spans: a dict of parallel lists
      value = tuple((int(s), int(e), _text(t)) for s, e, t in zip(value["start"], value["end"], value["type"]))
    values[name] = value
  return example_type(**values)


class Wyweb(tfds.core.GeneratorBasedBuilder):
  """One config per WYWEB task; the manual directory is the task folder."""

  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=task) for task in EXAMPLE_TYPES]
  MANUAL_DOWNLOAD_INSTRUCTIONS = "Pass the task folder (train/dev/test files in WYWEB formats) as manual_dir."

  def _info(self):
    fields = _fields(EXAMPLE_TYPES[self.builder_config.name])
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({k: _feature(v) for k, v in fields.items()}),
        homepage="https://github.com/baudzhou/WYWEB",
        disable_shuffling=True)  # file order: predictions are written in the order of the file

  def _split_generators(self, dl_manager):
    task = self.builder_config.name
    generators = {}
    for split in SPLITS:
      path = files.find_split(dl_manager.manual_dir, split, wyweb.EXTENSIONS[task])
      examples = None if path is None else wyweb.READERS[task](path)
      if examples:
        generators[split] = self._generate_examples(examples)
      elif path is not None:
        logging.warning("%s has no examples: no %s split", path, split)
    return generators

  def _generate_examples(self, examples):
    for example in examples:
      yield example.line, _to_record(example)


def _fingerprint(data_dir: pathlib.Path, task: str) -> str:
  digest = hashlib.sha256()
  for split in SPLITS:
    path = files.find_split(data_dir, split, wyweb.EXTENSIONS[task])
    if path is not None:
      digest.update(path.name.encode())
      digest.update(hashlib.sha256(path.read_bytes()).digest())
  return digest.hexdigest()[:16]


def builder(task: str, data_dir) -> Wyweb:
  """The task's builder, prepared (built once per distinct set of files)."""
  data_dir = pathlib.Path(data_dir)
  if task not in EXAMPLE_TYPES:
    raise ValueError(f"unknown task {task!r}; WYWEB tasks are {sorted(EXAMPLE_TYPES)}")
  if not data_dir.is_dir():
    raise FileNotFoundError(f"{data_dir}: no such task folder")
  if files.find_split(data_dir, "train", wyweb.EXTENSIONS[task]) is None:
    raise FileNotFoundError(f"{data_dir}: no train.{{{','.join(wyweb.EXTENSIONS[task])}}} for task {task}")
  tfds_dir = cache_dir() / "tfds" / f"{task}-{_fingerprint(data_dir, task)}"
  result = Wyweb(config=task, data_dir=str(tfds_dir), file_format="array_record")
  if not result.is_prepared():
    logging.info("building TFDS %s from %s into %s", task, data_dir, tfds_dir)
    tfds.disable_progress_bar()
    result.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(data_dir)))
  return result


def load_splits(task: str, data_dir) -> dict[str, list]:
  """{split: examples} for the splits present (test may be absent), read through grain."""
  ds_builder = builder(task, data_dir)
  example_type = EXAMPLE_TYPES[task]
  out = {}
  for split in ds_builder.info.splits:
    source = grain.MapDataset.source(ds_builder.as_data_source(split))
    out[split] = list(source.map(lambda record: _from_record(example_type, record)))
  return {split: out[split] for split in SPLITS if split in out}


def file_of(task: str, data_dir, split: str) -> pathlib.Path | None:
  return files.find_split(data_dir, split, wyweb.EXTENSIONS[task])


"""Task files as TFDS datasets (ArrayRecord, no TensorFlow), read back through grain.

The builder reads a task folder exactly as its benchmark publishes it (its manual directory)
with the strict readers of wyweb.py, ccpm.py, cclue.py and aceval.py, so a malformed line fails
the build with `file:line`. Records keep the example's fields, typed, and its line number; file
order is kept. Builds are cached under <cache>/tfds keyed by the files' SHA-256, so edited files
are rebuilt and unchanged ones are read from disk.
"""
import contextlib
import dataclasses
import functools
import hashlib
import io
import logging
import pathlib
import typing
from collections.abc import Callable

import grain
import numpy as np
import tensorflow_datasets as tfds

from wyjax.core.storage import cache_dir
from wyjax.tasks import aceval, cclue, ccpm, clue, wyweb

SPLITS = ("train", "dev", "test")
EXAMPLE_TYPES = {
    "tlc": wyweb.TlcExample, "gjc": wyweb.GjcExample, "punc": wyweb.PuncExample, "glner": wyweb.GlnerExample,
    "fspc": wyweb.FspcExample, "xuci": wyweb.XuciExample, "irc": wyweb.ChoiceExample,
    "wywrc": wyweb.ChoiceExample, "wywmt": wyweb.MtExample, "ccpm": ccpm.CcpmExample,
    "cclue_ner": cclue.NerExample, "cclue_re": cclue.RelationExample, "aceval": aceval.Question,
    **clue.EXAMPLE_TYPES,
}
# How each dataset's train split is named in its folder (for errors).
TRAIN_FILES = {**{task: f"train.{{{','.join(ext)}}}" for task, ext in wyweb.EXTENSIONS.items()},
               "ccpm": "train.jsonl", "cclue_ner": "source.txt and target.txt (or train.txt and train-label.txt)",
               "cclue_re": "train_data.json", "aceval": "dev/<subject>.csv",
               **{task: "train.json" for task in clue.FORMATS}, "cmrc2018": "cmrc2018_train.json",
               "chid": "train.json (and train_answer.json)", "c3": "d-train.json and m-train.json"}


def _format(dataset: str) -> tuple[Callable, Callable]:
  """(split_files, read_split) of the dataset's format module, both taking (data_dir, split)."""
  if dataset in wyweb.EXTENSIONS:
    return functools.partial(wyweb.split_files, dataset), functools.partial(wyweb.read_split, dataset)
  if dataset in clue.EXAMPLE_TYPES:
    return functools.partial(clue.split_files, dataset), functools.partial(clue.read_split, dataset)
  if dataset in ("ccpm", "aceval"):
    module = ccpm if dataset == "ccpm" else aceval
    return module.split_files, module.read_split
  return functools.partial(cclue.split_files, dataset), functools.partial(cclue.read_split, dataset)


def split_files(dataset: str, data_dir, split: str) -> list[pathlib.Path]:
  """The files that hold one split of a dataset folder (none: the split is absent)."""
  return _format(dataset)[0](data_dir, split)


def read_split(dataset: str, data_dir, split: str) -> list | None:
  """The split's examples straight from the files (no TFDS), or None when absent."""
  return _format(dataset)[1](data_dir, split)


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
  """One config per dataset; the manual directory is the dataset's folder."""

  VERSION = tfds.core.Version("1.1.0")  # 1.1.0: RelationExample.given_predicate
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=task) for task in EXAMPLE_TYPES]
  MANUAL_DOWNLOAD_INSTRUCTIONS = "Pass the task folder (train/dev/test files in WYWEB formats) as manual_dir."

  def _info(self):
    fields = _fields(EXAMPLE_TYPES[self.builder_config.name])
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({k: _feature(v) for k, v in fields.items()}),
        disable_shuffling=True)  # file order: predictions are written in the order of the file

  def _split_generators(self, dl_manager):
    dataset = self.builder_config.name
    generators = {}
    for split in SPLITS:
      examples = read_split(dataset, dl_manager.manual_dir, split)
      if examples:
        generators[split] = self._generate_examples(examples)
      elif examples is not None:
        logging.warning("%s has no examples: no %s split", split_files(dataset, dl_manager.manual_dir, split), split)
    return generators

  def _generate_examples(self, examples):
    for index, example in enumerate(examples):  # line numbers repeat across AC-EVAL's subject files
      yield index, _to_record(example)


def _fingerprint(data_dir: pathlib.Path, dataset: str) -> str:
  digest = hashlib.sha256()
  for split in SPLITS:
    for path in split_files(dataset, data_dir, split):
      digest.update(path.name.encode())
      digest.update(hashlib.sha256(path.read_bytes()).digest())
  return digest.hexdigest()[:16]


def builder(dataset: str, data_dir) -> TaskFiles:
  """The dataset's builder, prepared (built once per distinct set of files)."""
  data_dir = pathlib.Path(data_dir)
  if dataset not in EXAMPLE_TYPES:
    raise ValueError(f"unknown dataset {dataset!r}; datasets are {sorted(EXAMPLE_TYPES)}")
  if not data_dir.is_dir():
    raise FileNotFoundError(f"{data_dir}: no such task folder")
  if not split_files(dataset, data_dir, "train"):
    raise FileNotFoundError(f"{data_dir}: no {TRAIN_FILES[dataset]} for {dataset}")
  tfds_dir = cache_dir() / "tfds" / f"{dataset}-{_fingerprint(data_dir, dataset)}"
  result = TaskFiles(config=dataset, data_dir=str(tfds_dir), file_format="array_record")
  if not result.is_prepared():
    logging.info("building TFDS %s from %s into %s", dataset, data_dir, tfds_dir)
    tfds.disable_progress_bar()
    with contextlib.redirect_stdout(io.StringIO()):  # TFDS prints where it builds: the line above says so
      result.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=str(data_dir)))
  return result


def load_splits(dataset: str, data_dir) -> dict[str, list]:
  """{split: examples} for the splits present (test may be absent), read through grain. A
  split whose files hold no example is an error, not an absent split."""
  ds_builder = builder(dataset, data_dir)
  example_type = EXAMPLE_TYPES[dataset]
  out = {}
  for split in ds_builder.info.splits:
    source = grain.MapDataset.source(ds_builder.as_data_source(split))
    out[split] = list(source.map(lambda record: _from_record(example_type, record)))
  for split in SPLITS:
    if not out.get(split) and split_files(dataset, data_dir, split):
      raise ValueError(f"{file_of(dataset, data_dir, split)}: the {split} split has no examples (empty file)")
  return {split: out[split] for split in SPLITS if split in out}


def file_of(dataset: str, data_dir, split: str) -> pathlib.Path | None:
  """The split's (first) file, for messages; None when the split is absent."""
  paths = split_files(dataset, data_dir, split)
  return paths[0] if paths else None


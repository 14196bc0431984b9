"""Token streams packed into fixed-length sequences and written as ArrayRecord shards.

The main process's side of `prepare.prepare_corpus` (its workers tokenise: corpus_workers).
"""

import contextlib
import pathlib
import re

import numpy as np
from array_record.python.array_record_module import ArrayRecordWriter

from wyjax.core import storage


class ShardWriter:
  """Writes one split's fixed-length sequences into ArrayRecord shards of `per_shard` sequences.

  `sha256` holds each closed shard's SHA-256, which the manifest records.
  """

  def __init__(self, out: pathlib.Path, split: str, per_shard: int, dtype):
    self.out, self.split, self.per_shard, self.dtype = out, split, per_shard, dtype
    self.names, self._writer, self._in_shard, self.sequences = [], None, 0, 0
    self.sha256: dict[str, str] = {}

  def write(self, sequence: np.ndarray):
    if self._writer is None or self._in_shard == self.per_shard:
      self.close()
      name = f"{self.split}-{len(self.names):05d}.array_record"
      self._writer = ArrayRecordWriter(str(self.out / name), "group_size:1")
      self.names.append(name)
      self._in_shard = 0
    self._writer.write(sequence.astype(self.dtype).tobytes())
    self._in_shard += 1
    self.sequences += 1

  def close(self):
    if self._writer is not None:
      writer, self._writer = self._writer, None
      writer.close()
      self.sha256[self.names[-1]] = storage.file_sha256(self.out / self.names[-1])

  def discard(self):
    """Removes the shards written so far (a build that failed): a partial shard is no data."""
    writer, self._writer = self._writer, None
    if writer is not None:
      with contextlib.suppress(RuntimeError):  # the write that failed fails its close again
        writer.close()
    for name in self.names:
      (self.out / name).unlink(missing_ok=True)


class Packer:
  """[CLS] + the next length-1 tokens of a stream of documents, each ending with [SEP]."""

  def __init__(self, writer: ShardWriter, length: int, tokenizer):
    self.writer, self.length, self.tk = writer, length, tokenizer
    self._pending: list[np.ndarray] = []
    self._count = 0
    self.tokens = 0

  def add_document(self, ids: np.ndarray):
    self._pending += [ids, np.array([self.tk.sep_id], np.int32)]
    self._count += len(ids) + 1
    self.tokens += len(ids) + 1
    body = self.length - 1
    if self._count >= body:
      stream = np.concatenate(self._pending)
      full = len(stream) // body
      for i in range(full):
        self._emit(stream[i * body : (i + 1) * body])
      rest = stream[full * body :]
      self._pending, self._count = [rest], len(rest)

  def _emit(self, body: np.ndarray):
    sequence = np.full(self.length, self.tk.pad_id, np.int32)
    sequence[0] = self.tk.cls_id
    sequence[1 : 1 + len(body)] = body
    self.writer.write(sequence)

  def finish(self):
    if self._count:
      self._emit(np.concatenate(self._pending))
    self._pending, self._count = [], 0
    self.writer.close()


@contextlib.contextmanager
def removed_on_failure(out: pathlib.Path, packers: dict):
  """Removes every shard when the build fails (a full disk, Ctrl-C, a bad file): a partial one is no data.

  ArrayRecord's I/O errors (RuntimeErrors from its C++ writer) become one OSError naming the corpus folder.
  """
  try:
    yield
  except BaseException as e:
    for packer in packers.values():
      packer.writer.discard()
    failed_write = re.search(r"write\(\) failed: ([^;]+)", str(e)) if isinstance(e, RuntimeError) else None
    if failed_write:
      raise OSError(
        f"{out}: {failed_write.group(1)} while writing the corpus's shards; free space there and rerun "
        "(the shards written so far were removed)"
      ) from e
    raise

"""Build the WYWEB GJC task (古籍分类, which collection a passage comes from) from Daizhige.

Each example is `<collection>\\t<passage>`. The paper's proportions and lengths are not public; wyjax's choices
(docs/finetuning.md):

- a passage is a cleaned paragraph (punctuation kept) of `min_length` (16) to `max_length` (510) characters:
  short consecutive paragraphs of a book are joined, long ones cut after a sentence-ending mark;
- at most `per_collection` (10,000) passages per collection, those with the smallest content hashes (a uniform,
  deterministic sample), so the big collections do not swamp the small ones;
- exact duplicates removed across the corpus (counted); train/dev/test split per book by the pretraining's hash.
"""

import collections
import heapq
import pathlib

from wyjax.data import corpus
from wyjax.tasks.builders import outputs, punc


def passages(paragraphs: list[str], min_length: int, max_length: int):
  """Paragraphs joined while shorter than min_length, then cut to at most max_length."""
  pending = ""
  for paragraph in paragraphs:
    pending += paragraph
    if len(pending) >= min_length:
      yield from pieces(pending, max_length)
      pending = ""
  if pending:
    yield pending


def pieces(paragraph: str, max_length: int) -> list[str]:
  """The paragraph, or consecutive pieces of at most max_length characters, cut after a sentence end.

  PUNC's rule, with the text as its own tag string.
  """
  return [text for text, _ in punc.split_long(paragraph, paragraph, max_length)]


def build_gjc(
  daizhige_dir,
  out,
  *,
  per_collection: int = 10_000,
  dev_fraction: float = 0.05,
  test_fraction: float = 0.05,
  min_length: int = 16,
  max_length: int = 510,
  t2s: bool = True,
  overwrite: bool = False,
) -> dict:
  reader = corpus.DaizhigeReader(daizhige_dir)
  out = outputs.claim(out, overwrite)
  counts, seen = collections.Counter(), set()
  # Per collection, a max-heap (by negated hash) of the per_collection smallest-hash passages.
  samples = collections.defaultdict(list)
  for unit in reader.units():
    collection = pathlib.PurePath(unit).parts[0]
    for doc in reader.read(unit):
      h = corpus.document_fraction(doc.id)
      split = "test" if h < test_fraction else "dev" if h < test_fraction + dev_fraction else "train"
      for passage in passages(corpus.clean_paragraphs(doc.paragraphs, t2s=t2s), min_length, max_length):
        if len(passage) < min_length:  # a book's short tail
          counts["skipped_short"] += 1
          continue
        key = corpus.paragraph_hash(passage)
        if key in seen:
          counts["duplicate_passages"] += 1
          continue
        seen.add(key)
        counts[f"available {collection}"] += 1
        heap = samples[collection]
        heapq.heappush(heap, (-key, passage, split))
        if len(heap) > per_collection:
          heapq.heappop(heap)
  rows = {"train": [], "dev": [], "test": []}
  for collection, heap in samples.items():
    for negated_key, passage, split in heap:
      rows[split].append((-negated_key, collection, passage))
  with outputs.written(out, counts, overwrite) as writers:
    for split, split_rows in rows.items():
      split_rows.sort()  # hash order: collections interleaved
      writers[split].write("".join(f"{c}\t{p}\n" for _, c, p in split_rows))
      counts[f"{split}_examples"] = len(split_rows)
      counts.update(f"{split} {c}" for _, c, _ in split_rows)
  return dict(sorted(counts.items()))

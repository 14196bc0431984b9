"""build-gjc on the real Daizhige sample: every passage labelled with the collection of the
book it comes from, de-duplicated, within the length limits, split per book, capped."""

import collections
import subprocess
import sys

from wyjax.data import corpus
from wyjax.tasks import wyweb_files
from wyjax.tasks.builders import gjc


def test_pieces_cut_after_sentence_ends_and_short_paragraphs_join():
  assert gjc.pieces("甲乙。丙丁戊？己", 5) == ["甲乙。", "丙丁戊？己"]
  assert gjc.pieces("甲乙丙丁戊己", 4) == ["甲乙丙丁", "戊己"]  # no sentence end: a hard cut
  assert list(gjc.passages(["床前明月光，", "疑是地上霜。", "举头"], 10, 20)) == ["床前明月光，疑是地上霜。", "举头"]


def test_build_gjc_on_the_daizhige_sample(shared_data, tmp_path):
  sample = shared_data / "daizhige_sample"
  out = tmp_path / "gjc"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.tasks",
      "build-gjc",
      f"--daizhige={sample}",
      f"--out={out}",
      "--per_collection=200",
      "--dev_fraction=0.3",
      "--test_fraction=0.2",
    ],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr
  # Each book's cleaned text, to find where every passage came from.
  reader = corpus.DaizhigeReader(sample)
  books = {unit: "".join(corpus.clean_paragraphs(reader.read(unit)[0].paragraphs)) for unit in reader.units()}
  splits_of_book = collections.defaultdict(set)
  per_collection = collections.Counter()
  seen = set()
  for split in ("train", "dev", "test"):
    for e in wyweb_files.read_split("gjc", out, split):
      assert 16 <= len(e.text) <= 510 and e.text not in seen
      seen.add(e.text)
      sources = [unit for unit, text in books.items() if e.text in text]
      assert sources and {unit.split("/")[0] for unit in sources} == {e.collection}, (e.text[:30], sources)
      splits_of_book[sources[0]].add(split)
      per_collection[e.collection] += 1
  assert all(len(splits) == 1 for splits in splits_of_book.values())  # a book never spans splits
  assert max(per_collection.values()) == 200 and len(per_collection) == 10  # capped; every collection present

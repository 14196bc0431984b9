"""Two real tasks in WYWEB formats from the chinese-poetry corpus (the embedded demo's).

- `tlc/`: TLC format (period, dynasty, text), each poem labelled with its collection's era.
- `punc/`: PUNC format, a poem without its punctuation, tagged as `build-punc` tags.

Poems are cleaned like the pretraining corpus (t2s), de-duplicated, split by document hash, and sampled as the
poems with the smallest content hashes, per dynasty (TLC) or overall (PUNC).
"""

import collections
import heapq
import json
import pathlib

from wyjax.data import corpus
from wyjax.tasks.builders import gjc, punc
from wyjax.tasks.wyweb_files import TLC_PERIOD_OF

# 五代 poetry (花间集, 南唐二主词) goes with 唐, as in 唐五代词; 曹操 with 两汉 (he died in 220, the last year of Han);
# 蒙学 (primers of several eras) is left out.
DYNASTY_OF_COLLECTION = {
  "诗经": "先秦",
  "楚辞": "先秦",
  "曹操诗集": "两汉",
  "全唐诗": "唐",
  "唐诗三百首": "唐",
  "唐诗补录": "唐",
  "御定全唐诗": "唐",
  "水墨唐诗": "唐",
  "花间集": "唐",
  "南唐二主词": "唐",
  "全宋诗": "宋",
  "宋词": "宋",
  "元曲": "元明",
  "纳兰性德诗集": "清",
  "幽梦影": "清",
}


def _split(document_id: str, dev_fraction: float, test_fraction: float) -> str:
  h = corpus.document_fraction(document_id)
  return "test" if h < test_fraction else "dev" if h < test_fraction + dev_fraction else "train"


def _keep_smallest(heap: list, size: int, key: int, item) -> None:
  heapq.heappush(heap, (-key, item))
  if len(heap) > size:
    heapq.heappop(heap)


PUNCTUATION = "punc"  # the punctuation task (the demo ends by punctuating a passage with it)
DYNASTY = "tlc"  # the dynasty task
TASKS = (PUNCTUATION, DYNASTY)  # the tasks build_poetry_tasks writes, in the leaderboard's order
# Outside chinese-poetry (Shen Kuo, 梦溪笔谈, "movable type"), unpunctuated: the demo's closing example.
UNSEEN_PASSAGE = (
  "板印书籍唐人尚未盛为之自冯瀛王始印五经已后典籍皆为板本庆历中有布衣毕昇又为活板其法用胶泥刻字"
  "薄如钱唇每字为一印火烧令坚"
)


def build_poetry_tasks(
  out,
  *,
  reader: corpus.PoetryReader | None = None,
  per_dynasty: int = 1200,
  punc_examples: int = 5000,
  dev_fraction: float = 0.15,
  test_fraction: float = 0.15,
  min_chars: int = 10,
  max_chars: int = 126,
) -> dict:
  """Writes out/tlc/{train,dev,test}.tsv and out/punc/{train,dev,test}.tsv; returns counts."""
  reader = reader or corpus.PoetryReader()
  counts, seen = collections.Counter(), set()
  by_dynasty = collections.defaultdict(list)
  punc_sample = []
  for unit in reader.units():
    for doc in reader.read(unit):
      text = "".join(corpus.clean_paragraphs(doc.paragraphs))
      key = corpus.paragraph_hash(text)
      if len(text) < min_chars or key in seen:
        counts["skipped_short_or_duplicate"] += 1
        continue
      seen.add(key)
      split = _split(doc.id, dev_fraction, test_fraction)
      dynasty = DYNASTY_OF_COLLECTION.get(doc.meta["collection"])
      if dynasty:
        _keep_smallest(by_dynasty[dynasty], per_dynasty, key, (split, gjc.pieces(text, max_chars)[0]))
      plain, tags = punc.label_paragraph(text)
      if len(plain) >= min_chars and set(tags) != {"O"}:
        _keep_smallest(punc_sample, punc_examples, key, (split, punc.split_long(plain, tags, max_chars)[0]))

  out = pathlib.Path(out)
  rows = collections.defaultdict(list)
  for dynasty, heap in by_dynasty.items():
    for negated_key, (split, text) in heap:
      rows["tlc", split].append((-negated_key, f"{TLC_PERIOD_OF[dynasty]}\t{dynasty}\t{text}"))
      counts[f"tlc {split} {dynasty}"] += 1
  for negated_key, (split, (text, tags)) in punc_sample:
    rows["punc", split].append((-negated_key, f"{text}\t{tags}"))
  for task in ("tlc", "punc"):
    (out / task).mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
      lines = [line for _, line in sorted(rows[task, split])]
      (out / task / f"{split}.tsv").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
      counts[f"{task} {split}"] = len(lines)
  summary = dict(sorted(counts.items()))
  (out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2))
  return summary

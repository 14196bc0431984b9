"""Characters/s of corpus tokenisation on real classical text: `Tokenizer.encode_ids` against the generic path.

    python benchmarks/tokenizer_throughput.py --data=DATA [--megachars=50] [--lowercase]

The text: the .txt and .tsv files under --data, repeated. `encode_ids` is the corpus path,
`encode_batch` the Rust BERT pipeline; the time to tokenise the full Daizhige (3.3 B characters) on
one process is printed too.
"""

import argparse
import pathlib
import time

from wyjax.data import tokenizer as tk
from wyjax.data.normalize import to_simplified


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data", required=True, help="A folder whose .txt and .tsv files are tokenized.")
  parser.add_argument("--megachars", type=float, default=50)
  parser.add_argument(
    "--lowercase",
    action="store_true",
    help="lower-case and strip accents, as the tokenizer of "
    "an uncased published vocabulary (hfl's RoBERTa-wwm-ext) does",
  )
  args = parser.parse_args()
  root = pathlib.Path(args.data)
  lines = [
    line
    for f in sorted(root.rglob("*.txt")) + sorted(root.rglob("*.tsv"))
    for line in f.read_text(encoding="utf-8").splitlines()
    if line.strip()
  ]
  vocab = tk.build_vocab(lines)
  tokenizer = tk.Tokenizer(vocab, lowercase=args.lowercase)
  # Corpus preparation tokenises paragraphs and documents, not single lines: ~4k-char chunks.
  documents, current = [], []
  for line in lines:
    current.append(line)
    if sum(map(len, current)) >= 4000:
      documents.append("\n".join(current))
      current = []
  corpus_chars = sum(map(len, documents))
  repeats = max(1, int(args.megachars * 1e6 / corpus_chars))
  batch = documents * repeats
  chars = corpus_chars * repeats
  print(f"{len(batch):,} documents, {chars / 1e6:.1f} M chars, vocabulary {len(vocab):,}")

  def timed(fn):
    start = time.perf_counter()
    fn()
    return chars / (time.perf_counter() - start)

  rates = {
    "OpenCC t2s alone": timed(lambda: [to_simplified(line) for line in batch]),
    "encode_ids (corpus path)": timed(lambda: [tokenizer.encode_ids(line) for line in batch]),
    "encode_batch (Rust BERT pipeline)": timed(
      lambda: [
        tokenizer.encode_batch(batch[i : i + 4096], add_special_tokens=False) for i in range(0, len(batch), 4096)
      ]
    ),
  }
  for what, rate in rates.items():
    print(f"{what:36s} {rate / 1e6:7.2f} M chars/s")
  minutes = 3.3e9 / rates["encode_ids (corpus path)"] / 60
  print(f"3.3 B chars (Daizhige) with encode_ids: {minutes:.1f} min on one process")


if __name__ == "__main__":
  main()

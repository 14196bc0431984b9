"""Data commands.

    python -m wyjax.data build-punc --daizhige=DIR --out=DIR [--collections=史藏] [--max_length=510]
    python -m wyjax.data build-gjc --daizhige=DIR --out=DIR [--per_collection=10000] [--max_length=510]

    python -m wyjax.data prepare-corpus --source=daizhige:DIR|poetry|text:PATH --out=DIR
        [--sequence_length=512] [--vocab=TOKENIZER_DIR] [--valid_fraction=0.01] [--workers=N]
        [--no_t2s] [--char_filter=none|no_ascii_alnum|no_private_use] [--min_count=1] [--max_vocab=N]
"""
import argparse
import sys

from wyjax.data import corpus, gjc, prepare, punc


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m wyjax.data")
  commands = parser.add_subparsers(dest="command", required=True)
  p = commands.add_parser("prepare-corpus", help="tokenise and pack a corpus into ArrayRecord shards")
  p.add_argument("--source", required=True, help="daizhige:DIR, poetry, or text:PATH")
  p.add_argument("--out", required=True)
  p.add_argument("--sequence_length", type=int, default=512)
  p.add_argument("--vocab", help="reuse this tokenizer folder instead of building a vocabulary")
  p.add_argument("--valid_fraction", type=float, default=0.01)
  p.add_argument("--no_t2s", action="store_true", help="keep traditional characters")
  p.add_argument("--char_filter", default="none", choices=sorted(corpus.CHAR_FILTERS))
  p.add_argument("--min_count", type=int, default=1)
  p.add_argument("--max_vocab", type=int)
  p.add_argument("--shard_sequences", type=int, default=65536)
  p.add_argument("--workers", type=int, help="worker processes (default: all cores)")
  b = commands.add_parser("build-punc", help="WYWEB PUNC files from a punctuated Daizhige tree")
  b.add_argument("--daizhige", required=True)
  b.add_argument("--out", required=True)
  b.add_argument("--collections", default="史藏", help="comma-separated collections (default: history)")
  b.add_argument("--dev_fraction", type=float, default=0.05)
  b.add_argument("--test_fraction", type=float, default=0.05)
  b.add_argument("--min_length", type=int, default=8)
  b.add_argument("--max_length", type=int, default=510)
  b.add_argument("--no_t2s", action="store_true")
  g = commands.add_parser("build-gjc", help="WYWEB GJC files (passage → collection) from a Daizhige tree")
  g.add_argument("--daizhige", required=True)
  g.add_argument("--out", required=True)
  g.add_argument("--per_collection", type=int, default=10_000, help="passages per collection at most")
  g.add_argument("--dev_fraction", type=float, default=0.05)
  g.add_argument("--test_fraction", type=float, default=0.05)
  g.add_argument("--min_length", type=int, default=16)
  g.add_argument("--max_length", type=int, default=510)
  g.add_argument("--no_t2s", action="store_true")
  args = parser.parse_args(argv)
  if args.command == "build-gjc":
    summary = gjc.build_gjc(args.daizhige, args.out, per_collection=args.per_collection,
                            dev_fraction=args.dev_fraction, test_fraction=args.test_fraction,
                            min_length=args.min_length, max_length=args.max_length, t2s=not args.no_t2s)
    print(f"{args.out}: {summary}")
    return
  if args.command == "build-punc":
    summary = punc.build_punc(args.daizhige, args.out, collections_=tuple(args.collections.split(",")),
                              dev_fraction=args.dev_fraction, test_fraction=args.test_fraction,
                              min_length=args.min_length, max_length=args.max_length, t2s=not args.no_t2s)
    print(f"{args.out}: {summary}")
    return
  options = prepare.Options(
      source=args.source, sequence_length=args.sequence_length, valid_fraction=args.valid_fraction,
      t2s=not args.no_t2s, char_filter=args.char_filter, min_count=args.min_count,
      max_vocab=args.max_vocab, shard_sequences=args.shard_sequences)
  prepare.prepare_corpus(args.out, options, vocab_dir=args.vocab, workers=args.workers)


if __name__ == "__main__":
  sys.exit(main())

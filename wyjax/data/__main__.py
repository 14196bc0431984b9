"""Pretraining data (the WYWEB tasks built from Daizhige: python -m wyjax.tasks).

    python -m wyjax.data prepare-corpus --source=daizhige:DIR|poetry|text:PATH --out=DIR
        [--sequence_length=512] [--vocab=TOKENIZER_DIR] [--valid_fraction=0.01] [--workers=N]
        [--no_t2s] [--char_filter=none|no_ascii_alnum|no_private_use] [--min_count=1] [--max_vocab=N]
"""
import argparse
import sys

from wyjax.data import corpus, prepare


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
  args = parser.parse_args(argv)
  options = prepare.Options(
      source=args.source, sequence_length=args.sequence_length, valid_fraction=args.valid_fraction,
      t2s=not args.no_t2s, char_filter=args.char_filter, min_count=args.min_count,
      max_vocab=args.max_vocab, shard_sequences=args.shard_sequences)
  prepare.prepare_corpus(args.out, options, vocab_dir=args.vocab, workers=args.workers)


if __name__ == "__main__":
  sys.exit(main())

"""Build WYWEB's two unpublished tasks from a Daizhige tree, in WYWEB's formats.

    python -m wyjax.tasks build-punc --daizhige=DIR --out=DIR [--collections=史藏] [--max_length=510]
    python -m wyjax.tasks build-gjc --daizhige=DIR --out=DIR [--per_collection=10000] [--max_length=510]
"""
import argparse
import sys

from wyjax.tasks.builders import gjc, punc


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m wyjax.tasks")
  commands = parser.add_subparsers(dest="command", required=True)
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
  else:
    summary = punc.build_punc(args.daizhige, args.out, collections_=tuple(args.collections.split(",")),
                              dev_fraction=args.dev_fraction, test_fraction=args.test_fraction,
                              min_length=args.min_length, max_length=args.max_length, t2s=not args.no_t2s)
  print(f"{args.out}: {summary}")


if __name__ == "__main__":
  sys.exit(main())

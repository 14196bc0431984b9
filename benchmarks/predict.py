"""Punctuating a 1-million-character text: `wyjax.predict`'s Predictor against transformers' pipeline.

    JAX_PLATFORMS=cpu python benchmarks/predict.py --daizhige=DAIZHIGE

Both sides run one export of a PUNC model of the embedded default's size
(wyjax.train.task_model.FRESH_TINY_MODEL, random weights), batch size 32, on the Daizhige tree's
paragraphs unpunctuated, cut to --line_chars characters (every line one window for both) and
repeated to --chars. Prints one JSON line per side (characters per second, after one warm-up
line) and the ratio.
"""

import argparse
import json
import pathlib
import platform
import tempfile
import time
import unicodedata

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.hf import task_models
from wyjax.models import EncoderConfig
from wyjax.models.task_heads import HEADS
from wyjax.tasks.registry import TASKS
from wyjax.train import inference
from wyjax.train.task_model import FRESH_TINY_MODEL


def text_lines(daizhige: pathlib.Path, chars: int, line_chars: int) -> list[str]:
  """The books' paragraphs without punctuation or whitespace, in lines of at most line_chars, to `chars` in all."""
  paragraphs = [
    "".join(c for c in line if not c.isspace() and not unicodedata.category(c).startswith("P"))
    for book in sorted(daizhige.rglob("*.txt"))
    for line in book.read_text(encoding="utf-8").splitlines()
  ]
  pieces = [p[i : i + line_chars] for p in paragraphs for i in range(0, len(p), line_chars)]
  lines, total = [], 0
  while total < chars:
    for piece in pieces:
      piece = piece[: chars - total]
      if piece:
        lines.append(piece)
        total += len(piece)
  return lines


def punc_model(lines: list[str], max_length: int) -> task_models.FineTuned:
  task = TASKS["punc"]
  tokenizer = Tokenizer(build_vocab(lines[:2000]))
  config = EncoderConfig(**FRESH_TINY_MODEL, vocab_size=len(tokenizer))
  module = HEADS[task.head].build(config, len(task.labels))
  params = nn.unbox(module.init(jax.random.key(0), jnp.zeros((1, 8), jnp.int32))["params"])
  return task_models.FineTuned(task, config, jax.tree_util.tree_map(np.asarray, params), tokenizer, max_length)


def timed(run, lines) -> float:
  run(lines[:1])  # compile / warm up
  start = time.perf_counter()
  run(lines)
  return time.perf_counter() - start


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--daizhige", type=pathlib.Path, required=True)
  parser.add_argument("--chars", type=int, default=1_000_000)
  parser.add_argument("--line_chars", type=int, default=500)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--max_length", type=int, default=512)
  args = parser.parse_args()
  import torch
  import transformers

  lines = text_lines(args.daizhige, args.chars, args.line_chars)
  model = punc_model(lines, args.max_length)
  machine = (
    f"{platform.processor() or platform.machine()}, {jax.devices()[0].device_kind}, torch threads "
    f"{torch.get_num_threads()}"
  )
  with tempfile.TemporaryDirectory() as tmp:
    folder = task_models.export(model, pathlib.Path(tmp) / "punc")
    predictor = inference.Predictor(task_models.load(folder), batch_size=args.batch_size)
    wyjax_s = timed(lambda batch: list(predictor.outputs(batch)), lines)
    device = 0 if torch.cuda.is_available() else -1
    pipe = transformers.pipeline("token-classification", model=str(folder), device=device)
    pipeline_s = timed(lambda batch: list(pipe(batch, batch_size=args.batch_size)), lines)
  for name, seconds in (("wyjax.predict", wyjax_s), ("transformers pipeline", pipeline_s)):
    print(
      json.dumps(
        {
          "name": name,
          "chars": args.chars,
          "seconds": round(seconds, 2),
          "chars_per_s": round(args.chars / seconds),
          "batch_size": args.batch_size,
          "machine": machine,
        }
      )
    )
  print(json.dumps({"speedup": round(pipeline_s / wyjax_s, 2)}))


if __name__ == "__main__":
  main()

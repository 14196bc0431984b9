"""Pretraining step time and tokens/s (and MFU where the device's peak is known) for a config.

Synthetic batches go through the real jitted train step (masking, loss, AdamW, donation).

    python benchmarks/pretrain_step.py --config=pretrain/deberta_tiny.py [--batch=32] [--steps=5]
    python benchmarks/pretrain_step.py --config=pretrain/deberta_base.py --batch=8 --dtype=float32

Results go in docs/benchmarks.md.
"""

import argparse
import importlib.util
import time

import jax
import numpy as np

from wyjax.aot.accelerators import peak_flops_per_device
from wyjax.core import config_files
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import pretraining


def load_config(path):
  spec = importlib.util.spec_from_file_location("config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--config", required=True)
  parser.add_argument("--batch", type=int)
  parser.add_argument("--length", type=int)
  parser.add_argument("--dtype")
  parser.add_argument("--vocab", type=int, default=22669)
  parser.add_argument("--steps", type=int, default=5)
  args = parser.parse_args()
  config = load_config(config_files.resolve(args.config))  # a name or a file
  config.batch_size = args.batch or config.batch_size
  config.dtype = args.dtype or config.dtype
  length = args.length or config.corpus.sequence_length
  # The run's own program (wyjax.train.pretraining.build): the same state, shardings and step.
  run = pretraining.build(config, tokenizer_lib.placeholder(args.vocab), length)
  state = run.program.init_state(jax.random.key(0))
  step = run.train_step
  batch = jax.device_put(
    np.random.default_rng(0).integers(5, args.vocab, (config.batch_size, length), np.int32), run.program.data_sharding
  )
  start = time.perf_counter()
  state, out = step(state, batch)
  jax.block_until_ready(out)
  compile_seconds = time.perf_counter() - start
  start = time.perf_counter()
  for _ in range(args.steps):
    state, out = step(state, batch)
  jax.block_until_ready(out)
  seconds = (time.perf_counter() - start) / args.steps
  tokens = config.batch_size * length
  flops = run.train_flops_per_step
  peak = peak_flops_per_device()
  n_params = sum(x.size for x in jax.tree_util.tree_leaves(state["params"]))
  line = (
    f"{args.config}: {n_params / 1e6:.1f} M params, batch {config.batch_size} × {length}, {config.dtype}, "
    f"{jax.devices()[0].device_kind}: {seconds:.3f} s/step, {tokens / seconds:,.0f} tokens/s, "
    f"{flops / seconds / 1e12:.3f} TFLOP/s (compile {compile_seconds:.1f} s)"
  )
  if peak:
    line += f", MFU {flops / seconds / (peak * jax.device_count()):.1%}"
  print(line)


if __name__ == "__main__":
  main()

"""Greedy decoding throughput of the prefix LM: a key/value cache against re-running the full forward pass.

    python benchmarks/decoding.py [--init=MODEL] [--models=tiny,base] [--lengths=32,64,128]
        [--batch=8 --source_length=24 --repeats=3]

Each sentence generates exactly N target tokens, both ways by the same jitted `prefix_lm.generate`
with fixed shapes (the uncached one over the whole [prefix + N] buffer each step). --init times a
trained model (a wyjax workdir or transformers folder); otherwise random weights of the demo's tiny
DeBERTa and of DeBERTa-base in the WYWEB layout.
"""

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.hf import init_params, loading
from wyjax.models import EncoderConfig, MaskedLM, prefix_lm
from wyjax.train.task_model import FRESH_TINY_MODEL

VOCAB = 13763  # the demo tokenizer's size
MODELS = {
  "tiny": dict(FRESH_TINY_MODEL, max_position_embeddings=512),
  "base": dict(
    model_type="deberta-v2",
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    relative_attention=True,
    position_buckets=128,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    pos_att_type="p2c|c2p",
    position_biased_input=False,
  ),
}


def seconds(fn, repeats: int) -> float:
  jax.block_until_ready(fn())  # compile
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return min(times)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--init", default="")
  parser.add_argument("--models", default="tiny,base")
  parser.add_argument("--lengths", default="32,64,128")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--source_length", type=int, default=24)  # WYWMT dev: mean 21.4 characters
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  print(
    f"# {platform.processor() or platform.machine()}, jax {jax.__version__} on {jax.devices()[0].platform}, "
    f"batch {args.batch}, source {args.source_length} tokens, greedy"
  )
  print("| model | target tokens | cached sent/s | cached tok/s | uncached sent/s | uncached tok/s | speed-up |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  if args.init:
    loaded = loading.load(args.init)
    models = {args.init: (loaded.config, jax.tree_util.tree_map(jnp.asarray, loaded.params))}
  else:
    models = {}
    for name in args.models.split(","):
      config = EncoderConfig(**MODELS[name], vocab_size=VOCAB)
      models[name] = (config, init_params(config, jax.random.key(0)))
  for name, (config, params) in models.items():
    model = MaskedLM(config)
    rng = np.random.default_rng(0)
    source = rng.integers(5, config.vocab_size, (args.batch, args.source_length))
    prefix = jnp.asarray(
      np.concatenate([np.full((args.batch, 1), 2), source, np.full((args.batch, 1), 3)], 1), jnp.int32
    )
    for length in map(int, args.lengths.split(",")):
      # sep_id -1 never matches and the limit lies beyond: every row generates `length` tokens.
      limits = jnp.full((args.batch,), length + 1, jnp.int32)
      run = lambda use_cache: prefix_lm.generate(
        model, params, prefix, limits, max_new=length, sep_id=-1, banned_ids=(0, 1, 2, 3, 4), use_cache=use_cache
      )
      cached, uncached = seconds(lambda: run(True), args.repeats), seconds(lambda: run(False), args.repeats)
      rate = lambda s: f"{args.batch / s:.2f} | {args.batch * length / s:.0f}"
      print(f"| {name} | {length} | {rate(cached)} | {rate(uncached)} | {uncached / cached:.1f}× |", flush=True)


if __name__ == "__main__":
  main()

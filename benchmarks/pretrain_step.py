"""Pretraining step time and tokens/s (and MFU where the device's peak is known) for a config,
on synthetic batches through the real jitted train step (masking, loss, AdamW, donation).

    python benchmarks/pretrain_step.py --config=configs/pretrain/deberta_tiny.py [--batch=32] [--steps=5]
    python benchmarks/pretrain_step.py --config=configs/pretrain/deberta_base.py --batch=8 --dtype=float32

Results go in docs/benchmarks.md.
"""
import argparse
import importlib.util
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.data import tokenizer as tokenizer_lib
from wyjax.models import EncoderConfig, MaskedLM
from wyjax.train import metrics, mlm, optimizer, pretrain


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
  config = load_config(args.config)
  config.batch_size = args.batch or config.batch_size
  config.dtype = args.dtype or config.dtype
  length = args.length or config.corpus.sequence_length
  specials = list(tokenizer_lib.SPECIAL_TOKENS)
  tokenizer = tokenizer_lib.Tokenizer(specials + [chr(0x4E00 + i) for i in range(args.vocab - len(specials))])
  model_config = EncoderConfig(**{**config.model.to_dict(), "vocab_size": args.vocab, "dtype": config.dtype})
  model = MaskedLM(model_config)
  tx, schedule = optimizer.adamw(learning_rate=1e-4, warmup_steps=10, total_steps=1000)
  params = nn.unbox(model.init(jax.random.key(0), jnp.zeros((1, length), jnp.int32))["params"])
  state = {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": tx.init(params)}
  train_step, _ = pretrain.make_train_step(model, tx, schedule, config, tokenizer, length)
  step = jax.jit(train_step, donate_argnums=(0,))
  batch = jnp.asarray(np.random.default_rng(0).integers(5, args.vocab, (config.batch_size, length)), jnp.int32)
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
  flops = 3 * metrics.forward_flops_per_token(model_config, length, mlm.max_predictions(length, 0.15) / length) * tokens
  peak = metrics.peak_flops_per_device()
  n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
  line = (f"{args.config}: {n_params / 1e6:.1f} M params, batch {config.batch_size} × {length}, {config.dtype}, "
          f"{jax.devices()[0].device_kind}: {seconds:.3f} s/step, {tokens / seconds:,.0f} tokens/s, "
          f"{flops / seconds / 1e12:.3f} TFLOP/s (compile {compile_seconds:.1f} s)")
  if peak:
    line += f", MFU {flops / seconds / (peak * jax.device_count()):.1%}"
  print(line)


if __name__ == "__main__":
  main()

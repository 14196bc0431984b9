"""Forward tokens/s of wyjax (jit) vs transformers (PyTorch) on the same inputs.

    python benchmarks/encoder_forward.py [--batch=8 --length=512 --repeats=3 --models=deberta,bert]

DeBERTa-base in the WYWEB layout (buckets 128, shared keys, p2c|c2p) and BERT-base, fp32,
random weights converted from the transformers model so both compute the same function.
Results go in docs/benchmarks.md.
"""

import argparse
import platform
import time

import jax
import numpy as np
import torch
import transformers

from wyjax.hf import configs, loading, weights

BASE = dict(
  vocab_size=22669,
  hidden_size=768,
  num_hidden_layers=12,
  num_attention_heads=12,
  intermediate_size=3072,
  max_position_embeddings=512,
)
HF_CONFIGS = {
  "deberta": lambda: transformers.DebertaV2Config(
    **BASE,
    relative_attention=True,
    position_buckets=128,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    pos_att_type="p2c|c2p",
    position_biased_input=False,
    type_vocab_size=0,
  ),
  "bert": lambda: transformers.BertConfig(**BASE, type_vocab_size=2),
}


def time_it(fn, repeats):
  fn()  # compile / warm up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return min(times)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--length", type=int, default=512)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--models", default="deberta,bert")
  args = parser.parse_args()
  print(
    f"# {platform.processor() or platform.machine()}, jax {jax.__version__} on {jax.devices()[0].platform}, "
    f"torch {torch.__version__} ({torch.get_num_threads()} threads), batch {args.batch} × {args.length}"
  )
  for name in args.models.split(","):
    hf_model = transformers.AutoModel.from_config(HF_CONFIGS[name]()).eval()
    config = configs.from_hf(hf_model.config.to_dict())
    state_dict = {k: v.numpy() for k, v in hf_model.state_dict().items()}
    params, _ = weights.from_hf(state_dict, config, loading.param_shapes(config, mlm=False))
    model = loading.Model(config, params)
    ids = np.random.default_rng(0).integers(5, config.vocab_size, (args.batch, args.length))
    mask = np.ones_like(ids)
    torch_ids, torch_mask = torch.tensor(ids), torch.tensor(mask)

    def run_torch():
      with torch.no_grad():
        hf_model(input_ids=torch_ids, attention_mask=torch_mask)

    def run_jax():
      model._encode(model.params["encoder"], ids, mask, np.zeros_like(ids)).block_until_ready()

    tokens = args.batch * args.length
    t_jax, t_torch = time_it(run_jax, args.repeats), time_it(run_torch, args.repeats)
    print(
      f"{name}-base: wyjax {tokens / t_jax:,.0f} tok/s ({t_jax:.2f} s), transformers "
      f"{tokens / t_torch:,.0f} tok/s ({t_torch:.2f} s), ratio {t_torch / t_jax:.2f}×"
    )


if __name__ == "__main__":
  main()

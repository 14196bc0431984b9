"""Attention implementations of DeBERTa-v2-base: forward and forward+backward, one layer and the
full 12-layer encoder, at L = 128, 512, 2048, 8192 (16,384 tokens per batch), bf16.

    python benchmarks/attention.py > attention.jsonl          # measured, on this machine's accelerator
    JAX_PLATFORMS=cpu python benchmarks/attention.py --predict=v5p:2x2x1 > predicted.jsonl  # compile-only, one v5p chip
    python benchmarks/attention.py --table=attention.jsonl    # the markdown table

Measured: median wall time of --repeats runs and the device's peak memory, for wyjax "xla" and,
on a TPU, "pallas" (the kernels have no GPU lowering yet, and on a CPU they run interpreted: a
correctness tool, left out); on a GPU also transformers' DebertaV2Model (PyTorch, bf16, eager)
and, when installed, the Triton packages `disentangled-flash` and `flashdeberta` on the same
shapes and inputs (a "layer" is a 1-layer encoder for all of them). Predicted: the XLA TPU compiler's FLOPs, bytes accessed and temporaries
of each program for one chip, and the roofline time max(FLOPs / peak, bytes / bandwidth); these
are predictions, not measurements. One JSON line per cell on stdout; results in docs/benchmarks.md.
"""
import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models import DebertaV2, EncoderConfig
from wyjax.core import aot

LENGTHS = (128, 512, 2048, 8192)
TOKENS = 16384
BASE = dict(vocab_size=22669, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
            relative_attention=True, position_buckets=256, max_relative_positions=512, share_att_key=True,
            norm_rel_ebd="layer_norm", pos_att_type="c2p|p2c", position_biased_input=False,
            max_position_embeddings=512, dtype="bfloat16", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def programs(layers: int, length: int, attention: str):
  """(forward, forward+backward) jitted, their params and inputs."""
  config = EncoderConfig(**BASE, num_hidden_layers=layers, attention=attention)
  model = DebertaV2(config)
  batch = max(1, TOKENS // length)
  ids = jnp.asarray(np.random.default_rng(0).integers(5, config.vocab_size, (batch, length)), jnp.int32)
  mask = jnp.ones_like(ids)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), ids[:1, :8], mask[:1, :8]))

  def forward(params, ids, mask):
    return model.apply(params, ids, mask)

  def train(params, ids, mask):
    return jax.grad(lambda p: model.apply(p, ids, mask).astype(jnp.float32).sum())(params)

  return {"forward": forward, "forward+backward": train}, params, (ids, mask)


def predict(topology: str, layer_counts, lengths):
  devices = aot.devices(topology)[:1]
  chip = aot.chip_of(topology, devices[0])
  spec = aot.CHIPS[chip]
  mesh = jax.sharding.Mesh(np.array(devices), ("data",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  for layers in layer_counts:
    for length in lengths:
      for attention in ("xla", "pallas"):
        fns, params, inputs = programs(layers, length, attention)
        for name, fn in fns.items():
          abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
                                  (params, *inputs))
          with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            compiled = jax.jit(fn).lower(*abstract).compile()
          cost = compiled.cost_analysis()
          cost = cost[0] if isinstance(cost, list) else cost
          flops, bytes_ = float(cost.get("flops", 0)), float(cost.get("bytes accessed", 0))
          yield {"layers": layers, "length": length, "attention": attention, "pass": name, "predicted": True,
                 "chip": chip, "flops": flops, "bytes_accessed": bytes_,
                 "temp_bytes": compiled.memory_analysis().temp_size_in_bytes,
                 "roofline_ms": 1e3 * max(flops / spec.peak_flops, bytes_ / spec.hbm_bandwidth)}


def _median_seconds(run, repeats: int) -> float:
  run()  # compile, warm up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _peak_bytes():
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def measure_jax(repeats: int, layer_counts, lengths):
  attentions = ("xla", "pallas") if jax.default_backend() == "tpu" else ("xla",)  # no GPU lowering yet
  for layers in layer_counts:
    for length in lengths:
      for attention in attentions:
        fns, abstract_params, inputs = programs(layers, length, attention)
        params = jax.tree.map(lambda x: jnp.full(x.shape, 0.02, x.dtype), abstract_params)
        for name, fn in fns.items():
          jitted = jax.jit(fn)
          try:
            seconds = _median_seconds(lambda: jax.block_until_ready(jitted(params, *inputs)), repeats)
          except Exception as e:  # out of memory at long lengths: recorded, not fatal
            yield {"layers": layers, "length": length, "attention": attention, "pass": name,
                   "error": str(e).splitlines()[0][:200]}
            continue
          yield {"layers": layers, "length": length, "attention": attention, "pass": name,
                 "ms": 1e3 * seconds, "tokens_per_second": TOKENS / seconds, "peak_bytes": _peak_bytes()}


def measure_torch(repeats: int, layer_counts, lengths):
  """transformers eager and the Triton packages, bf16 on the GPU."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  variants = {"transformers": lambda model: model}
  try:
    import disentangled_flash  # pylint: disable=g-import-not-at-top
    variants["disentangled-flash"] = disentangled_flash.enable_deberta_training
  except ImportError:
    pass
  try:
    import flashdeberta  # pylint: disable=g-import-not-at-top
    variants["flashdeberta"] = lambda model: _flashdeberta(flashdeberta, model)
  except ImportError:
    pass
  hf_fields = {k: v for k, v in BASE.items() if k not in ("dtype", "hidden_dropout_prob",
                                                          "attention_probs_dropout_prob")}
  for layers in layer_counts:
    for length in lengths:
      config = transformers.DebertaV2Config(**hf_fields, num_hidden_layers=layers, type_vocab_size=0,
                                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
      batch = max(1, TOKENS // length)
      ids = torch.randint(5, config.vocab_size, (batch, length), device="cuda")
      mask = torch.ones_like(ids)
      for variant, convert in variants.items():
        passes = _torch_passes(convert(transformers.DebertaV2Model(config).to("cuda", torch.bfloat16)), ids, mask)
        for name, run in passes.items():
          torch.cuda.reset_peak_memory_stats()
          try:
            seconds = _median_seconds(lambda: (run(), torch.cuda.synchronize()), repeats)
          except Exception as e:  # e.g. out of memory at 8192
            yield {"layers": layers, "length": length, "attention": variant, "pass": name,
                   "error": str(e).splitlines()[0][:200]}
            torch.cuda.empty_cache()
            continue
          yield {"layers": layers, "length": length, "attention": variant, "pass": name, "ms": 1e3 * seconds,
                 "tokens_per_second": TOKENS / seconds, "peak_bytes": torch.cuda.max_memory_allocated()}
        del passes
        torch.cuda.empty_cache()


def _torch_passes(model, ids, mask):
  import torch  # pylint: disable=g-import-not-at-top

  def forward():
    with torch.no_grad():
      model(input_ids=ids, attention_mask=mask)

  def forward_backward():
    model(input_ids=ids, attention_mask=mask).last_hidden_state.float().sum().backward()

  return {"forward": forward, "forward+backward": forward_backward}


def _flashdeberta(flashdeberta, model):
  """flashdeberta's model class with the transformers model's weights."""
  flash = flashdeberta.FlashDebertaV2Model(model.config).to(model.device, model.dtype)
  flash.load_state_dict(model.state_dict())
  return flash


def table(path: str) -> str:
  """docs/benchmarks.md's table from this script's saved output."""
  lines = [json.loads(line) for line in open(path)]
  header, cells = lines[0], [c for c in lines[1:] if "error" not in c]
  rows = {}
  for c in cells:
    rows.setdefault((c["layers"], c["length"], c["pass"]), {})[c["attention"]] = c
  predicted = cells and cells[0].get("predicted")
  out = [f"{header['device']}, jax {header['jax']}, {header['date']}" + (", compile-only predictions" if predicted else ""),
         ""]
  if predicted:
    out += ["| layers | L | pass | xla: ms (roofline) | xla: HBM GiB | xla: temp GiB | pallas: ms (roofline) | pallas: HBM GiB | pallas: temp GiB | speed-up |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for (layers, length, name), by in sorted(rows.items()):
      x, p = by.get("xla"), by.get("pallas")
      fmt = lambda c: (f"{c['roofline_ms']:.2f} | {c['bytes_accessed'] / 2**30:.1f} | {c['temp_bytes'] / 2**30:.2f}"
                       if c else "n/a | | ")
      ratio = f"{x['roofline_ms'] / p['roofline_ms']:.0f}x" if x and p else ""
      out.append(f"| {layers} | {length} | {name} | {fmt(x)} | {fmt(p)} | {ratio} |")
  else:
    names = sorted({c["attention"] for c in cells})
    out += ["| layers | L | pass | " + " | ".join(f"{n}: ms (peak GiB)" for n in names) + " |",
            "|---|---|---|" + "---|" * len(names)]
    for (layers, length, name), by in sorted(rows.items()):
      fmt = lambda c: f"{c['ms']:.1f} ({(c['peak_bytes'] or 0) / 2**30:.2f})" if c else "n/a"
      out.append(f"| {layers} | {length} | {name} | " + " | ".join(fmt(by.get(n)) for n in names) + " |")
  return "\n".join(out)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--predict", default="", help="a TPU topology: compile-only figures for one of its chips")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--layers", default="1,12", help="encoder depths: 1 (one layer) and 12 (base)")
  parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
  parser.add_argument("--table", default="", help="print the markdown table of a saved output and exit")
  args = parser.parse_args()
  if args.table:
    print(table(args.table))
    return
  layer_counts, lengths = [int(x) for x in args.layers.split(",")], [int(x) for x in args.lengths.split(",")]
  cells = (predict(args.predict, layer_counts, lengths) if args.predict
           else measure_jax(args.repeats, layer_counts, lengths))
  print(json.dumps({"jax": jax.__version__, "backend": jax.default_backend(),
                    "device": args.predict or jax.devices()[0].device_kind,
                    "date": time.strftime("%Y-%m-%d")}), flush=True)
  for cell in cells:
    print(json.dumps(cell), flush=True)
  if not args.predict and jax.default_backend() == "gpu":
    for cell in measure_torch(args.repeats, layer_counts, lengths):
      print(json.dumps(cell), flush=True)


if __name__ == "__main__":
  main()

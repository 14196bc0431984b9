"""Attention implementations of DeBERTa-v2-base, bf16, 16,384 tokens per batch: measured, or predicted compile-only.

    python benchmarks/attention.py > attention.jsonl          # measured, on this machine's accelerator
    JAX_PLATFORMS=cpu python benchmarks/attention.py --predict=v5p:2x2x1 > predicted.jsonl  # one v5p chip
    python benchmarks/attention.py --table=attention.jsonl    # the markdown table
    python benchmarks/attention.py --alone [--budget_s=600]   # the attention alone, on a GPU
    JAX_PLATFORMS=cpu python benchmarks/attention.py --alone --smoke

- Encoders (one layer and the full 12), forward and forward+backward, at L = 128, 512, 2048, 8192.
  Measured: the median wall time of --repeats runs and the device's peak memory, for wyjax "xla"
  and, on a TPU or GPU, "pallas"; on a GPU also transformers' DebertaV2Model (eager) and, when
  installed, the Triton packages `disentangled-flash` and `flashdeberta`. Predicted: the XLA TPU
  compiler's FLOPs, bytes accessed and temporaries for one chip, and the roofline time. One JSON
  line per cell on stdout.
- The attention alone (`gpu_rows`, what benchmarks/gpu.py runs): markdown rows as they are
  measured, at the lengths of ALONE_CELLS, for each of ALONE_SIDES; first the GPU kernel's
  largest relative errors against the XLA path (`kernel_errors`; --smoke: that row alone, the
  kernel interpreted on the CPU).
"""

import argparse
import json
import statistics
import time
from collections.abc import Iterator

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from wyjax.aot import targets
from wyjax.aot.accelerators import ACCELERATORS, chip_of
from wyjax.core.host_memory import buffer_bytes
from wyjax.models import DebertaV2, EncoderConfig, attention, deberta_v2, layers

LENGTHS = (128, 512, 2048, 8192)
TOKENS = 16384
BASE = dict(
  vocab_size=22669,
  hidden_size=768,
  num_attention_heads=12,
  intermediate_size=3072,
  relative_attention=True,
  position_buckets=256,
  max_relative_positions=512,
  share_att_key=True,
  norm_rel_ebd="layer_norm",
  pos_att_type="c2p|p2c",
  position_biased_input=False,
  max_position_embeddings=512,
  dtype="bfloat16",
  hidden_dropout_prob=0.0,
  attention_probs_dropout_prob=0.0,
)


def programs(depth: int, length: int, choice: str):
  """(forward, forward+backward) jitted, their params and inputs."""
  config = EncoderConfig(**BASE, num_hidden_layers=depth, attention=choice)
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
  """The compile-only cells: each program's FLOPs, bytes and roofline on one chip of a TPU topology."""
  devices = targets.devices(topology)[:1]
  chip = chip_of(topology, devices[0])
  spec = ACCELERATORS[chip]
  mesh = jax.sharding.Mesh(np.array(devices), ("data",))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  for depth in layer_counts:
    for length in lengths:
      for choice in ("xla", "pallas"):
        fns, params, inputs = programs(depth, length, choice)
        for name, fn in fns.items():
          abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), (params, *inputs)
          )
          with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            compiled = jax.jit(fn).lower(*abstract).compile()
          cost = compiled.cost_analysis()
          cost = cost[0] if isinstance(cost, list) else cost
          flops, bytes_ = float(cost.get("flops", 0)), float(cost.get("bytes accessed", 0))
          yield {
            "layers": depth,
            "length": length,
            "attention": choice,
            "pass": name,
            "predicted": True,
            "chip": chip,
            "flops": flops,
            "bytes_accessed": bytes_,
            "temp_bytes": compiled.memory_analysis().temp_size_in_bytes,
            "roofline_ms": 1e3 * max(flops / spec.peak_flops, bytes_ / spec.hbm_bandwidth),
          }


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
  choices = ("xla", "pallas") if jax.default_backend() in ("tpu", "gpu") else ("xla",)
  for depth in layer_counts:
    for length in lengths:
      for choice in choices:
        fns, abstract_params, inputs = programs(depth, length, choice)
        params = jax.tree.map(lambda x: jnp.full(x.shape, 0.02, x.dtype), abstract_params)
        for name, fn in fns.items():
          jitted = jax.jit(fn)
          try:
            seconds = _median_seconds(lambda: jax.block_until_ready(jitted(params, *inputs)), repeats)
          except Exception as e:  # out of memory at long lengths: recorded, not fatal
            yield {
              "layers": depth,
              "length": length,
              "attention": choice,
              "pass": name,
              "error": str(e).splitlines()[0][:200],
            }
            continue
          yield {
            "layers": depth,
            "length": length,
            "attention": choice,
            "pass": name,
            "ms": 1e3 * seconds,
            "tokens_per_second": TOKENS / seconds,
            "peak_bytes": _peak_bytes(),
          }


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
  for depth in layer_counts:
    for length in lengths:
      config = _hf_config(depth, dropout=0.0)
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
            yield {
              "layers": depth,
              "length": length,
              "attention": variant,
              "pass": name,
              "error": str(e).splitlines()[0][:200],
            }
            torch.cuda.empty_cache()
            continue
          yield {
            "layers": depth,
            "length": length,
            "attention": variant,
            "pass": name,
            "ms": 1e3 * seconds,
            "tokens_per_second": TOKENS / seconds,
            "peak_bytes": torch.cuda.max_memory_allocated(),
          }
        del passes
        torch.cuda.empty_cache()


def _hf_config(depth: int, dropout: float):
  import transformers  # pylint: disable=g-import-not-at-top

  fields = {k: v for k, v in BASE.items() if k not in ("dtype", "hidden_dropout_prob", "attention_probs_dropout_prob")}
  return transformers.DebertaV2Config(
    **fields,
    num_hidden_layers=depth,
    type_vocab_size=0,
    hidden_dropout_prob=dropout,
    attention_probs_dropout_prob=dropout,
  )


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


# (L, pass) in order of importance, so that a budget cut short loses the least: pretraining's
# length first, then 4096 (the long-sequence target), training before inference.
ALONE_CELLS = (
  (512, "forward+backward"),
  (4096, "forward+backward"),
  (512, "forward"),
  (4096, "forward"),
  (1024, "forward+backward"),
  (2048, "forward+backward"),
  (1024, "forward"),
  (2048, "forward"),
)
ALONE_SIDES = ("wyjax GPU kernel", "wyjax cuDNN", "transformers eager", "wyjax XLA")  # the reference last
ALONE_HEADER = "| part | measurement | by | result | peak memory | notes |\n|---|---|---|---|---|---|"  # gpu.py's


def gpu_rows(smoke: bool, budget_s: float = float("inf"), repeats: int = 5) -> Iterator[str]:
  """The attention alone, as rows of benchmarks/gpu.py's table (part "attention"), each yielded when measured.

  First the kernel's correctness, `kernel_errors` in fp32: DeBERTa-tiny's position layout (on a
  CPU interpreted; smoke: this row alone) and, on a GPU, DeBERTa-base's at L = 512. Then the
  cells of ALONE_CELLS in turn, each measured by ALONE_SIDES, then wyjax's rates over
  transformers'; a side not started within budget_s of the call is skipped, and the last row
  says so. A side that fails (out of memory) is a row with the error. Each wyjax side compiles
  its program first (seconds; not in the time)."""
  start = time.perf_counter()
  yield _errors_row(_TINY_LAYOUT, 40)
  if smoke:
    return
  yield _errors_row(EncoderConfig(**{**BASE, "dtype": "float32"}, num_hidden_layers=1), 512)
  for done, (length, name) in enumerate(ALONE_CELLS):
    measurement = f"L = {length}, batch {TOKENS // length}, {name}"
    seconds = {}
    out_of_time = False
    for side in ALONE_SIDES:
      if side == "wyjax cuDNN" and (name == "forward" or length >= attention.GPU_KERNEL_TRAINS_FROM):
        continue  # where "auto" picks it: training on fewer keys
      out_of_time = time.perf_counter() - start > budget_s
      if out_of_time:
        break
      measure = _measure_torch_attention if side == "transformers eager" else _measure_jax_attention
      try:
        seconds[side], peak = measure(side, length, name, repeats)
      except Exception as e:  # pylint: disable=broad-except  (out of memory at long lengths: a row, not the end)
        error = (str(e).splitlines() or [""])[0][:80]
        yield f"| attention | {measurement} | {side} | {type(e).__name__}: {error} | | |"
        continue
      memory = "XLA's buffer assignment" if side != "transformers eager" else "torch's peak allocation"
      if side == "wyjax cuDNN":
        memory += "; no attention dropout"
      yield f"| attention | {measurement} | {side} | {1e3 * seconds[side]:.2f} ms | {peak / 2**30:.2f} GiB | {memory} |"
    kernel, cudnn, theirs, xla = (seconds.get(side) for side in ALONE_SIDES)
    if kernel and theirs:  # as gpu.py's rate rows: above 1, wyjax is faster
      rates = (
        f"**{theirs / kernel:.2f}×** GPU kernel"
        + (f", {theirs / cudnn:.2f}× cuDNN" if cudnn else "")
        + (f", {theirs / xla:.2f}× XLA path" if xla else "")
      )
      yield f"| attention | {measurement} | wyjax ÷ transformers | {rates} | | |"
    if out_of_time:
      yield (
        f"| attention | {measurement} | – | not run: past the {budget_s:.0f} s budget | | "
        f"{len(ALONE_CELLS) - done} of {len(ALONE_CELLS)} measurements not complete |"
      )
      return


def _alone_config(attention_choice: str = "xla") -> EncoderConfig:
  return EncoderConfig(
    **{**BASE, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
    num_hidden_layers=1,
    attention=attention_choice,
  )


def _alone_inputs(config: EncoderConfig, length: int, dtype):
  """Hidden states [TOKENS / L, L, hidden] and relative embeddings [2S, hidden], N(0, 1)."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((TOKENS // length, length, config.hidden_size), np.float32)
  rel = rng.standard_normal((2 * config.relative_span, config.hidden_size), np.float32)
  return x.astype(dtype), rel.astype(dtype)


def _measure_jax_attention(side: str, length: int, name: str, repeats: int):
  config = _alone_config({"wyjax GPU kernel": "pallas", "wyjax cuDNN": "auto"}.get(side, "xla"))
  if side == "wyjax cuDNN":  # "auto" trains through cuDNN without attention dropout
    config = config.replace(attention_probs_dropout_prob=0.0)
  module = deberta_v2.DisentangledAttention(config)
  x, rel = (jnp.asarray(a) for a in _alone_inputs(config, length, jnp.bfloat16))
  mask = layers.expand_mask(jnp.ones(x.shape[:2], jnp.int32))
  params = deberta_v2.DisentangledAttention(
    _alone_config()
  ).init(  # the same parameters, by the XLA path
    jax.random.key(0), x[:1, :8], mask[:1, ..., :8], rel, None, True
  )
  if name == "forward":
    fn = lambda params, x, rel, mask: module.apply(params, x, mask, rel, None, True)
  else:
    fn = jax.grad(
      lambda params, x, rel, mask: (
        module.apply(params, x, mask, rel, None, False, rngs={"dropout": jax.random.key(1)}).astype(jnp.float32).sum()
      ),
      argnums=(0, 1, 2),
    )
  compiled = jax.jit(fn).lower(params, x, rel, mask).compile()
  memory = compiled.memory_analysis()
  peak = buffer_bytes(memory)
  return _median_seconds(lambda: jax.block_until_ready(compiled(params, x, rel, mask)), repeats), peak


def _measure_torch_attention(side: str, length: int, name: str, repeats: int):
  """transformers' DebertaV2Attention, bf16, eager, on the GPU."""
  del side
  import torch  # pylint: disable=g-import-not-at-top
  from transformers.models.deberta_v2 import modeling_deberta_v2  # pylint: disable=g-import-not-at-top

  module = modeling_deberta_v2.DebertaV2Attention(_hf_config(1, dropout=0.1)).to("cuda", torch.bfloat16)
  x, rel = (torch.from_numpy(a).to("cuda", torch.bfloat16) for a in _alone_inputs(_alone_config(), length, np.float32))
  mask = torch.ones(x.shape[:2], dtype=torch.bool, device="cuda")
  mask = mask[:, None, None, :] & mask[:, None, :, None]  # as DebertaV2Encoder.get_attention_mask builds it

  def forward(module, x, mask, rel):
    with torch.no_grad():
      module(x, mask, rel_embeddings=rel)

  def forward_backward(module, x, mask, rel):
    module(x, mask, rel_embeddings=rel)[0].float().sum().backward()

  if name == "forward":
    module.eval()
    run = forward
  else:
    module.train()
    x.requires_grad_(True)
    rel.requires_grad_(True)
    run = forward_backward
  held = [module, x, mask, rel]  # the run's only references once the names below are deleted
  del module, x, rel, mask
  try:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    seconds = _median_seconds(lambda: (run(*held), torch.cuda.synchronize()), repeats)
    return seconds, torch.cuda.max_memory_allocated()
  finally:  # out of memory too: the next cell starts with the GPU's memory free
    held.clear()
    torch.cuda.empty_cache()


def kernel_errors(
  config: EncoderConfig, length: int, dtype: str = "float32", prefix: bool = False, wrap=lambda f: f, **jit_kwargs
) -> dict[str, float]:
  """The GPU kernel's largest errors against the XLA path, relative to the XLA path's largest entry.

  The kernel runs through attention.fused_attention (interpreted on a CPU), the XLA path as
  deberta_v2 and bert run it, on random inputs: the errors of the output (at the real queries) and
  of the gradient of each input ("dq", …, "dpos_query") of sum(output · weights). Used by --smoke
  and tests/models/attention_gpu_test.py.

  Two rows of `length` tokens: q, k, v and the relative projections config's pos_att_type uses
  ([2S, heads, d]), N(0, 1) in dtype; a prefix-LM mask (a causal target after a bidirectional
  12-token source, as WYWMT's) or padding: the first row's first 3 keys and 3 in its middle
  (the kernel reads the mask per key), the second row's from 29 on. wrap, jit_kwargs: the
  kernel's program's (a mesh's constraints and shardings)."""
  rng = np.random.default_rng(0)
  heads, d = config.num_attention_heads, config.head_dim
  draw = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32).astype(dtype)
  inputs = {name: draw(2, length, heads, d) for name in ("q", "k", "v")}
  if config.relative_attention:
    inputs |= {
      name: draw(2 * config.relative_span, heads, d)
      for term, name in (("c2p", "pos_key"), ("p2c", "pos_query"))
      if term in config.pos_att_type
    }
  positions = np.arange(length)
  if prefix:
    mask = np.broadcast_to((positions[None, :] <= positions[:, None]) | (positions[None, :] < 12), (2, length, length))
  else:
    mask = np.stack([(positions >= 3) & ((positions < 16) | (positions >= 19)), positions < 29])
  mask = layers.expand_mask(jnp.asarray(mask, jnp.int32))
  real = 1 if prefix else mask[:, 0, 0, :, None, None]
  weights = jnp.asarray(rng.standard_normal((2, length, heads, d)), jnp.float32) * real
  scale = np.sqrt(d * (1 + len(config.pos_att_type))).astype(np.float32)

  def kernel(q, k, v, pos_key=None, pos_query=None):
    return attention.fused_attention(
      q,
      k,
      v,
      mask,
      scale=scale,
      pos_key=pos_key,
      pos_query=pos_query,
      relative_index=lambda distance: deberta_v2.relative_rows(distance, config),
      target="gpu",
    )

  class XLA(nn.Module):  # the XLA path runs inside a module: its softmax's dropout is one
    @nn.compact
    def __call__(self, q, k, v, pos_key=None, pos_query=None):
      if config.relative_attention:
        return deberta_v2.xla_attention(config, q, k, v, mask, scale, pos_key, pos_query, None, True)
      scores = jnp.einsum("bqnd,bknd->bnqk", q / scale.astype(q.dtype), k)
      return layers.masked_softmax_attention(scores, mask, v, dropout_rate=0.0, deterministic=True, dtype=q.dtype)

  def output_and_grads(attend, wrap=lambda f: f, **jit_kwargs):
    """{"output": at the real queries, "d<input>": gradient}, from one jitted program.

    Its float32 products are exact on a GPU too (the XLA path's default there is TF32, the Triton kernel's IEEE).
    """

    def loss(inputs):
      output = attend(**inputs).astype(jnp.float32)
      return (output * weights).sum(), output * real

    with jax.default_matmul_precision("highest"):
      (_, output), grads = jax.jit(wrap(jax.value_and_grad(loss, has_aux=True)), **jit_kwargs)(inputs)
    return {"output": output} | {f"d{name}": grad.astype(jnp.float32) for name, grad in grads.items()}

  ours = output_and_grads(kernel, wrap, **jit_kwargs)
  ref = output_and_grads(lambda **inputs: XLA().apply({}, **inputs))
  return {name: float(jnp.max(jnp.abs(ours[name] - ref[name])) / jnp.max(jnp.abs(ref[name]))) for name in ref}


_TINY_LAYOUT = EncoderConfig(
  vocab_size=40,
  hidden_size=64,
  num_hidden_layers=1,
  num_attention_heads=2,
  intermediate_size=64,
  max_position_embeddings=128,
  relative_attention=True,
  position_buckets=32,
  pos_att_type="p2c|c2p",
  share_att_key=True,
  position_biased_input=False,
)  # DeBERTa-tiny's: 32 log buckets


def _errors_row(config: EncoderConfig, length: int) -> str:
  """`kernel_errors` in config's position layout, fp32, 2 × length tokens."""
  errors = kernel_errors(config, length)
  output_error = errors.pop("output")
  where = "interpreted on the CPU" if jax.default_backend() == "cpu" else jax.devices()[0].device_kind
  return (
    f"| attention | GPU kernel vs XLA path, fp32, 2 × {length} tokens (padding at the start, inside and at "
    f"the end of rows), {config.num_attention_heads} heads of {config.head_dim}, {config.position_buckets} log "
    f"buckets, c2p+p2c | wyjax | largest relative error: output {output_error:.1e}, gradients "
    f"{max(errors.values()):.1e} | | {where} |"
  )


def table(path: str) -> str:
  """docs/benchmarks.md's table from this script's saved output."""
  lines = [json.loads(line) for line in open(path)]
  header, cells = lines[0], [c for c in lines[1:] if "error" not in c]
  by_cell = {}
  for c in cells:
    by_cell.setdefault((c["layers"], c["length"], c["pass"]), {})[c["attention"]] = c
  predicted = cells and cells[0].get("predicted")
  out = [
    f"{header['device']}, jax {header['jax']}, {header['date']}" + (", compile-only predictions" if predicted else ""),
    "",
  ]
  if predicted:
    out += [
      "| layers | L | pass | xla: ms (roofline) | xla: HBM GiB | xla: temp GiB | pallas: ms (roofline) "
      "| pallas: HBM GiB | pallas: temp GiB | speed-up |",
      "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (depth, length, name), by in sorted(by_cell.items()):
      x, p = by.get("xla"), by.get("pallas")
      fmt = lambda c: (
        f"{c['roofline_ms']:.2f} | {c['bytes_accessed'] / 2**30:.1f} | {c['temp_bytes'] / 2**30:.2f}"
        if c
        else "n/a | | "
      )
      ratio = f"{x['roofline_ms'] / p['roofline_ms']:.0f}x" if x and p else ""
      out.append(f"| {depth} | {length} | {name} | {fmt(x)} | {fmt(p)} | {ratio} |")
  else:
    names = sorted({c["attention"] for c in cells})
    out += [
      "| layers | L | pass | " + " | ".join(f"{n}: ms (peak GiB)" for n in names) + " |",
      "|---|---|---|" + "---|" * len(names),
    ]
    for (depth, length, name), by in sorted(by_cell.items()):
      fmt = lambda c: f"{c['ms']:.1f} ({(c['peak_bytes'] or 0) / 2**30:.2f})" if c else "n/a"
      out.append(f"| {depth} | {length} | {name} | " + " | ".join(fmt(by.get(n)) for n in names) + " |")
  return "\n".join(out)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--predict", default="", help="a TPU topology: compile-only figures for one of its chips")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--layers", default="1,12", help="encoder depths: 1 (one layer) and 12 (base)")
  parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
  parser.add_argument("--table", default="", help="print the markdown table of a saved output and exit")
  parser.add_argument("--alone", action="store_true", help="the attention alone, as markdown rows (`gpu_rows`)")
  parser.add_argument("--smoke", action="store_true", help="with --alone: the interpreted GPU kernel against XLA, CPU")
  parser.add_argument("--budget_s", type=float, default=1800, help="with --alone: cells start within this time")
  args = parser.parse_args()
  if args.table:
    print(table(args.table))
    return
  if args.alone:
    print(ALONE_HEADER, flush=True)
    for row in gpu_rows(args.smoke, args.budget_s, args.repeats):
      print(row, flush=True)
    return
  layer_counts, lengths = [int(x) for x in args.layers.split(",")], [int(x) for x in args.lengths.split(",")]
  cells = (
    predict(args.predict, layer_counts, lengths) if args.predict else measure_jax(args.repeats, layer_counts, lengths)
  )
  print(
    json.dumps(
      {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": args.predict or jax.devices()[0].device_kind,
        "date": time.strftime("%Y-%m-%d"),
      }
    ),
    flush=True,
  )
  for cell in cells:
    print(json.dumps(cell), flush=True)
  if not args.predict and jax.default_backend() == "gpu":
    for cell in measure_torch(args.repeats, layer_counts, lengths):
      print(json.dumps(cell), flush=True)


if __name__ == "__main__":
  main()

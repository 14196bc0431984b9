"""How long a GPU step will take: every kernel of a compiled program (gpu_program's launches)
costed on a card (`Card`: aot.gpu_card("h200")), summed.

Each launch costs XLA's own estimate where it wrote a sane one, else a bound from its FLOPs and
bytes at the card's figures and the attainable fractions below, plus a launch overhead; their
sum is the predicted step. Any dump folder of a GPU compile can be costed, taken with

    XLA_FLAGS="--xla_dump_to=DIR --xla_gpu_collect_cost_model_stats=true"
    python -m wyjax.core.gpu_step_time DIR --card=h200 [--tokens=16384] [--module=train_step]

(the second flag writes XLA's estimates; without it every fusion is bounded by its bytes). A step
compiled on a real GPU is autotuned: GEMMs may become cuBLAS calls instead of the Triton fusions
chosen here by heuristics, which is why a GEMM is costed from its FLOPs, never from XLA's
estimate of the tiling a GPU replaces.
"""
import argparse
import collections
import dataclasses
import json
import sys
from pathlib import Path

from wyjax.core import gpu_program

# Every constant of the prediction, with its source.
# A launch's stream time besides its work: XLA's own figure (GpuPerformanceModelBase::
# kKernelLaunchOverhead, xla/service/gpu/model/gpu_performance_model_base.h: 1 µs), what XLA's
# fusion decisions charge per kernel; XLA runs a step's kernels from command buffers (CUDA graphs)
# by default (xla_gpu_enable_command_buffer), so each costs no host-side launch.
LAUNCH_SECONDS = 1e-6
# The fraction of the tensor cores' dense peak a tuned matmul kernel reaches: FlashAttention-3
# (Shah et al. 2024, arXiv:2407.08608, abstract) reaches 740 of an H100's 989 bf16 TFLOP/s, 75%.
# Taken for GEMMs, cuDNN's attention and a Triton kernel's dots alike: the figure of a tuned
# kernel, an upper one for small or untuned ones.
MATMUL_FRACTION = 0.75
# Memory is read at the card's nominal bandwidth, as XLA's own estimates take it: no fraction.
# A collective's latency besides its bytes: XLA's kNcclKernelLaunchOverhead (the same header), 5 µs.
COLLECTIVE_SECONDS = 5e-6
# XLA's estimate of a kernel is used unless it exceeds this many times the time of the kernel's
# bytes at the bandwidth its grid can draw (plus a launch). In the 14 validation programs
# (benchmarks/gpu_predictions.py) XLA's estimates of its own emitters' fusions were within 9× of
# that bound (8,543 launches), those of its Triton fusions (softmax, norms) 63× to 3.5·10⁸× (496;
# 1.7 ms for a 25 MB LayerNorm, 2.4·10³ s for another): a cut between the two, not a fit.
ABSURD = 20
# Ring collectives move this share of their operand over each link (NVIDIA/nccl-tests,
# doc/PERFORMANCE.md: bus bandwidth = algorithm bandwidth × 2(n−1)/n for all-reduce, (n−1)/n
# for reduce-scatter and all-to-all; an all-gather sends (n−1) of its operands; a permute one).
RING_SHARE = {"all-reduce": lambda n: 2 * (n - 1) / n, "reduce-scatter": lambda n: (n - 1) / n,
              "all-to-all": lambda n: (n - 1) / n, "all-gather": lambda n: n - 1.0,
              "collective-permute": lambda n: 1.0}


@dataclasses.dataclass(frozen=True)
class Card:
  """The figures of a GPU a kernel's time is bounded by (aot.gpu_card builds one from its datasheet)."""
  name: str
  matmul_flops: float  # dense bf16 tensor-core FLOP/s; TF32 runs at half
  fp32_flops: float  # the CUDA cores' float32 FLOP/s (a matmul at precision HIGHEST)
  hbm_bandwidth: float  # bytes/s
  link_bandwidth: float  # NVLink, bytes/s each way
  sms: int

  def matmul_rate(self, precision: str) -> float:
    return {"bf16": self.matmul_flops, "tf32": self.matmul_flops / 2, "f32": self.fp32_flops}[precision]


def seconds(launch: gpu_program.Launch, card: Card) -> tuple[float, str]:
  """(seconds of one run of a launch on `card`, what they came from): a collective from its bytes
  at the interconnect; a kernel with matmul FLOPs from them and its bytes; another from XLA's
  estimate where it is sane, else from its bytes at the bandwidth its grid can draw."""
  if launch.collective:
    share = RING_SHARE.get(launch.collective, lambda n: 1.0)(launch.peers)
    return COLLECTIVE_SECONDS + share * launch.bytes / card.link_bandwidth, "interconnect"
  occupied = min(launch.blocks, card.sms) / card.sms if launch.blocks else 1.0
  memory = launch.bytes / (card.hbm_bandwidth * occupied)
  if launch.flops:
    matmul = launch.flops / (card.matmul_rate(launch.precision) * MATMUL_FRACTION * occupied)
    return LAUNCH_SECONDS + max(matmul, memory), "flops and bytes"
  if launch.xla_seconds is not None and launch.xla_seconds <= ABSURD * (memory + LAUNCH_SECONDS):
    return LAUNCH_SECONDS + launch.xla_seconds, "xla estimate"
  return LAUNCH_SECONDS + memory, "bytes" if launch.xla_seconds is None else "bytes (xla estimate absurd)"


@dataclasses.dataclass(frozen=True)
class Timed:
  launch: gpu_program.Launch
  seconds: float  # all its repeats
  source: str


@dataclasses.dataclass(frozen=True)
class Prediction:
  card: Card
  kernels: tuple[Timed, ...]

  @property
  def seconds(self) -> float:
    return sum(k.seconds for k in self.kernels)

  def by_kind(self) -> dict[str, float]:
    """Seconds by kernel kind, the most first."""
    total = collections.Counter()
    for k in self.kernels:
      total[k.launch.kind] += k.seconds
    return dict(total.most_common())

  def top(self, count: int = 10) -> list[dict]:
    """The `count` most expensive kernels, each HLO instruction's launches together."""
    total, first = collections.Counter(), {}
    for k in self.kernels:
      total[k.launch.name] += k.seconds
      first.setdefault(k.launch.name, k)
    return [{"name": name, "kind": first[name].launch.kind, "seconds": spent, "source": first[name].source}
            for name, spent in total.most_common(count)]

  def report(self, tokens: int | None = None) -> dict:
    """The figures a compile-only report's JSON line carries."""
    sources = collections.Counter(k.source for k in self.kernels)
    result = {"predicted_step_seconds": self.seconds, "predicted_card": self.card.name,
              "predicted_seconds_by_kind": self.by_kind(), "predicted_top_kernels": self.top(),
              "predicted_kernels_by_source": dict(sources.most_common())}
    if tokens:
      result["predicted_tokens_per_second"] = tokens / self.seconds
    return result


def predict(program: gpu_program.GpuProgram, card: Card) -> Prediction:
  """Every launch of `program` costed on `card`; their sum is the predicted step."""
  timed = []
  for launch in program.launches:
    once, source = seconds(launch, card)
    timed.append(Timed(launch, once * launch.repeats, source))
  return Prediction(card, tuple(timed))


def describe(result: dict) -> list[str]:
  """A report's predicted step as readable lines: the step, where its time goes by kind, and
  its ten most expensive kernels."""
  step = result["predicted_step_seconds"]
  milliseconds = f"{step * 1e3:.{1 if step >= 1e-3 else 4}f}"
  rate = (f", {result['predicted_tokens_per_second']:,.0f} tokens/s"
          if "predicted_tokens_per_second" in result else "")
  kinds = ", ".join(f"{name} {spent * 1e3:.2f}" for name, spent in result["predicted_seconds_by_kind"].items())
  sources = ", ".join(f"{source} {n}" for source, n in result["predicted_kernels_by_source"].items())
  lines = [f"  predicted step on each {result['predicted_card']}: {milliseconds} ms{rate} (kernels costed from: "
           f"{sources})",
           f"  by kind, ms: {kinds}",
           "  most expensive kernels:"]
  lines += [f"    {k['seconds'] * 1e3:8.3f} ms  {k['name']} ({k['kind']}; {k['source']})"
            for k in result["predicted_top_kernels"]]
  return lines


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description="The predicted step time of a GPU compile's XLA dump folder, "
                                   "kernel by kernel (see this module's docstring for the flags to dump with).")
  parser.add_argument("dump", type=Path, help="the folder XLA_FLAGS=--xla_dump_to=DIR wrote")
  parser.add_argument("--card", default="h100", help="h100, h200 or a100 (wyjax.core.aot.GPU_CARDS)")
  parser.add_argument("--module", default="", help="the module whose name contains this (default: the largest)")
  parser.add_argument("--tokens", type=int, default=0, help="tokens per step, for tokens/s")
  args = parser.parse_args(argv)
  from wyjax.core import aot  # pylint: disable=g-import-not-at-top  (aot imports this module)
  if args.card not in aot.GPU_CARDS:
    sys.exit(f"--card={args.card}: expected one of {sorted(aot.GPU_CARDS)}")
  program, _ = gpu_program.read_dump(args.dump, args.module)
  result = {**program.summary(), **predict(program, aot.gpu_card(args.card)).report(args.tokens or None)}
  print(f"{args.dump}: {program.kernel_count:,} kernels")
  print("\n".join(describe(result)))
  print(json.dumps(result))


if __name__ == "__main__":
  main()

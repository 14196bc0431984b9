"""How long a GPU step will take: every kernel of a compiled program costed on a card, then calibrated.

Each launch (gpu_program) costs, at the card's figures (accelerators.GPU_CARDS): a GEMM its FLOPs
at the rate XLA measured for its shape (gemm_table), cuDNN's attention and a Pallas kernel's dots
theirs at a figure below, other kernels XLA's own estimate where it wrote a sane one, else their
bytes; each the longer of that and its bytes, plus a launch. Their sum is the uncalibrated step.
The predicted step multiplies each kernel's time by the factor of its kind, fitted on profiled
steps (gpu_calibration.json, with the error on programs held out of the fit: every report's band).
Any dump folder of a GPU compile can be costed:

    XLA_FLAGS="--xla_dump_to=DIR --xla_gpu_collect_cost_model_stats=true"
    python -m wyjax.aot.gpu_step_time DIR --card=h200 [--tokens=16384] [--module=train_step]

(the second flag writes XLA's estimates; without it every fusion is bounded by its bytes).
"""

import argparse
import collections
import dataclasses
import functools
import json
import pathlib
import sys

from wyjax.aot import gemm_table, gpu_program
from wyjax.aot.accelerators import GPU_CARDS, GpuCard

# Every constant of the uncalibrated cost, with its source.
# A launch's stream time besides its work: XLA's own figure (GpuPerformanceModelBase::
# kKernelLaunchOverhead, xla/service/gpu/model/gpu_performance_model_base.h: 1 µs), what XLA's
# fusion decisions charge per kernel; XLA runs a step's kernels from command buffers (CUDA graphs)
# by default (xla_gpu_enable_command_buffer), so each costs no host-side launch.
LAUNCH_SECONDS = 1e-6
# cuDNN's flash attention, which no table measures: FlashAttention-3 (Shah et al. 2024,
# arXiv:2407.08608, abstract) reaches 740 of an H100's 989 bf16 TFLOP/s, 75%, at its best (large
# head dimensions, long sequences); an upper figure at BERT's head dimension of 64. A Pallas
# kernel's dots are costed at the peak: its own calibration factor says how far it falls short.
ATTENTION_FRACTION = 0.75
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
RING_SHARE = {
  "all-reduce": lambda n: 2 * (n - 1) / n,
  "reduce-scatter": lambda n: (n - 1) / n,
  "all-to-all": lambda n: (n - 1) / n,
  "all-gather": lambda n: n - 1.0,
  "collective-permute": lambda n: 1.0,
}
# The shipped factors; benchmarks/gpu_predictions.py fits new ones.
CALIBRATION = pathlib.Path(__file__).with_name("gpu_calibration.json")


def seconds(launch: gpu_program.Launch, card: GpuCard) -> tuple[float, str]:
  """(seconds of one run of a launch on `card`, uncalibrated, and what they came from)."""
  if launch.collective:
    share = RING_SHARE.get(launch.collective, lambda n: 1.0)(launch.peers)
    return COLLECTIVE_SECONDS + share * launch.bytes / card.link_bandwidth, "interconnect"
  occupied = min(launch.blocks, card.sms) / card.sms if launch.blocks else 1.0
  memory = launch.bytes / (card.hbm_bandwidth * occupied)
  rate = card.matmul_rate(launch.precision)
  if launch.gemms:  # from its shape, never from XLA's estimate of the tiling a GPU's autotuning replaces
    matmul = sum(
      2.0 * b * m * n * k / (rate * gemm_table.fraction_of_peak(b, m, n, k, launch.precision))
      for b, m, n, k in launch.gemms
    )
    return LAUNCH_SECONDS + max(matmul, memory), "gemm table"
  if launch.flops:
    fraction = ATTENTION_FRACTION if launch.kind == "cudnn" else 1.0
    return LAUNCH_SECONDS + max(launch.flops / (rate * fraction * occupied), memory), "flops and bytes"
  if launch.xla_seconds is not None and launch.xla_seconds <= ABSURD * (memory + LAUNCH_SECONDS):
    return LAUNCH_SECONDS + launch.xla_seconds, "xla estimate"
  return LAUNCH_SECONDS + memory, "bytes" if launch.xla_seconds is None else "bytes (xla estimate absurd)"


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Factors fitted on measured kernels, by kernel kind.

  A kernel takes `factors[its kind]` times its uncalibrated time (a kind the fit measured no kernel
  of, `default`), a collective its time as costed.
  """

  factors: dict[str, float]
  default: float
  band: tuple[float, float]  # measured ÷ calibrated on the programs held out of the fit, lowest and highest
  summary: str  # what it was fitted on and how it did, in a line

  def factor(self, kind: str) -> float:
    """The factor of a kernel kind."""
    return 1.0 if kind == "collective" else self.factors.get(kind, self.default)

  def apply(self, launch: gpu_program.Launch, uncalibrated: float) -> float:
    """A launch's calibrated seconds from its uncalibrated ones."""
    return self.factor(launch.kind) * uncalibrated


@functools.cache
def calibration() -> Calibration:
  """The factors gpu_calibration.json holds."""
  fitted = json.loads(CALIBRATION.read_text())
  return Calibration(fitted["factors"], fitted["default_factor"], tuple(fitted["held_out_band"]), fitted["summary"])


@dataclasses.dataclass(frozen=True)
class Timed:
  """A launch with its predicted time."""

  launch: gpu_program.Launch
  uncalibrated: float  # all its repeats, at the card's figures
  seconds: float  # all its repeats, calibrated
  source: str


@dataclasses.dataclass(frozen=True)
class Prediction:
  """A program's every kernel, timed on a card."""

  card: GpuCard
  kernels: tuple[Timed, ...]
  calibration: Calibration

  @property
  def seconds(self) -> float:
    """The predicted step: every kernel calibrated."""
    return sum(k.seconds for k in self.kernels)

  @property
  def uncalibrated(self) -> float:
    """The step at the card's and XLA's figures, every kernel as costed."""
    return sum(k.uncalibrated for k in self.kernels)

  def band(self) -> tuple[float, float]:
    """The step's range by the held-out error.

    Its prediction times the lowest and highest measured ÷ calibrated of the programs held out of the fit.
    """
    low, high = self.calibration.band
    return self.seconds * low, self.seconds * high

  def by_kind(self) -> dict[str, float]:
    """Calibrated seconds by kernel kind, the most first."""
    total = collections.Counter()
    for k in self.kernels:
      total[k.launch.kind] += k.seconds
    return dict(total.most_common())

  def top(self, count: int = 10) -> list[dict]:
    """The `count` most expensive kernels (calibrated), each HLO instruction's launches together."""
    total, first = collections.Counter(), {}
    for k in self.kernels:
      total[k.launch.name] += k.seconds
      first.setdefault(k.launch.name, k)
    return [
      {"name": name, "kind": first[name].launch.kind, "seconds": spent, "source": first[name].source}
      for name, spent in total.most_common(count)
    ]

  def report(self, tokens: int | None = None) -> dict:
    """The figures a compile-only report's JSON line carries; `predicted_step_seconds` is the calibrated step."""
    sources = collections.Counter(k.source for k in self.kernels)
    result = {
      "predicted_step_seconds": self.seconds,
      "predicted_step_band_seconds": list(self.band()),
      "predicted_uncalibrated_step_seconds": self.uncalibrated,
      "predicted_card": self.card.name,
      "predicted_calibration": self.calibration.summary,
      "predicted_seconds_by_kind": self.by_kind(),
      "predicted_top_kernels": self.top(),
      "predicted_kernels_by_source": dict(sources.most_common()),
    }
    if tokens:
      result["predicted_tokens_per_second"] = tokens / self.seconds
    return result

  def kernel_records(self) -> list[dict]:
    """Every launch's prediction, for joining with a profile of the same compile and refitting on it.

    The join: benchmarks/profile_vs_prediction.py.
    """
    return [
      {
        "name": k.launch.name,
        "kernel": k.launch.kernel,
        "kind": k.launch.kind,
        "repeats": k.launch.repeats,
        "uncalibrated": k.uncalibrated,
        "seconds": k.seconds,
      }
      for k in self.kernels
    ]


def predict(program: gpu_program.GpuProgram, card: GpuCard, fitted: Calibration | None = None) -> Prediction:
  """Every launch of `program` costed on `card` and calibrated; their sum is the predicted step.

  fitted: the factors; gpu_calibration.json's by default.
  """
  fitted = fitted or calibration()
  timed = []
  for launch in program.launches:
    once, source = seconds(launch, card)
    timed.append(Timed(launch, once * launch.repeats, fitted.apply(launch, once * launch.repeats), source))
  return Prediction(card, tuple(timed), fitted)


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:,.{1 if seconds >= 1e-3 else 4}f}"


def describe(result: dict) -> list[str]:
  """A report's predicted step as readable lines.

  The calibrated step with its band, the bounds below it (the uncalibrated sum, the roofline where
  the report has one), where the time goes by kind, and the ten most expensive kernels.
  """
  step, (low, high) = result["predicted_step_seconds"], result["predicted_step_band_seconds"]
  rate = f", {result['predicted_tokens_per_second']:,.0f} tokens/s" if "predicted_tokens_per_second" in result else ""
  uncalibrated = _ms(result["predicted_uncalibrated_step_seconds"])
  bounds = f"every kernel at the card's and XLA's figures (uncalibrated) {uncalibrated} ms"
  if "roofline_step_seconds" in result:
    bounds += (
      f", the roofline {_ms(result['roofline_step_seconds'])} ms ({result['bound']}-bound, "
      f"{result['tokens_per_second']:,.0f} tokens/s, MFU ceiling {result['mfu_ceiling']:.1%})"
    )
  kinds = ", ".join(f"{name} {spent * 1e3:.2f}" for name, spent in result["predicted_seconds_by_kind"].items())
  sources = ", ".join(f"{source} {n}" for source, n in result["predicted_kernels_by_source"].items())
  lines = [
    f"  predicted step on each {result['predicted_card']}: {_ms(step)} ms{rate}, held-out error band "
    f"{_ms(low)}–{_ms(high)} ms ({result['predicted_calibration']})",
    f"  bounds below it: {bounds}",
    f"  by kind, ms (calibrated): {kinds} (kernels costed from: {sources})",
    "  most expensive kernels (calibrated):",
  ]
  lines += [
    f"    {k['seconds'] * 1e3:8.3f} ms  {k['name']} ({k['kind']}; {k['source']})"
    for k in result["predicted_top_kernels"]
  ]
  return lines


def main(argv=None) -> None:
  """Prints the predicted step of a dump folder: its readable lines, then one JSON line."""
  parser = argparse.ArgumentParser(
    description="The predicted step time of a GPU compile's XLA dump folder, "
    "kernel by kernel (see this module's docstring for the flags to dump with)."
  )
  parser.add_argument("dump", type=pathlib.Path, help="the folder XLA_FLAGS=--xla_dump_to=DIR wrote")
  parser.add_argument("--card", default="h100", help=f"one of {sorted(GPU_CARDS)}")
  parser.add_argument("--module", default="", help="the module whose name contains this (default: the largest)")
  parser.add_argument("--tokens", type=int, default=0, help="tokens per step, for tokens/s")
  args = parser.parse_args(argv)
  if args.card not in GPU_CARDS:
    sys.exit(f"--card={args.card}: expected one of {sorted(GPU_CARDS)}")
  program, _ = gpu_program.read_dump(args.dump, args.module)
  result = {**program.summary(), **predict(program, GPU_CARDS[args.card]).report(args.tokens or None)}
  print(f"{args.dump}: {program.kernel_count:,} kernels")
  print("\n".join(describe(result)))
  print(json.dumps(result))


if __name__ == "__main__":
  main()

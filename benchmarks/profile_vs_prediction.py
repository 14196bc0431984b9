"""Where the predicted GPU step is wrong, kernel by kernel: each profiled step of `benchmarks/gpu.py --profile=DIR`.

    python benchmarks/profile_vs_prediction.py DIR

Beside each wyjax trace it takes on a GPU, gpu.py writes prediction.json: every kernel of the
compile it timed as wyjax.aot.gpu_step_time costed it (calibrated and not, with its kind), the
step's measured time and how many steps the trace holds. This joins the two and prints, per
trace, the measured and predicted milliseconds a step by kernel kind with their ratio, then the
20 kernels with the largest absolute error. A measured kernel is matched to the predicted one by
the HLO op jax's trace names it by, else by its kernel name; a kernel matched by neither (a
library's own, where the trace names no op) is counted under the kind its name says, or
"unmatched". Traces without a prediction (on a CPU, `--smoke`) are listed as such.
benchmarks/gpu_predictions.py --measured fits the calibration's factors on this join.
"""

import collections
import json
import pathlib
import re
import sys

import profile_traces  # benchmarks/, beside this file

PREDICTION = "prediction.json"
TOP = 20
GRAPH = "command_buffer"  # the HLO op jax's trace gives a kernel launched from a CUDA graph
# A library kernel's kind by its name, where the trace names no HLO op for it.
LIBRARY_KINDS = (
  ("gemm", r"gemm|xmma|cutlass|cublas|nvjet"),
  ("cudnn", r"cudnn|fmha|sdpa|flash"),
  ("collective", r"nccl"),
  ("device copy", r"memcpy"),
  ("memset", r"memset"),
)


def _key(name: str) -> str:
  return name.replace(".", "_")


def join(events: list[tuple[str, str, float]], prediction: dict) -> tuple[dict, list[dict]]:
  """A trace's events joined with a prediction's kernels: (by kind, every kernel).

  By kind: {kind: [measured, predicted, uncalibrated] seconds a step}; every kernel:
  {kernel, kind, measured, predicted, launches}, seconds and measured launches a step.
  """
  steps = prediction["steps"]
  kinds = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
  kernels = {}  # kernel name → its row
  by_name, by_kernel = {}, {}
  for k in prediction["kernels"]:
    row = kernels.setdefault(
      _key(k["kernel"] or k["name"]),
      {"kernel": k["kernel"] or k["name"], "kind": k["kind"], "measured": 0.0, "predicted": 0.0, "launches": 0.0},
    )
    row["predicted"] += k["seconds"]
    by_name[_key(k["name"])] = by_kernel[_key(k["kernel"] or k["name"])] = row
    kinds[k["kind"]][1] += k["seconds"]
    kinds[k["kind"]][2] += k["uncalibrated"]
  for name, hlo_op, micros in events:
    row = by_name.get(_key(hlo_op)) or by_kernel.get(_key(name))
    if row is None:
      kind = next((kind for kind, pattern in LIBRARY_KINDS if re.search(pattern, name, re.IGNORECASE)), "unmatched")
      row = kernels.setdefault(
        f"measured:{name}", {"kernel": name, "kind": kind, "measured": 0.0, "predicted": 0.0, "launches": 0.0}
      )
    row["measured"] += micros * 1e-6 / steps
    row["launches"] += 1 / steps
    kinds[row["kind"]][0] += micros * 1e-6 / steps
  return dict(kinds), list(kernels.values())


def _ratio(measured: float, predicted: float) -> str:
  return f"**{measured / predicted:.2f}**" if predicted and measured else "–"


def report(name: str, events: list, prediction: dict) -> str:
  """One trace's two tables, markdown."""
  kinds, kernels = join(events, prediction)
  measured, predicted = sum(k[0] for k in kinds.values()), sum(k[1] for k in kinds.values())
  graphed = sum(op.startswith(GRAPH) for _, op, _ in events)
  lines = [
    f"### {name}: measured {measured * 1e3:.3f} ms a step, predicted {predicted * 1e3:.3f} (calibrated; "
    f"{prediction['card']}, {prediction['steps']} steps profiled)",
    "",
    *(
      [
        f"{graphed} kernels ran in CUDA graphs, which the trace names instead of their HLO op: those were "
        "matched by kernel name alone, a library's (cuBLAS, cuDNN) by its kind",
        "",
      ]
      if graphed
      else []
    ),
    "| kind | measured, ms | predicted, ms | measured ÷ predicted | uncalibrated, ms |",
    "|---|---:|---:|---:|---:|",
  ]
  lines += [
    f"| {kind} | {m * 1e3:.3f} | {p * 1e3:.3f} | {_ratio(m, p)} | {u * 1e3:.3f} |"
    for kind, (m, p, u) in sorted(kinds.items(), key=lambda item: -max(item[1][:2]))
  ]
  lines += [
    "",
    f"| kernel (the {TOP} largest errors) | kind | measured, ms | predicted, ms | measured − predicted, ms |",
    "|---|---|---:|---:|---:|",
  ]
  worst = sorted(kernels, key=lambda k: -abs(k["measured"] - k["predicted"]))[:TOP]
  lines += [
    f"| `{k['kernel'][:80]}` | {k['kind']} | {k['measured'] * 1e3:.3f} | {k['predicted'] * 1e3:.3f} "
    f"| {(k['measured'] - k['predicted']) * 1e3:+.3f} |"
    for k in worst
  ]
  return "\n".join(lines)


def main(root: str) -> None:
  for name, path in profile_traces.traces(root).items():
    folder = pathlib.Path(root) / name
    if "wyjax" not in name:
      continue
    if not (folder / PREDICTION).exists():
      print(f"### {name}: no {PREDICTION} beside its trace (its step ran on no GPU wyjax knows)\n")
      continue
    kind, events = profile_traces.events(path)
    print(report(f"{name} ({kind})", events, json.loads((folder / PREDICTION).read_text())) + "\n")


if __name__ == "__main__":
  main(sys.argv[1])

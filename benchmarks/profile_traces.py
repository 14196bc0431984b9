"""The top kernels by total time in each trace `benchmarks/gpu.py --profile=DIR` writes, as a table.

    python benchmarks/profile_traces.py DIR

It reads jax's traces (DIR/<name>/plugins/profile/<run>/<host>.trace.json.gz) and torch's
(DIR/<name>/trace.json) on any machine. A kernel is, on a GPU, an event on the device's streams
(jax) or of category "kernel" or a memory copy or set (torch); on a CPU (--smoke), an op of XLA's
executor threads (jax) or a torch CPU op (inclusive of the ops it calls).
"""

import collections
import gzip
import json
import pathlib
import sys

TORCH_DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def traces(root) -> dict[str, pathlib.Path]:
  """name → its trace file (jax's newest run) under `root`."""
  found = {}
  for path in sorted(pathlib.Path(root).glob("*/plugins/profile/*/*trace.json.gz")):
    found[path.parents[3].name] = path  # sorted by run: the newest last
  for path in sorted(pathlib.Path(root).glob("*/trace.json")):
    found[path.parent.name] = path
  return found


def events(path: pathlib.Path) -> tuple[str, list[tuple[str, str, float]]]:
  """(what was counted: "GPU kernels" or "CPU ops", [(name, HLO op, µs)] of every one) in one trace.

  The HLO op is the instruction that launched a kernel, as jax's trace names it (its "hlo_op"
  argument); "" where it names none.
  """
  opener = gzip.open if path.suffix == ".gz" else open
  with opener(path, "rt", encoding="utf-8") as f:
    trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
  threads = {
    (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
  }
  spans = [e for e in events if e.get("ph") == "X"]
  thread = lambda e: threads.get((e["pid"], e["tid"]), "")
  on_device = [
    e
    for e in spans
    if e.get("cat") in TORCH_DEVICE
    or processes.get(e["pid"], "").startswith("/device:GPU")
    and thread(e).startswith("Stream")
  ]
  kind, counted = "GPU kernels", on_device
  if not on_device:
    kind, counted = (
      "CPU ops",
      [
        e
        for e in spans
        if e.get("cat") == "cpu_op"
        or (
          thread(e).startswith("tf_XLAExecute")
          and not e["name"].startswith(("end: ", "ThunkExecutor", "ThreadpoolListener"))
        )
      ],
    )
  return kind, [(e["name"], str(e.get("args", {}).get("hlo_op", "")), float(e.get("dur", 0.0))) for e in counted]


def kernel_times(path: pathlib.Path) -> tuple[str, dict[str, list]]:
  """(what was counted, {kernel: [total µs, calls]}) of one trace."""
  kind, counted = events(path)
  times = collections.defaultdict(lambda: [0.0, 0])
  for name, _, micros in counted:
    times[name][0] += micros
    times[name][1] += 1
  return kind, dict(times)


def table(root, top: int = 10) -> str:
  """A markdown table: each trace's `top` kernels by total time, with their share of its total."""
  lines = ["| trace | kernel | total ms | calls | share |", "|---|---|---|---|---|"]
  for name, path in traces(root).items():
    kind, times = kernel_times(path)
    total = sum(t for t, _ in times.values()) or 1.0
    ranked = sorted(times.items(), key=lambda item: -item[1][0])[:top]
    lines += [
      f"| {name} ({kind}) | `{kernel[:90]}` | {micros / 1e3:.3f} | {calls} | {micros / total:.1%} |"
      for kernel, (micros, calls) in ranked
    ]
  return "\n".join(lines)


if __name__ == "__main__":
  print(table(sys.argv[1]))

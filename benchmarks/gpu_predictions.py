"""The predicted GPU step (wyjax.aot.gpu_step_time) against every GPU figure measured so far, and the calibration.

    JAX_PLATFORMS=cpu python benchmarks/gpu_predictions.py --calibration=FIT.json   # about 12 minutes on 2 cores
    JAX_PLATFORMS=cpu python benchmarks/gpu_predictions.py --table_only --calibration=FIT.json  # from the records
    python benchmarks/gpu_predictions.py --measured=DIR --commit=C   # add the steps gpu.py --profile=DIR measured

Each program docs/benchmarks.md measured on one H200 (POINTS) is compiled as it was measured: its
commit's tree checked out in a git worktree (--worktrees), its own code building the step, lowered
for an H200 on this CPU and dumped with XLA's estimates (kept in --dumps, so that a rerun only costs
them again). This tree's predictor costs each dump, uncalibrated, by kernel kind: one JSON line per
program in benchmarks/gpu_predictions.jsonl. The steps `benchmarks/gpu.py --profile=DIR` measured
join them (--measured), each joined with its trace kernel by kernel (profile_vs_prediction.join).
The factors are then fitted on FIT, with the error on both halves, and written to --calibration;
docs/benchmarks.md's table is rewritten from both. wyjax ships the calibration in
wyjax/aot/gpu_calibration.json: a developer copies the fit there in a clone and commits it.
"""

import argparse
import collections
import dataclasses
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

import profile_traces  # benchmarks/, beside this file
import profile_vs_prediction

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "gpu_predictions.jsonl"
DOC = REPO / "docs" / "benchmarks.md"
SHIPPED = "wyjax/aot/gpu_calibration.json"  # where wyjax reads the calibration from
PREDICTOR = (
  "wyjax/aot/gpu_step_time.py",
  "wyjax/aot/gpu_program.py",
  "wyjax/aot/optimized_hlo.py",
  "wyjax/aot/triton_ir.py",
  "wyjax/aot/gemm_table.py",
  "wyjax/aot/xla_gemm_sm90.json",
  "wyjax/aot/accelerators.py",
)
BEGIN, END = "<!-- gpu predictions table -->", "<!-- end gpu predictions table -->"
CARD = "h200"
BATCH, LENGTH = 32, 512  # the pretraining steps'; the attention part keeps 16,384 tokens a batch
TOLERANCE = 1.5  # the target: predicted ÷ measured within [1 / 1.5, 1.5]
STEP_TOLERANCE = 1.3  # the target for whole training steps


@dataclasses.dataclass(frozen=True)
class Point:
  name: str  # as docs/benchmarks.md's rows name it
  commit: str  # the tree that was measured
  program: tuple  # ("step", config, attention) or ("attention", length, pass, "kernel" | "xla")
  measured: float  # seconds, one H200 (docs/benchmarks.md, "GPU")
  route: str  # the attention it ran: "xla" or "kernel" (wyjax's Pallas/Triton GPU kernel)

  @property
  def slug(self) -> str:
    """The point's dump folder's name."""
    return "-".join(str(part).replace("/", "_").replace("+", "_") for part in (self.commit, *self.program))


def _attention(length: int, passes: str, side: str, measured_ms: float) -> Point:
  batch = 16384 // length
  name = f"attention alone, L = {length}, batch {batch}, {passes}, {'GPU kernel' if side == 'kernel' else 'XLA path'}"
  return Point(name, "c147d65", ("attention", length, passes, side), measured_ms / 1e3, side)


POINTS = (
  Point(
    "DeBERTa-base step, 32 × 512 (XLA attention: 'auto' then)",
    "09f05b7",
    ("step", "pretrain/deberta_base.py", "auto"),
    0.114,
    "xla",
  ),
  Point(
    "DeBERTa-base step, 32 × 512, attention=xla", "c147d65", ("step", "pretrain/deberta_base.py", "xla"), 0.115, "xla"
  ),
  Point(
    "DeBERTa-base step, 32 × 512 (GPU kernel: 'auto' then)",
    "c147d65",
    ("step", "pretrain/deberta_base.py", "auto"),
    0.151,
    "kernel",
  ),
  Point(
    "BERT-base step, 32 × 512 (GPU kernel: 'auto' with attention dropout then)",
    "c147d65",
    ("step", "pretrain/bert_base.py", "auto"),
    0.161,
    "kernel",
  ),
  _attention(512, "forward+backward", "kernel", 9.37),
  _attention(512, "forward+backward", "xla", 6.65),
  _attention(4096, "forward+backward", "kernel", 25.87),
  _attention(4096, "forward+backward", "xla", 34.61),
  _attention(512, "forward", "kernel", 1.26),
  _attention(512, "forward", "xla", 1.70),
  _attention(4096, "forward", "kernel", 4.26),
  _attention(4096, "forward", "xla", 6.00),
  _attention(1024, "forward+backward", "kernel", 13.73),
  _attention(1024, "forward+backward", "xla", 10.55),
)
ALL_KINDS = None  # a FIT step whose every kernel kind is fitted on
# The split and the model, written down before their fit.
# Fit: the kernels of the three steps of 5f2479d that benchmarks/gpu.py measured and profiled on one
# H200, every kind (each measured kernel joined with its predicted uncalibrated cost by
# profile_vs_prediction.join; a kernel the join cannot match is the kind its name says, else
# "unmatched"); and dcc430c's DeBERTa-base step through the Pallas kernel for the kernel's two kinds
# only ("triton kernel", its forward, and gpu_program.ATOMICS, its backward). Each kind's factor is
# the ratio of sums over the steps that fit it, Σ measured ÷ Σ uncalibrated (least squares on kernel
# times would let the longest kernels decide); the launch overhead stays in each kernel's cost and
# no time between kernels is fitted (the profiled kernels sum to within 3% of the timed steps). A
# kind no fit step measured takes the pooled factor of every kernel fitted on; a collective stays as
# costed. Everything else is held out, never fitted on. A point is its commit and its name.
FIT = {
  ("5f2479d", "BERT-base step, 32 × 512, attention=auto"): ALL_KINDS,
  ("5f2479d", "DeBERTa-base step, 32 × 512, attention=auto"): ALL_KINDS,
  ("5f2479d", "DeBERTa-base step, 32 × 512, attention=auto/attention_dropout=0.1"): ALL_KINDS,
  ("dcc430c", "DeBERTa-base step, 32 × 512, attention=pallas"): ("triton kernel", "triton kernel, atomics"),
}


def key(r: dict) -> tuple[str, str]:
  """A record's identity: (the measured commit, the program's name)."""
  return r["commit"], r["name"]


def label(r: dict) -> str:
  """A record's name in gpu_calibration.json: the program and its commit."""
  return f"{r['name']} ({r['commit']})"


# --- in the measured tree (a child process: that tree's wyjax on the path) ---------------------


def compile_in_tree(point: Point, dump: str, target: str, scope: str | None) -> None:
  """Compiles the point's program, built by the measured tree's code, for the card `target` describes into `dump`.

  With XLA's estimates. scope: the branch scope this tree's kernel puts its calls under
  (disentangled_attention_gpu.branch_scope), for a tree whose kernel predates it (c147d65's): its
  attention's calls are wrapped in it, which names their ops and changes nothing compiled.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  if scope:
    from wyjax.models import attention  # pylint: disable=g-import-not-at-top

    unscoped = attention.fused_attention

    def fused_attention(*args, **kwargs):
      with jax.named_scope(scope):
        return unscoped(*args, **kwargs)

    attention.fused_attention = fused_attention
  devices = list(topologies.get_topology_desc(platform="cuda", target_config=target, topology="1x1x1").devices)
  lowered = (_step if point.program[0] == "step" else _attention_part)(devices, *point.program[1:])
  lowered.compile(compiler_options={"xla_dump_to": dump, "xla_gpu_collect_cost_model_stats": True})


def _step(devices, config_name: str, attention: str):
  """The pretraining step as benchmarks/gpu.py (c147d65) and pretrain_step.py (09f05b7) built it, lowered.

  The config's model and recipe, batch 32 × 512, a placeholder vocabulary of the config's size.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from wyjax.core import config_files  # pylint: disable=g-import-not-at-top
  from wyjax.data import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top
  from wyjax.train import pretraining  # pylint: disable=g-import-not-at-top

  config = config_files.load(config_name)
  config.batch_size, config.attention = BATCH, attention
  run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), LENGTH, devices)
  batch = jax.ShapeDtypeStruct((BATCH, LENGTH), jnp.int32, sharding=run.program.data_sharding)
  return run.train_step.lower(run.program.abstract_state, batch)


def _attention_part(devices, length: int, passes: str, side: str):
  """The attention part's program as benchmarks/attention.py (c147d65) measured it, lowered.

  DeBERTa-base's DisentangledAttention alone, bf16, forward in inference or forward+backward in training.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  sys.path.insert(0, "benchmarks")  # the measured tree's benchmarks/attention.py
  import attention as bench  # pylint: disable=g-import-not-at-top

  from wyjax.models import deberta_v2, layers  # pylint: disable=g-import-not-at-top

  # pylint: disable=protected-access  (the measured tree's own helpers, as its gpu_rows called them)
  mesh = jax.sharding.Mesh(np.array(devices), ("data",))
  config = bench._alone_config("pallas" if side == "kernel" else "xla")
  module = deberta_v2.DisentangledAttention(config)
  x, rel = (jnp.asarray(a) for a in bench._alone_inputs(config, length, jnp.bfloat16))
  mask = layers.expand_mask(jnp.ones(x.shape[:2], jnp.int32))
  params = jax.eval_shape(
    lambda: deberta_v2.DisentangledAttention(bench._alone_config()).init(
      jax.random.key(0), x[:1, :8], mask[:1, ..., :8], rel, None, True
    )
  )
  if passes == "forward":
    fn = lambda params, x, rel, mask: module.apply(params, x, mask, rel, None, True)
  else:
    fn = jax.grad(
      lambda params, x, rel, mask: (
        module.apply(params, x, mask, rel, None, False, rngs={"dropout": jax.random.key(1)}).astype(jnp.float32).sum()
      ),
      argnums=(0, 1, 2),
    )
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  shapes = jax.tree_util.tree_map(
    lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), (params, x, rel, mask)
  )
  with jax.sharding.set_mesh(mesh):
    return jax.jit(fn).lower(*shapes)


# --- here -----------------------------------------------------------------------------------------


def worktree(commit: str, root: pathlib.Path) -> pathlib.Path:
  """The measured tree, checked out once (git worktree add --detach)."""
  folder = root / commit
  if not folder.exists():
    subprocess.run(
      ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), commit], check=True, capture_output=True
    )
  return folder


def dumped(point: Point, args) -> tuple[pathlib.Path, float]:
  """(the point's dump folder, seconds its compile took; 0 where it was dumped before)."""
  dump = args.dumps / point.slug
  if list(dump.glob("*thunk_sequence.txt")):
    return dump, 0.0
  from wyjax.aot import targets  # pylint: disable=g-import-not-at-top

  tree = worktree(point.commit, args.worktrees)
  start = time.perf_counter()
  scope = branch_scope(point, tree) if point.route == "kernel" else None
  scope = [f"--scope={scope}"] if scope else []
  subprocess.run(
    [
      sys.executable,
      __file__,
      f"--child={POINTS.index(point)}",
      f"--dump={dump}",
      f"--target={targets.target(CARD)}",
      *scope,
    ],
    cwd=tree,
    check=True,
    env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tree)},
  )
  return dump, time.perf_counter() - start


def branch_scope(point: Point, tree: pathlib.Path) -> str | None:
  """The name of the scope this tree's kernel would give the point's attention; None without relative terms (BERT).

  The scope counts the relative rows of its model (DeBERTa-base's: the attention part's
  benchmarks/attention.py BASE, a step's config in the measured tree) at its length, in the kernel's tiles.
  """
  import attention  # pylint: disable=g-import-not-at-top  (benchmarks/, beside this file)

  from wyjax.core import config_files  # pylint: disable=g-import-not-at-top
  from wyjax.kernels import attention_common  # pylint: disable=g-import-not-at-top
  from wyjax.kernels import disentangled_attention_gpu as gpu
  from wyjax.models import EncoderConfig, deberta_v2  # pylint: disable=g-import-not-at-top

  if point.program[0] == "attention":
    model, length = attention.BASE, point.program[1]
  else:
    measured = config_files.load(str(tree.resolve() / "configs" / point.program[1]))
    model, length = measured.model.to_dict(), LENGTH
  config = EncoderConfig(**model)
  if not config.relative_attention:
    return None
  spec = attention_common.Spec(
    length=length, block=gpu.BLOCK, scale=1.0, c2p=True, p2c=True, dropout_rate=0.0, interpret=False
  )
  return gpu.taken_scope(gpu.one_row_pairs(lambda distance: deberta_v2.relative_rows(distance, config), spec))


def record(point: Point, dump: pathlib.Path, compile_seconds: float) -> dict:
  """The point's record: the uncalibrated prediction for its dump beside its measured time, by kernel kind.

  By kind is what the factors calibrate. The roofline: XLA's own FLOPs and bytes of the module at
  the card's peak and bandwidth (custom calls count none).
  """
  import jax  # pylint: disable=g-import-not-at-top

  from wyjax.aot import gpu_program, gpu_step_time  # pylint: disable=g-import-not-at-top
  from wyjax.aot.accelerators import GPU_CARDS  # pylint: disable=g-import-not-at-top

  program, hlo = gpu_program.read_dump(dump)
  card = GPU_CARDS[CARD]
  prediction = gpu_step_time.predict(program, card, uncalibrated())
  cost = gpu_program.cost_analysis(hlo) or {}
  roofline = max(cost.get("flops", 0.0) / card.peak_flops, cost.get("bytes accessed", 0.0) / card.hbm_bandwidth)
  return {
    "name": point.name,
    "commit": point.commit,
    "route": point.route,
    "held_out": (point.commit, point.name) not in FIT,
    "measured_seconds": point.measured,
    "uncalibrated_seconds": prediction.uncalibrated,
    "roofline_seconds": roofline,
    "kernels": program.kernel_count,
    "uncalibrated_seconds_by_kind": prediction.by_kind(),
    "date": str(datetime.date.today()),
    "jax": jax.__version__,
    "predictor": _predictor(),
    **({"compile_seconds": round(compile_seconds, 1)} if compile_seconds else {}),
  }


def measured_record(folder: pathlib.Path, commit: str) -> dict:
  """A step `benchmarks/gpu.py --profile` measured on a GPU at `commit`, as a record.

  It is costed from the prediction.json beside its trace (every kernel of the GPU's own, autotuned
  compile, uncalibrated, with its kind), joined with the trace kernel by kernel (the measured
  seconds and launches a step by kind, what fit() fits on) and dated by its trace.
  """
  prediction = json.loads((folder / "prediction.json").read_text())
  trace = profile_traces.traces(folder.parent)[folder.name]
  _, kernels = profile_vs_prediction.join(profile_traces.events(trace)[1], prediction)
  by_kind, measured, launches = collections.Counter(), collections.Counter(), collections.Counter()
  for kernel in prediction["kernels"]:
    by_kind[kernel["kind"]] += kernel["uncalibrated"]
  for kernel in kernels:
    measured[kernel["kind"]] += kernel["measured"]
    launches[kernel["kind"]] += kernel["launches"]
  model, attention = folder.name.removeprefix("pretrain-").split("-wyjax-")
  route = next((route for kind, route in (("cudnn", "cudnn"), ("triton kernel", "kernel")) if kind in by_kind), "xla")
  attention = attention.replace("-attention_dropout=", "/attention_dropout=")  # as gpu.py's rows name it
  shape = prediction.get("batch", BATCH), prediction.get("length", LENGTH)  # traces before 2026-12-02: 32 × 512
  name = f"{model} step, {shape[0]} × {shape[1]}, attention={attention}"
  return {
    "name": name,
    "commit": commit,
    "route": route,
    "held_out": (commit, name) not in FIT,
    "measured_seconds": prediction["measured_step_seconds"],
    "uncalibrated_seconds": sum(by_kind.values()),
    "roofline_seconds": None,
    "kernels": sum(kernel["repeats"] for kernel in prediction["kernels"]),
    "uncalibrated_seconds_by_kind": dict(by_kind.most_common()),
    "measured_seconds_by_kind": dict(measured.most_common()),
    "measured_kernels_by_kind": {kind: round(n) for kind, n in launches.most_common()},
    "compiled": "on the GPU, autotuned",
    "date": trace.parent.name[:10].replace("_", "-"),
    "predictor": _predictor(),
  }


def uncalibrated():
  """Factors of one: the kernels as costed."""
  from wyjax.aot import gpu_step_time  # pylint: disable=g-import-not-at-top

  return gpu_step_time.Calibration({}, 1.0, (1.0, 1.0), "uncalibrated")


def calibrated(r: dict, calibration) -> float:
  """A record's step by a gpu_step_time.Calibration: each kind's uncalibrated seconds times its factor."""
  return sum(calibration.factor(kind) * seconds for kind, seconds in r["uncalibrated_seconds_by_kind"].items())


def is_step(r: dict) -> bool:
  """Whether a record is a whole training step (the rest are the attention part alone)."""
  return " step, " in r["name"]


def fit(records: list[dict]) -> dict:
  """The calibration fitted on the FIT steps' profiles, with its error on both halves: gpu_calibration.json's contents.

  Each kernel kind's factor is Σ measured ÷ Σ uncalibrated seconds of its kernels over the steps that
  fit it (the ratio of sums, which makes each kind's time over them exact); a kind they measured no
  kernel of takes the pooled factor of every kernel fitted on. The error is that of whole programs,
  from their uncalibrated seconds by kind.
  """
  from wyjax.aot import gpu_step_time  # pylint: disable=g-import-not-at-top

  fitted_on = [r for r in records if key(r) in FIT]
  measured, costed, kernels = collections.Counter(), collections.Counter(), collections.Counter()
  for r in fitted_on:
    kinds = FIT[key(r)] or set(r["measured_seconds_by_kind"]) | set(r["uncalibrated_seconds_by_kind"])
    for counter, by_kind in (
      (measured, r["measured_seconds_by_kind"]),
      (costed, r["uncalibrated_seconds_by_kind"]),
      (kernels, r["measured_kernels_by_kind"]),
    ):
      counter.update({kind: x for kind, x in by_kind.items() if kind in kinds})
  factors = {
    kind: measured[kind] / costed[kind] for kind, _ in measured.most_common() if measured[kind] and costed[kind]
  }
  default = sum(measured.values()) / sum(costed.values())
  calibration = gpu_step_time.Calibration(factors, default, (1.0, 1.0), "")
  ratios = {label(r): r["measured_seconds"] / calibrated(r, calibration) for r in records}
  held_out = [ratios[label(r)] for r in records if key(r) not in FIT]
  return {
    "what": "gpu_step_time's calibration: a factor per kernel kind of its kernels' uncalibrated time (launch "
    f"included), fitted on the kernels of steps profiled on one {CARD.upper()}; written by "
    "benchmarks/gpu_predictions.py",
    "factors": factors,
    "default_factor": default,
    "held_out_band": [min(held_out), max(held_out)],
    "summary": f"a factor per kernel kind, fitted on the {sum(kernels.values()):,} kernels of {len(fitted_on)} steps "
    f"profiled on an {CARD.upper()} ({max(r['date'] for r in fitted_on)}); "
    f"the {len(held_out)} programs held out took {min(held_out):.2f}–{max(held_out):.2f}× "
    "their prediction",
    "fitted_on_kernels": {
      kind: {
        "kernels": kernels[kind],
        "measured_ms": round(measured[kind] * 1e3, 4),
        "uncalibrated_ms": round(costed[kind] * 1e3, 4),
      }
      for kind in sorted(set(measured) | set(costed), key=lambda k: -costed[k] - measured[k])
    },
    "fitted_on": {label(r): round(ratios[label(r)], 4) for r in fitted_on},
    "held_out": {label(r): round(ratios[label(r)], 4) for r in records if key(r) not in FIT},
    "date": max(r["date"] for r in records),
    "predictor": max(records, key=lambda r: r["date"])["predictor"],
  }


def _calibration(fitted: dict):
  from wyjax.aot import gpu_step_time  # pylint: disable=g-import-not-at-top

  return gpu_step_time.Calibration(
    fitted["factors"], fitted["default_factor"], tuple(fitted["held_out_band"]), fitted["summary"]
  )


def table(records: list[dict], fitted: dict) -> str:
  """docs/benchmarks.md's table of every record, predicted by the fitted calibration."""
  rows, calibration = [], _calibration(fitted)
  for r in records:
    prediction = calibrated(r, calibration)
    ratio = r["measured_seconds"] / prediction
    within = "yes" if 1 / TOLERANCE <= ratio <= TOLERANCE else "**no**"
    roofline = _ms(r["roofline_seconds"]) if r["roofline_seconds"] else "–"
    rows.append(
      f"| {r['name']} | {r['commit']} | {'held out' if r['held_out'] else 'fit'} | {r['kernels']:,} "
      f"| {_ms(r['measured_seconds'])} | {_ms(prediction)} | **{ratio:.2f}** | {within} "
      f"| {_ms(r['uncalibrated_seconds'])} ({r['measured_seconds'] / r['uncalibrated_seconds']:.2f}) "
      f"| {roofline} |"
    )
  return "\n".join(
    [
      "| program (one H200) | tree | split | kernels | measured, ms | predicted (calibrated), ms "
      "| measured ÷ predicted | within 1.5× | uncalibrated, ms (measured ÷ it) "
      "| roofline, ms (lower bound; – where compiled on the GPU) |",
      "|---|---|---|---:|---:|---:|---:|---|---:|---:|",
      *rows,
    ]
  )


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:,.1f}" if seconds >= 0.01 else f"{seconds * 1e3:.2f}"


def merged(records: list[dict], measured: list[dict]) -> list[dict]:
  """`records` with `measured` after them, each replacing the record of its commit and name only.

  A step measured again at another commit is another point.
  """
  new = {key(r) for r in measured}
  return [r for r in records if key(r) not in new] + measured


def read() -> list[dict]:
  """The records benchmarks/gpu_predictions.jsonl holds."""
  return [json.loads(line) for line in RESULTS.read_text().splitlines()] if RESULTS.exists() else []


def write(records: list[dict]) -> None:
  """Replaces benchmarks/gpu_predictions.jsonl's records."""
  RESULTS.write_text("".join(json.dumps(r) + "\n" for r in records))


def write_doc(records: list[dict], fitted: dict) -> str:
  """Rewrites docs/benchmarks.md's table and its line of figures; returns that line."""
  factors = ", ".join(f"{kind} {factor:.2f}" for kind, factor in fitted["factors"].items())
  fit_ratios, held = list(fitted["fitted_on"].values()), list(fitted["held_out"].values())
  steps = [fitted["held_out"][label(r)] for r in records if r["held_out"] and is_step(r)]
  within = lambda ratios, tolerance=TOLERANCE: sum(1 / tolerance <= x <= tolerance for x in ratios)
  jax_here = next(r["jax"] for r in records if "jax" in r)
  kernels = sum(k["kernels"] for k in fitted["fitted_on_kernels"].values())
  stamp = (
    f"Generated by `benchmarks/gpu_predictions.py` on {fitted['date']} (the predictor of {fitted['predictor']}; "
    f"programs compiled here by jax {jax_here}, those of the GPU by its own). Factors per kernel kind, fitted "
    f"on the {kernels:,} measured kernels of the {len(fit_ratios)} fit steps: {factors}; any other kind "
    f"{fitted['default_factor']:.2f} (all their kernels pooled). Fit error (those steps whole): measured ÷ "
    f"predicted {min(fit_ratios):.2f}–{max(fit_ratios):.2f} ({within(fit_ratios)} of {len(fit_ratios)} within "
    f"1.5×, {within(fit_ratios, STEP_TOLERANCE)} within 1.3×); held-out error: "
    f"{min(held):.2f}–{max(held):.2f} "
    f"({within(held)} of {len(held)} within 1.5×; the {len(steps)} whole training steps "
    f"{min(steps):.2f}–{max(steps):.2f}, {within(steps, STEP_TOLERANCE)} within 1.3×)."
  )
  text = DOC.read_text()
  DOC.write_text(
    text[: text.index(BEGIN)]
    + f"{BEGIN}\n{stamp}\n\n{table(records, fitted)}\n{END}"
    + text[text.index(END) + len(END) :]
  )
  return stamp


def _predictor() -> str:
  """The last commit of the predictor's code, with a "+" where this tree has changed it since."""
  git = ["git", "-C", str(REPO)]
  commit = subprocess.run([*git, "log", "-1", "--format=%h", "--", *PREDICTOR], capture_output=True, text=True)
  changed = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", *PREDICTOR]).returncode
  return commit.stdout.strip() + ("+" if changed else "")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--worktrees", type=pathlib.Path, default=pathlib.Path("/tmp/wyjax-worktrees"))
  parser.add_argument("--dumps", type=pathlib.Path, default=pathlib.Path("/tmp/wyjax-gpu-predictions"))
  parser.add_argument("--table_only", action="store_true", help="fit and table from the records, compiling nothing")
  parser.add_argument(
    "--calibration",
    type=pathlib.Path,
    help=f"where to write the fitted calibration (JSON); wyjax ships it as {SHIPPED} (a developer copies it there)",
  )
  parser.add_argument(
    "--measured",
    type=pathlib.Path,
    help="a --profile folder of benchmarks/gpu.py: its wyjax steps "
    "(prediction.json beside each trace) join the records, replacing those of its commit and name",
  )
  parser.add_argument("--commit", help="with --measured: the commit the GPU measured")
  parser.add_argument("--child", type=int, help="internal: compile POINTS[i] in the measured tree")
  parser.add_argument("--dump", help="internal: the child's dump folder")
  parser.add_argument("--target", help="internal: the card's GpuTargetConfigProto")
  parser.add_argument("--scope", help="internal: the branch scope of the point's attention (a kernel point)")
  args = parser.parse_args()
  if args.child is not None:
    return compile_in_tree(POINTS[args.child], args.dump, args.target, args.scope)
  if args.measured:
    if not args.commit:
      sys.exit("--measured needs --commit: the commit the GPU measured")
    folders = sorted(trace.parent for trace in args.measured.glob("*-wyjax-*/prediction.json"))
    measured = [measured_record(folder, args.commit) for folder in folders]
    write(merged(read(), measured))
  elif not args.table_only:
    write([r for r in read() if key(r) not in {(point.commit, point.name) for point in POINTS}])  # the GPU's stay
    for point in POINTS:
      line = record(point, *dumped(point, args))
      print(
        json.dumps({k: line[k] for k in ("name", "commit", "measured_seconds", "uncalibrated_seconds")}), flush=True
      )
      write(read() + [line])
  compiled = [point.name for point in POINTS]  # the compiled programs first, in POINTS' order, then the GPU's
  records = sorted(
    ({**r, "held_out": key(r) not in FIT} for r in read()),
    key=lambda r: compiled.index(r["name"]) if r["name"] in compiled else len(compiled),
  )
  write(records)
  fitted = fit(records)
  print(table(records, fitted))
  print(write_doc(records, fitted))
  if args.calibration:
    args.calibration.write_text(json.dumps(fitted, indent=2, ensure_ascii=False) + "\n")
    print(
      f"The fitted calibration is in {args.calibration}; to ship it, copy it into {SHIPPED} in a clone and commit it."
    )
  else:
    print("The fitted calibration is not written: --calibration=PATH writes it.")


if __name__ == "__main__":
  main()

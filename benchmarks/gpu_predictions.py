"""The predicted GPU step (wyjax.core.gpu_step_time) against every GPU figure measured so far, and
the calibration fitted on them.

    JAX_PLATFORMS=cpu python benchmarks/gpu_predictions.py              # about 12 minutes on 2 cores
    JAX_PLATFORMS=cpu python benchmarks/gpu_predictions.py --table_only # fit and table from the records
    python benchmarks/gpu_predictions.py --measured=DIR --commit=C      # add the steps gpu.py --profile=DIR measured

Each program docs/benchmarks.md ("GPU") measured on one H200 is compiled as it was measured: its
commit's tree checked out in a git worktree (--worktrees), its own code building the step or the
attention part (benchmarks/pretrain_step.py at 09f05b7, benchmarks/gpu.py and
benchmarks/attention.py at c147d65: the same configs, batch, length and attention route), lowered
for an H200 on this CPU (jax's compile-only CUDA devices, the card described by this tree's
gpu_cards.target) and dumped with XLA's estimates. This tree's predictor costs each dump (kept in
--dumps, so that a rerun only costs them again), uncalibrated: its work by calibration group and
its launches. One JSON line per program goes to benchmarks/gpu_predictions.jsonl. The steps
`benchmarks/gpu.py --profile=DIR` measured join them (--measured): each is costed as the GPU
compiled it, from the prediction.json beside its trace. The factors are then fitted on FIT (the
split below, written down before its fit) and written to wyjax/core/gpu_calibration.json with the
error on both halves, and docs/benchmarks.md's table is rewritten from both.

The measured figures were taken with jax 0.11.2 on the GPU, autotuned; the compiles here use this
machine's jax and no autotuning: the same model code, XLA's heuristics where the GPU's compile
measured tilings.
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

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "gpu_predictions.jsonl"
CALIBRATION = REPO / "wyjax" / "core" / "gpu_calibration.json"
DOC = REPO / "docs" / "benchmarks.md"
PREDICTOR = ("wyjax/core/gpu_step_time.py", "wyjax/core/gpu_program.py", "wyjax/core/triton_ir.py",
             "wyjax/core/gemm_table.py", "wyjax/core/xla_gemm_sm90.json", "wyjax/core/gpu_cards.py")
BEGIN, END = "<!-- gpu predictions table -->", "<!-- end gpu predictions table -->"
CARD = "h200"
BATCH, LENGTH = 32, 512  # the pretraining steps'; the attention part keeps 16,384 tokens a batch
TOLERANCE = 1.5  # the target: predicted ÷ measured within [1 / 1.5, 1.5]


@dataclasses.dataclass(frozen=True)
class Point:
  name: str  # as docs/benchmarks.md's rows name it
  commit: str  # the tree that was measured
  program: tuple  # ("step", config, attention) or ("attention", length, pass, "kernel" | "xla")
  measured: float  # seconds, one H200, 2026-11-26 (docs/benchmarks.md, "GPU")
  route: str  # the attention it ran: "xla" or "kernel" (wyjax's Pallas/Triton GPU kernel)

  @property
  def slug(self) -> str:
    return "-".join(str(part).replace("/", "_").replace("+", "_") for part in (self.commit, *self.program))


def _attention(length: int, passes: str, side: str, measured_ms: float) -> Point:
  batch = 16384 // length
  name = f"attention alone, L = {length}, batch {batch}, {passes}, {'GPU kernel' if side == 'kernel' else 'XLA path'}"
  return Point(name, "c147d65", ("attention", length, passes, side), measured_ms / 1e3, side)


POINTS = (
    Point("DeBERTa-base step, 32 × 512 (XLA attention: 'auto' then)", "09f05b7",
          ("step", "pretrain/deberta_base.py", "auto"), 0.114, "xla"),
    Point("DeBERTa-base step, 32 × 512, attention=xla", "c147d65", ("step", "pretrain/deberta_base.py", "xla"), 0.115,
          "xla"),
    Point("DeBERTa-base step, 32 × 512 (GPU kernel: 'auto' then)", "c147d65",
          ("step", "pretrain/deberta_base.py", "auto"), 0.151, "kernel"),
    Point("BERT-base step, 32 × 512 (GPU kernel: 'auto' with attention dropout then)", "c147d65",
          ("step", "pretrain/bert_base.py", "auto"), 0.161, "kernel"),
    _attention(512, "forward+backward", "kernel", 9.37), _attention(512, "forward+backward", "xla", 6.65),
    _attention(4096, "forward+backward", "kernel", 25.87), _attention(4096, "forward+backward", "xla", 34.61),
    _attention(512, "forward", "kernel", 1.26), _attention(512, "forward", "xla", 1.70),
    _attention(4096, "forward", "kernel", 4.26), _attention(4096, "forward", "xla", 6.00),
    _attention(1024, "forward+backward", "kernel", 13.73), _attention(1024, "forward+backward", "xla", 10.55),
)
# The split, written down and committed before its fit (2026-11-28; issue #62, item 5): the
# factors are fitted on the first measurements of today's programs, the three steps of main
# e7dca87 that benchmarks/gpu.py measured and profiled on one H200 (DeBERTa-base through cuDNN and,
# with attention dropout, through the XLA path; BERT-base through cuDNN), each costed from the
# GPU's own compile; every program measured before (POINTS, 14) validates them and is never fitted
# on. The first split (18d92dc) fitted 10 of those 14 and held out 4.
FIT = ("DeBERTa-base step, 32 × 512, attention=auto",
       "DeBERTa-base step, 32 × 512, attention=auto/attention_dropout=0.1",
       "BERT-base step, 32 × 512, attention=auto")


# --- in the measured tree (a child process: that tree's wyjax on the path) ---------------------


def compile_in_tree(point: Point, dump: str, target: str) -> None:
  """Lowers the point's program with the measured tree's code for the card `target` describes and
  compiles it into `dump` with XLA's estimates."""
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  devices = list(topologies.get_topology_desc(platform="cuda", target_config=target, topology="1x1x1").devices)
  lowered = (_step if point.program[0] == "step" else _attention_part)(devices, *point.program[1:])
  lowered.compile(compiler_options={"xla_dump_to": dump, "xla_gpu_collect_cost_model_stats": True})


def _step(devices, config_name: str, attention: str):
  """The pretraining step as benchmarks/gpu.py (c147d65) and pretrain_step.py (09f05b7) built it:
  the config's model and recipe, batch 32 × 512, a placeholder vocabulary of the config's size."""
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
  """The attention part's program as benchmarks/attention.py (c147d65) measured it: DeBERTa-base's
  DisentangledAttention alone, bf16, forward in inference or forward+backward in training."""
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
  params = jax.eval_shape(lambda: deberta_v2.DisentangledAttention(bench._alone_config()).init(
      jax.random.key(0), x[:1, :8], mask[:1, ..., :8], rel, None, True))
  if passes == "forward":
    fn = lambda params, x, rel, mask: module.apply(params, x, mask, rel, None, True)
  else:
    fn = jax.grad(lambda params, x, rel, mask: module.apply(params, x, mask, rel, None, False, rngs={
        "dropout": jax.random.key(1)}).astype(jnp.float32).sum(), argnums=(0, 1, 2))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated),
                                  (params, x, rel, mask))
  with jax.sharding.set_mesh(mesh):
    return jax.jit(fn).lower(*shapes)


# --- here -----------------------------------------------------------------------------------------


def worktree(commit: str, root: pathlib.Path) -> pathlib.Path:
  """The measured tree, checked out once (git worktree add --detach)."""
  folder = root / commit
  if not folder.exists():
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), commit], check=True,
                   capture_output=True)
  return folder


def dumped(point: Point, args) -> tuple[pathlib.Path, float]:
  """(the point's dump folder, seconds its compile took; 0 where it was dumped before)."""
  dump = args.dumps / point.slug
  if list(dump.glob("*thunk_sequence.txt")):
    return dump, 0.0
  from wyjax.core import gpu_cards  # pylint: disable=g-import-not-at-top
  tree = worktree(point.commit, args.worktrees)
  start = time.perf_counter()
  subprocess.run([sys.executable, __file__, f"--child={POINTS.index(point)}", f"--dump={dump}",
                  f"--target={gpu_cards.target(CARD)}"], cwd=tree, check=True,
                 env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tree)})
  return dump, time.perf_counter() - start


def record(point: Point, dump: pathlib.Path, compile_seconds: float) -> dict:
  """The uncalibrated prediction for the point's dump beside its measured time, its work by
  calibration group (launches left out) and launches, what the factors are fitted on; and the
  roofline (XLA's own FLOPs and bytes of the module at the card's peak and bandwidth; custom
  calls count none)."""
  import jax  # pylint: disable=g-import-not-at-top
  from wyjax.core import gpu_cards, gpu_program, gpu_step_time  # pylint: disable=g-import-not-at-top

  program, hlo = gpu_program.read_dump(dump)
  card = gpu_cards.CARDS[CARD]
  prediction = gpu_step_time.predict(program, card, uncalibrated())
  work, launches = collections.Counter(), 0
  for kernel in prediction.kernels:  # as Calibration.apply splits them: a collective has no launch to refit
    repeats = 0 if kernel.launch.collective else kernel.launch.repeats
    launches += repeats
    work[gpu_step_time.group(kernel.launch)] += kernel.uncalibrated - gpu_step_time.LAUNCH_SECONDS * repeats
  cost = gpu_program.cost_analysis(hlo) or {}
  roofline = max(cost.get("flops", 0.0) / card.matmul_flops, cost.get("bytes accessed", 0.0) / card.hbm_bandwidth)
  return {"name": point.name, "commit": point.commit, "route": point.route, "held_out": point.name not in FIT,
          "measured_seconds": point.measured, "uncalibrated_seconds": prediction.uncalibrated,
          "work_by_group": dict(work), "launches": launches, "roofline_seconds": roofline,
          "kernels": program.kernel_count, "uncalibrated_seconds_by_kind": prediction.by_kind(),
          "date": str(datetime.date.today()), "jax": jax.__version__, "predictor": _predictor(),
          **({"compile_seconds": round(compile_seconds, 1)} if compile_seconds else {})}


def measured_record(folder: pathlib.Path, commit: str) -> dict:
  """A step `benchmarks/gpu.py --profile` measured on a GPU at `commit`, as a record: costed from
  the prediction.json beside its trace (every kernel of the GPU's own, autotuned compile,
  uncalibrated, with its group) and dated by its trace."""
  from wyjax.core import gpu_step_time  # pylint: disable=g-import-not-at-top

  prediction = json.loads((folder / "prediction.json").read_text())
  model, attention = folder.name.removeprefix("pretrain-").split("-wyjax-")
  work, by_kind, launches = collections.Counter(), collections.Counter(), 0
  for kernel in prediction["kernels"]:  # as record() splits them
    repeats = 0 if kernel["group"] == "collective" else kernel["repeats"]
    launches += repeats
    work[kernel["group"]] += kernel["uncalibrated"] - gpu_step_time.LAUNCH_SECONDS * repeats
    by_kind[kernel["kind"]] += kernel["uncalibrated"]
  route = next((route for kind, route in (("cudnn", "cudnn"), ("triton kernel", "kernel")) if kind in by_kind), "xla")
  attention = attention.replace("-attention_dropout=", "/attention_dropout=")  # as gpu.py's rows name it
  name = f"{model} step, {BATCH} × {LENGTH}, attention={attention}"
  run = sorted(folder.glob("plugins/profile/*"))[-1].name  # jax's run folder: YYYY_MM_DD_HH_MM_SS
  return {"name": name, "commit": commit, "route": route, "held_out": name not in FIT,
          "measured_seconds": prediction["measured_step_seconds"], "uncalibrated_seconds": sum(by_kind.values()),
          "work_by_group": dict(work), "launches": launches, "roofline_seconds": None, "kernels": launches,
          "uncalibrated_seconds_by_kind": dict(by_kind.most_common()), "compiled": "on the GPU, autotuned",
          "date": run[:10].replace("_", "-"), "predictor": _predictor()}


def uncalibrated():
  """Factors of one and XLA's launch overhead: the kernels as costed."""
  from wyjax.core import gpu_step_time  # pylint: disable=g-import-not-at-top
  return gpu_step_time.Calibration({}, gpu_step_time.LAUNCH_SECONDS, (1.0, 1.0), "uncalibrated")


def calibrated(r: dict, fitted: dict) -> float:
  """A record's step with the fitted factors: each group's work times its factor (a group
  without one as costed), and each launch the fitted time."""
  work = sum(fitted["factors"].get(group, 1.0) * seconds for group, seconds in r["work_by_group"].items())
  return work + fitted["launch_seconds"] * r["launches"]


def fit(records: list[dict]) -> dict:
  """Factors of the calibration groups the FIT points have work in, by least squares on the
  relative error over those points only (each measured step ≈ Σ factor × its group's work +
  launches × time); the time per launch too where the points outnumber the parameters with it,
  else XLA's figure (a fit of as many parameters as points leaves no error to report). Where that
  gives a factor of zero or less (the points' work by group cannot tell their times apart), one
  factor for every group's work, at XLA's launch figure. Then the error on both halves.
  gpu_calibration.json's contents."""
  fitted_on = [r for r in records if r["name"] in FIT]
  groups = sorted({group for r in fitted_on for group, seconds in r["work_by_group"].items() if seconds > 0})
  work = np.array([[r["work_by_group"].get(group, 0.0) for group in groups] for r in fitted_on])
  fit_launch = len(fitted_on) > len(groups) + 1
  factors, launch = _least_squares(fitted_on, work, fit_launch)
  per_group, refused = dict(zip(groups, factors.tolist())), {}
  if (factors <= 0).any() or launch <= 0:  # the work by group cannot tell the points' times apart
    refused, fit_launch = per_group, False
    (factor,), launch = _least_squares(fitted_on, work.sum(axis=1, keepdims=True), fit_launch)
    per_group = dict.fromkeys(sorted({group for r in records for group in r["work_by_group"]}), float(factor))
  if min(per_group.values()) <= 0:
    sys.exit(f"the fit gave a factor of zero or less: {per_group}")
  result = {"factors": per_group, "launch_seconds": launch}
  ratios = {r["name"]: r["measured_seconds"] / calibrated(r, result) for r in records}
  held_out = [ratios[r["name"]] for r in records if r["name"] not in FIT]
  fitted = [ratios[r["name"]] for r in fitted_on]
  return {
      "what": "gpu_step_time's calibration: factors of each group's uncalibrated work and the time of a launch, "
              f"fitted on programs measured on one {CARD.upper()}; written by benchmarks/gpu_predictions.py",
      **result, "held_out_band": [min(held_out), max(held_out)],
      "summary": f"calibrated on {len(fitted)} measurements on an {CARD.upper()} "
                 f"({max(r['date'] for r in fitted_on)}); "
                 f"the {len(held_out)} held out took {min(held_out):.2f}–{max(held_out):.2f}× their prediction",
      "fitted_on": {r["name"]: round(ratios[r["name"]], 4) for r in fitted_on},
      "held_out": {r["name"]: round(ratios[r["name"]], 4) for r in records if r["name"] not in FIT},
      "launch_fitted": fit_launch, **({"refused_per_group_fit": refused} if refused else {}),
      "date": max(r["date"] for r in records), "predictor": records[-1]["predictor"]}


def _least_squares(fitted_on: list[dict], work: np.ndarray, fit_launch: bool) -> tuple[np.ndarray, float]:
  """(factors of `work`'s columns, seconds a launch) minimising the squared relative error of
  measured ≈ work · factors + launches × time; the time XLA's figure unless `fit_launch`."""
  from wyjax.core import gpu_step_time  # pylint: disable=g-import-not-at-top

  measured = np.array([r["measured_seconds"] for r in fitted_on])
  launches = np.array([float(r["launches"]) for r in fitted_on])
  if fit_launch:
    solution, *_ = np.linalg.lstsq(np.column_stack([work, launches]) / measured[:, None], np.ones(len(measured)),
                                   rcond=None)
    return solution[:-1], float(solution[-1])
  target = 1 - launches * gpu_step_time.LAUNCH_SECONDS / measured
  solution, *_ = np.linalg.lstsq(work / measured[:, None], target, rcond=None)
  return solution, gpu_step_time.LAUNCH_SECONDS


def table(records: list[dict], fitted: dict) -> str:
  rows = []
  for r in records:
    prediction = calibrated(r, fitted)
    ratio = r["measured_seconds"] / prediction
    within = "yes" if 1 / TOLERANCE <= ratio <= TOLERANCE else "**no**"
    roofline = _ms(r["roofline_seconds"]) if r["roofline_seconds"] else "–"
    rows.append(f"| {r['name']} | {r['commit']} | {'held out' if r['held_out'] else 'fit'} | {r['kernels']:,} "
                f"| {_ms(r['measured_seconds'])} | {_ms(prediction)} | **{ratio:.2f}** | {within} "
                f"| {_ms(r['uncalibrated_seconds'])} ({r['measured_seconds'] / r['uncalibrated_seconds']:.2f}) "
                f"| {roofline} |")
  return "\n".join([
      "| program (one H200) | tree | split | kernels | measured, ms | predicted (calibrated), ms "
      "| measured ÷ predicted | within 1.5× | uncalibrated, ms (measured ÷ it) | roofline, ms (lower bound; – for "
      "the GPU's compiles) |",
      "|---|---|---|---:|---:|---:|---:|---|---:|---:|", *rows])


def _ms(seconds: float) -> str:
  return f"{seconds * 1e3:,.1f}" if seconds >= 0.01 else f"{seconds * 1e3:.2f}"


def read() -> list[dict]:
  return [json.loads(line) for line in RESULTS.read_text().splitlines()] if RESULTS.exists() else []


def write(records: list[dict]) -> None:
  RESULTS.write_text("".join(json.dumps(r) + "\n" for r in records))


def write_doc(records: list[dict], fitted: dict) -> None:
  factors = ", ".join(f"{group} {factor:.2f}" for group, factor in fitted["factors"].items())
  if "refused_per_group_fit" in fitted:
    refused = ", ".join(f"{group} {factor:.2f}" for group, factor in fitted["refused_per_group_fit"].items())
    factors = (f"one factor for every group's work, {next(iter(fitted['factors'].values())):.2f} (a factor per group "
               f"gave {refused}: one of zero or less)")
  fit_ratios, held = list(fitted["fitted_on"].values()), list(fitted["held_out"].values())
  within = lambda ratios: sum(1 / TOLERANCE <= x <= TOLERANCE for x in ratios)
  launch = "fitted" if fitted["launch_fitted"] else "XLA's figure, not fitted"
  jax_here = next(r["jax"] for r in records if "jax" in r)
  stamp = (f"Generated by `benchmarks/gpu_predictions.py` on {fitted['date']} (the predictor of {fitted['predictor']}; "
           f"programs compiled here by jax {jax_here}, those of the GPU by its own). Factors fitted on the "
           f"{len(fit_ratios)} fit points: {factors}, {fitted['launch_seconds'] * 1e6:.2f} µs a launch ({launch}). "
           "Fit error: measured ÷ predicted "
           f"{min(fit_ratios):.2f}–{max(fit_ratios):.2f} ({within(fit_ratios)} of {len(fit_ratios)} within 1.5×); "
           f"held-out error: {min(held):.2f}–{max(held):.2f} ({within(held)} of {len(held)} within 1.5×).")
  text = DOC.read_text()
  DOC.write_text(text[:text.index(BEGIN)] + f"{BEGIN}\n{stamp}\n\n{table(records, fitted)}\n{END}"
                 + text[text.index(END) + len(END):])


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
  parser.add_argument("--table_only", action="store_true")
  parser.add_argument("--measured", type=pathlib.Path, help="a --profile folder of benchmarks/gpu.py: its wyjax steps "
                      "(prediction.json beside each trace) join the records, replacing those of the same name")
  parser.add_argument("--commit", help="with --measured: the commit the GPU measured")
  parser.add_argument("--child", type=int, help="internal: compile POINTS[i] in the measured tree")
  parser.add_argument("--dump", help="internal: the child's dump folder")
  parser.add_argument("--target", help="internal: the card's GpuTargetConfigProto")
  args = parser.parse_args()
  if args.child is not None:
    return compile_in_tree(POINTS[args.child], args.dump, args.target)
  if args.measured:
    if not args.commit:
      sys.exit("--measured needs --commit: the commit the GPU measured")
    folders = sorted(trace.parent for trace in args.measured.glob("*-wyjax-*/prediction.json"))
    measured = [measured_record(folder, args.commit) for folder in folders]
    names = {r["name"] for r in measured}
    write([r for r in read() if r["name"] not in names] + measured)
  elif not args.table_only:
    write([r for r in read() if r["name"] not in {point.name for point in POINTS}])  # the GPU's steps stay
    for point in POINTS:
      line = record(point, *dumped(point, args))
      print(json.dumps({k: line[k] for k in ("name", "commit", "measured_seconds", "uncalibrated_seconds")}), flush=True)
      write(read() + [line])
  compiled = [point.name for point in POINTS]  # the compiled programs first, in POINTS' order, then the GPU's
  records = sorted(({**r, "held_out": r["name"] not in FIT} for r in read()),
                   key=lambda r: compiled.index(r["name"]) if r["name"] in compiled else len(compiled))
  write(records)
  fitted = fit(records)
  CALIBRATION.write_text(json.dumps(fitted, indent=2, ensure_ascii=False) + "\n")
  print(table(records, fitted))
  write_doc(records, fitted)


if __name__ == "__main__":
  main()

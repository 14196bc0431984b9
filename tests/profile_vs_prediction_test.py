"""benchmarks/profile_vs_prediction.py: a GPU profile of a step joined with the prediction of
its compile, kernel by kind and kernel by kernel, on a trace written here as jax's profiler
writes one on a GPU (kernels on a device stream, the HLO op that launched each where it names
one), so that the first GPU run gives the table in one command; kernels CUDA graphs launched are
counted, and the compile gpu.py profiles forms none. The smoke run's traces (CPU ops) are joined
in tests/benchmarks_test.py."""

import gzip
import json
import pathlib
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp

from tests.train.conftest import REPO_ROOT
from wyjax.aot import targets

# Two steps profiled; per step: XLA's kernel loop_add_fusion_3 twice (two identical fusions share
# it) at 15 µs, a cuBLAS GEMM whose trace names its HLO op at 100 µs, a cuDNN kernel naming none
# at 50 µs, an unknown kernel at 8 µs.
STEP = [
  ("loop_add_fusion_3", "", 15.0),
  ("loop_add_fusion_3", "", 15.0),
  ("sm90_xmma_gemm_bf16bf16", "custom-call.1", 100.0),
  ("cudnn_generated_fort_native_sdpa_sm90", "", 50.0),
  ("mystery_kernel", "", 8.0),
]
PREDICTION = {
  "card": "h200",
  "steps": 2,
  "kernels": [
    {
      "name": "loop_add_fusion.3",
      "kernel": "loop_add_fusion_3",
      "kind": "elementwise",
      "repeats": 1,
      "uncalibrated": 10e-6,
      "seconds": 20e-6,
    },
    {
      "name": "loop_add_fusion.4",
      "kernel": "loop_add_fusion_3",
      "kind": "elementwise",
      "repeats": 1,
      "uncalibrated": 10e-6,
      "seconds": 20e-6,
    },
    {
      "name": "custom-call.1",
      "kernel": "custom_call_1",
      "kind": "gemm",
      "repeats": 1,
      "uncalibrated": 35e-6,
      "seconds": 40e-6,
    },
    {
      "name": "input_reduce_fusion",
      "kernel": "input_reduce_fusion",
      "kind": "reduction",
      "repeats": 1,
      "uncalibrated": 3e-6,
      "seconds": 5e-6,
    },
  ],
}


def _gpu_trace(folder, steps):
  events = [
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "Stream #7(Compute)"}},
    {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
    {"ph": "X", "pid": 2, "tid": 1, "name": "host_work", "dur": 999.0},
  ]
  for _ in range(steps):
    events += [
      {"ph": "X", "pid": 1, "tid": 7, "name": name, "dur": micros, **({"args": {"hlo_op": op}} if op else {})}
      for name, op, micros in STEP
    ]
  run = folder / "plugins" / "profile" / "2026_11_28_00_00_00"
  run.mkdir(parents=True)
  with gzip.open(run / "perfetto_trace.json.gz", "wt") as f:
    json.dump({"traceEvents": events}, f)


def _tables(text: str, heading: str) -> list[list[list[str]]]:
  """The markdown tables under `heading`, each as rows of cells (header and rule left out)."""
  section = text.split(heading, 1)[1].split("\n### ", 1)[0]
  tables = [[]]
  for line in section.splitlines():
    if line.startswith("| ") and not line.startswith(("| kind", "| kernel")):
      tables[-1].append([cell.strip() for cell in line.strip("|").split("|")])
    elif not line.strip() and tables[-1]:
      tables.append([])
  return [t for t in tables if t]


def test_a_gpu_profile_is_joined_with_its_prediction_by_kind_and_by_kernel(tmp_path):
  wyjax = tmp_path / "pretrain-BERT-base-wyjax-auto"
  _gpu_trace(wyjax, steps=2)
  (wyjax / "prediction.json").write_text(json.dumps(PREDICTION))
  _gpu_trace(tmp_path / "pretrain-BERT-base-wyjax-xla", steps=1)  # profiled, but predicted on no GPU
  result = subprocess.run(
    [sys.executable, str(REPO_ROOT / "benchmarks" / "profile_vs_prediction.py"), str(tmp_path)],
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  heading = "### pretrain-BERT-base-wyjax-auto (GPU kernels): measured 0.188 ms a step, predicted 0.085 (calibrated"
  assert heading in result.stdout, result.stdout
  assert "### pretrain-BERT-base-wyjax-xla: no prediction.json beside its trace" in result.stdout
  kinds, kernels = _tables(result.stdout, heading)
  # Per step, in ms: measured, predicted (calibrated), measured ÷ predicted, uncalibrated; the largest first.
  assert kinds == [
    ["gemm", "0.100", "0.040", "**2.50**", "0.035"],
    ["cudnn", "0.050", "0.000", "–", "0.000"],
    ["elementwise", "0.030", "0.040", "**0.75**", "0.020"],
    ["unmatched", "0.008", "0.000", "–", "0.000"],
    ["reduction", "0.000", "0.005", "–", "0.003"],
  ]
  # Kernel by kernel, the largest absolute error first; identical fusions' shared kernel once.
  assert [k[0] for k in kernels] == [
    "`custom_call_1`",
    "`cudnn_generated_fort_native_sdpa_sm90`",
    "`loop_add_fusion_3`",
    "`mystery_kernel`",
    "`input_reduce_fusion`",
  ]
  assert [k[1:] for k in kernels] == [
    ["gemm", "0.100", "0.040", "+0.060"],
    ["cudnn", "0.050", "0.000", "+0.050"],
    ["elementwise", "0.030", "0.040", "-0.010"],
    ["unmatched", "0.008", "0.000", "+0.008"],
    ["reduction", "0.000", "0.005", "-0.005"],
  ]


def test_a_trace_of_transformers_is_not_joined(tmp_path):
  _gpu_trace(tmp_path / "pretrain-BERT-base-transformers", steps=1)
  result = subprocess.run(
    [sys.executable, str(REPO_ROOT / "benchmarks" / "profile_vs_prediction.py"), str(tmp_path)],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_kernels_launched_from_cuda_graphs_are_counted_and_cublas_is_a_gemm(tmp_path):
  """As the H200 run of 2026-11-28 traced them: every kernel's HLO op the graph that launched it;
  a fusion still joins by its kernel name, cuBLAS's nvjet kernel by its kind."""
  wyjax = tmp_path / "pretrain-BERT-base-wyjax-auto"
  events = [
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "Stream #7(Compute)"}},
  ]
  kernels = (("loop_add_fusion_3", 15.0), ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNN", 80.0))
  events += [
    {"ph": "X", "pid": 1, "tid": 7, "name": name, "dur": micros, "args": {"hlo_op": "command_buffer_59"}}
    for name, micros in kernels
  ]
  run = wyjax / "plugins" / "profile" / "2026_11_28_00_00_00"
  run.mkdir(parents=True)
  with gzip.open(run / "vm.trace.json.gz", "wt") as f:  # jax's own name for the trace: <host>.trace.json.gz
    json.dump({"traceEvents": events}, f)
  (wyjax / "prediction.json").write_text(json.dumps({**PREDICTION, "steps": 1}))
  result = subprocess.run(
    [sys.executable, str(REPO_ROOT / "benchmarks" / "profile_vs_prediction.py"), str(tmp_path)],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "2 kernels ran in CUDA graphs" in result.stdout, result.stdout
  kinds, _ = _tables(result.stdout, "### pretrain-BERT-base-wyjax-auto (GPU kernels)")
  # Per step (one profiled): cuBLAS's 80 µs against the GEMM's 40 predicted, the fusion's 15 against its two 20s.
  assert kinds[:2] == [
    ["gemm", "0.080", "0.040", "**2.00**", "0.035"],
    ["elementwise", "0.015", "0.040", "**0.37**", "0.020"],
  ], kinds


def test_the_profiled_compile_has_no_command_buffers():
  """gpu.PROFILED_COMPILE spelled as this jaxlib takes it: an H200 compile of a few kernels forms a
  command buffer (a CUDA graph) without it, none with it."""
  sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
  import gpu  # pylint: disable=g-import-not-at-top

  device = jax.sharding.SingleDeviceSharding(targets.devices("h200")[0])
  lowered = jax.jit(lambda x: sum(jnp.tanh(x @ x * i).sum(0) for i in range(4))).lower(
    jax.ShapeDtypeStruct((256, 256), jnp.float32, sharding=device)
  )
  graphs = []
  for options in ({}, gpu.PROFILED_COMPILE):
    with tempfile.TemporaryDirectory() as dump:
      lowered.compile(compiler_options={"xla_dump_to": dump, **options})
      thunks = pathlib.Path(dump).glob("*thunk_sequence*")
      graphs.append(sum(path.read_text().count("kCommandBuffer") for path in thunks))
  assert graphs[0] > 0 and graphs[1] == 0, graphs

"""The predicted GPU step (wyjax.aot.gpu_step_time.predict) on small programs, against times worked
out here by hand from an H100's datasheet figures and XLA's measured GEMM table: a lone GEMM, a
chain of elementwise fusions, a fusion whose XLA estimate is absurd, cuDNN's attention and a
Pallas (Triton) kernel, one that adds atomically, one whose branches run as its scope says, a
loop, an all-reduce over two cards; the calibration's factors on each kind of kernel; and the
command that costs a dump folder.

The GEMM, cuDNN, Pallas and all-reduce programs are compiled for the card on this CPU (seconds
each); the others are dumps written here in XLA's formats, so that each rule is pinned on its own.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from wyjax.aot import gpu_program, gpu_step_time, optimized_hlo, targets
from wyjax.aot.accelerators import GPU_CARDS
from wyjax.kernels.disentangled_attention_gpu import taken_scope

# NVIDIA H100 SXM5 datasheet: dense bf16 989 TFLOP/s, HBM3 3.35 TB/s, 132 SMs; NVLink 4 900 GB/s
# both ways together. The predictor's constants: cuDNN's attention reaches 75% of the peak
# (FlashAttention-3's best), a launch costs 1 µs, a collective 5 µs besides its bytes.
PEAK, BANDWIDTH, SMS, LINK = 989e12, 3.35e12, 132, 450e9
ATTENTION, LAUNCH, COLLECTIVE = 0.75, 1e-6, 5e-6
# XLA's measured H100 table (tensorflow/tensorflow 9bebee8e, third_party/xla/xla/service/gpu/model/
# matmul_interpolator_data.h): a bf16 GEMM of b = 1, m = 2048, n = 4096, k = 4096.
GEMM_2048_4096_4096 = 760440385269121
# Factors of one: the kernels as costed.
AS_COSTED = gpu_step_time.Calibration({}, 1.0, (1.0, 1.0), "as costed")


def _compiled(fn, *shapes, mesh=None):
  """The GpuProgram of fn compiled for one H100 (or `mesh`, the shapes sharded over it)."""
  if mesh is None:
    mesh = Mesh(np.array(targets.devices("h100")), ("x",))
    shapes = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, PartitionSpec())) for s in shapes]
  with jax.sharding.set_mesh(mesh):
    lowered = jax.jit(fn).lower(*shapes)
  return gpu_program.compile(lowered)[1]


def _predicted(program, card="h100", fitted=AS_COSTED):
  return gpu_step_time.predict(program, GPU_CARDS[card], fitted)


def test_a_lone_gemm_costs_its_flops_at_the_rate_xla_measured_for_its_shape():
  """bf16 [2048, 4096] · [4096, 4096], a shape of XLA's table: 68.7 GFLOP at the 760 TFLOP/s XLA
  measured on an H100 (90 µs) outlasts its 67 MB at 3.35 TB/s (20 µs); XLA's estimate of the
  heuristic tiling is not read."""
  m, k, n = 2048, 4096, 4096
  program = _compiled(jnp.dot, jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16))
  (kernel,) = _predicted(program).kernels
  assert (kernel.launch.kind, kernel.launch.gemms, kernel.source) == ("gemm", ((1, m, n, k),), "gemm table")
  by_hand = max(2 * m * k * n / GEMM_2048_4096_4096, 2 * (m * k + k * n + m * n) / BANDWIDTH) + LAUNCH
  assert kernel.uncalibrated == pytest.approx(by_hand, rel=1e-6)
  assert kernel.uncalibrated == pytest.approx(91.4e-6, rel=1e-3)


def test_cudnn_attention_costs_two_matmuls_forward():
  """cuDNN's flash attention over [4, 1024, 12, 64]: 4 · B · H · L² · d FLOPs (QKᵀ and PV) at 75%
  of the peak, 17.4 µs, beyond its 25 MB of q, k, v and output at the bandwidth (7.5 µs)."""
  batch, length, heads, dim = 4, 1024, 12, 64
  q = jax.ShapeDtypeStruct((batch, length, heads, dim), jnp.bfloat16)
  program = _compiled(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="cudnn"), q, q, q)
  (kernel,) = [k for k in _predicted(program).kernels if k.launch.kind == "cudnn"]
  by_hand = 4 * batch * heads * length**2 * dim / (PEAK * ATTENTION) + LAUNCH
  assert kernel.uncalibrated == pytest.approx(by_hand, rel=1e-6)


def test_a_pallas_kernel_is_costed_from_its_triton_ir():
  """A Pallas matmul, 8 × 8 programs of a 64 × 64 tile, each looping 32 times over K in 32s: its
  dots are 2·M·N·K FLOPs; its bytes are each program's tile loads (a 64×32 and a 32×64 bf16 tile
  per trip) and its output tile, which Pallas loads before storing (f32, 16 KiB each way).
  Its dots at the tensor cores' peak, its calibration factor says how far it falls short.
  Memory-bound on the 64 SMs of its grid: 18.9 MB at 64/132 of the bandwidth."""
  m = n = 512
  k, block, depth = 1024, 64, 32

  def kernel(a_ref, b_ref, o_ref):
    def accumulate(i, acc):
      a, b = a_ref[:, pl.ds(i * depth, depth)], b_ref[pl.ds(i * depth, depth), :]
      return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

    o_ref[...] = jax.lax.fori_loop(0, k // depth, accumulate, jnp.zeros((block, block), jnp.float32))

  matmul = pl.pallas_call(
    kernel,
    grid=(m // block, n // block),
    out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    in_specs=[pl.BlockSpec((block, k), lambda i, j: (i, 0)), pl.BlockSpec((k, block), lambda i, j: (0, j))],
    out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)),
  )
  program = _compiled(matmul, jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16))
  (kernel,) = _predicted(program).kernels
  programs = (m // block) * (n // block)
  moved = programs * ((k // depth) * 2 * (block * depth * 2) + 2 * block * block * 4)
  assert (kernel.launch.kind, kernel.launch.flops, kernel.launch.bytes) == ("triton kernel", 2 * m * n * k, moved)
  occupied = programs / SMS
  by_hand = max(2 * m * n * k / (PEAK * occupied), moved / (BANDWIDTH * occupied)) + LAUNCH
  assert kernel.uncalibrated == pytest.approx(by_hand, rel=1e-6)


def test_a_pallas_kernel_that_adds_atomically_is_a_kind_of_its_own():
  """8 programs each add a [64, 64] f32 tile into one output tile, as the DeBERTa GPU kernel's
  backward adds its relative scores' gradients: atomically, so the kernel is of the kind that is
  calibrated apart, and each add reads and writes its tile (8 · 2 · 16 KiB) besides the loads
  (8 · 16 KiB)."""
  block, programs = 64, 8

  def kernel(x_ref, o_ref):
    jax.ref.addupdate(o_ref, (slice(None), slice(None)), x_ref[...])

  add = pl.pallas_call(
    kernel,
    grid=(programs,),
    out_shape=jax.ShapeDtypeStruct((block, block), jnp.float32),
    in_specs=[pl.BlockSpec((block, block), lambda i: (i, 0))],
    out_specs=pl.BlockSpec((block, block), lambda i: (0, 0)),
  )
  (launch,) = _compiled(add, jax.ShapeDtypeStruct((programs * block, block), jnp.float32)).launches
  tile = block * block * 4
  assert (launch.kind, launch.flops, launch.bytes) == (gpu_program.ATOMICS, 0, programs * 3 * tile)


def test_a_conditional_costs_its_branches_at_the_fractions_its_scope_gives():
  """As the DeBERTa GPU kernel's backward does: each of 8 programs adds its [64, 64] tile whole,
  or its row sums where the tile holds one value, and the scope says a quarter of the runs take
  the sums. Each program loads its tile (16 KiB); three quarters add the tile (read and written,
  2 · 16 KiB), a quarter 64 row sums (2 · 256 B). Without the scope both branches count whole."""
  block, programs = 64, 8

  def kernel(x_ref, o_ref):
    x = x_ref[...]
    jax.lax.cond(
      jnp.min(x) == jnp.max(x),
      lambda: jax.ref.addupdate(o_ref, (slice(None), slice(0, 1)), x.sum(axis=1, keepdims=True)),
      lambda: jax.ref.addupdate(o_ref, (slice(None), slice(None)), x),
    )

  add = pl.pallas_call(
    kernel,
    grid=(programs,),
    out_shape=jax.ShapeDtypeStruct((block, block), jnp.float32),
    in_specs=[pl.BlockSpec((block, block), lambda i: (i, 0))],
    out_specs=pl.BlockSpec((block, block), lambda i: (0, 0)),
  )

  def scoped(x):
    with jax.named_scope(taken_scope(0.25)):
      return add(x)

  tile, sums = block * block * 4, block * 4
  x = jax.ShapeDtypeStruct((programs * block, block), jnp.float32)
  (launch,) = _compiled(scoped, x).launches
  assert (launch.kind, launch.bytes) == (gpu_program.ATOMICS, programs * (tile + 0.75 * 2 * tile + 0.25 * 2 * sums))
  (launch,) = _compiled(add, x).launches
  assert launch.bytes == programs * (tile + 2 * tile + 2 * sums)


def test_an_all_reduce_over_two_cards_costs_its_bytes_at_nvlink():
  """The gradient of a data-parallel step over an h100:2 host: a ring all-reduce of the f32
  [1024, 1024] gradient sends 2(n−1)/n of its 4 MiB over NVLink (450 GB/s each way), plus 5 µs."""
  mesh = Mesh(np.array(targets.devices("h100:2")), ("x",))
  w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, PartitionSpec()))
  x = jax.ShapeDtypeStruct((256, 1024), jnp.bfloat16, sharding=NamedSharding(mesh, PartitionSpec("x")))
  program = _compiled(lambda w, x: jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w), w, x, mesh=mesh)
  (kernel,) = [k for k in _predicted(program).kernels if k.launch.kind == "collective"]
  assert (kernel.launch.collective, kernel.launch.peers) == ("all-reduce", 2)
  assert kernel.uncalibrated == pytest.approx(COLLECTIVE + 2 * (2 - 1) / 2 * 1024 * 1024 * 4 / LINK, rel=1e-6)


# --- dumps written here: each rule on its own ---------------------------------------------------


def _fusion(name: str, kind: str, estimate_us: float | None, backend: str = "") -> str:
  """An entry-computation fusion of f32[1024, 1024] into f32[1024, 1024] with XLA's estimate."""
  config = {"fusion_backend_config": {"kind": backend}} if backend else {}
  if estimate_us is not None:
    config["reification_cost"] = [
      {"compute_time_us": 0, "memory_access_time_us": estimate_us, "exec_time_us": estimate_us, "name": ""},
      {"exec_time_us": 0.01, "name": "sol"},
    ]
  return (
    f"  %{name} = f32[1024,1024]{{1,0}} fusion(%p), kind={kind}, calls=%fused_{name.replace('.', '_')}, "
    f"backend_config={json.dumps(config, separators=(',', ':'))}"
  )


def _dump(folder, fusions: list[str], thunks: list[str], names: list[str], extra_hlo: str = "") -> None:
  """A dump folder of one module: its optimized HLO, thunk sequence and metadata (thunk id →
  instruction), and an empty buffer assignment."""
  hlo = "\n".join(
    [
      "HloModule jit_step",
      "",
      "ENTRY %main (p: f32[1024,1024]) -> f32[1024,1024] {",
      "  %p = f32[1024,1024]{1,0} parameter(0)",
      *fusions,
      extra_hlo,
      "}",
    ]
  )
  metadata = "".join(
    f'thunk_metadata {{\n  thunk_info {{\n    profile_annotation: "{name}"\n    thunk_id: {i}\n  }}\n}}\n'
    for i, name in enumerate(names, 1)
  )
  prefix = "module_0001.jit_step."
  (folder / f"{prefix}sm_9.0a_gpu_after_optimizations.txt").write_text(hlo)
  (folder / f"{prefix}thunk_sequence.txt").write_text("\n".join(thunks) + "\n")
  (folder / f"{prefix}thunk_metadata.txt").write_text(metadata)
  (folder / f"{prefix}sm_9.0a_gpu_after_optimizations-buffer-assignment.txt").write_text("")


def _thunk(i: int, name: str, blocks: int = 8192, indent: str = "") -> str:
  return (
    f"{indent}{i:03d}: kCustomKernel [source | sink] {name} grid: [{blocks}, 1, 1] threads: [128, 1, 1]  "
    "shared_memory: 0 bytes"
  )


F32_MIB4 = 2 * 1024 * 1024 * 4  # a fusion's f32[1024, 1024] operand and result


def test_a_chain_of_elementwise_fusions_costs_xla_estimates_or_its_bytes(tmp_path):
  """Three loop fusions whose XLA estimates are sane (5, 6 and 7 µs) cost those plus a launch
  each; a fourth without an estimate costs its 8 MiB at the bandwidth (2.5 µs) plus a launch."""
  names = ["loop_add_fusion", "loop_multiply_fusion", "loop_exp_fusion", "loop_tanh_fusion"]
  _dump(
    tmp_path,
    [_fusion(n, "kLoop", us) for n, us in zip(names, (5.0, 6.0, 7.0, None))],
    [_thunk(i, n) for i, n in enumerate(names, 1)],
    names,
  )
  program, _ = gpu_program.read_dump(tmp_path)
  prediction = _predicted(program)
  assert [k.source for k in prediction.kernels] == ["xla estimate"] * 3 + ["bytes"]
  assert prediction.uncalibrated == pytest.approx(18e-6 + F32_MIB4 / BANDWIDTH + 4 * LAUNCH, rel=1e-9)


def test_an_absurd_xla_estimate_gives_way_to_the_bytes(tmp_path):
  """XLA's estimate of a Triton (softmax, norm) fusion can be seconds for megabytes (4.4 s here):
  past 20 times the time of its bytes at the bandwidth it is replaced by that time; a sane one
  (40 µs, 16× its 2.5 µs) stands. The same fusion on 4 blocks draws 4/132 of the bandwidth."""
  names = ["fusion.1", "fusion.2", "fusion.3"]
  fusions = [
    _fusion("fusion.1", "kCustom", 4.4e6, "__triton"),
    _fusion("fusion.2", "kCustom", 40.0, "__triton"),
    _fusion("fusion.3", "kCustom", 4.4e6, "__triton"),
  ]
  _dump(tmp_path, fusions, [_thunk(1, "fusion_1"), _thunk(2, "fusion_2"), _thunk(3, "fusion_3", blocks=4)], names)
  program, _ = gpu_program.read_dump(tmp_path)
  first, second, third = _predicted(program).kernels
  assert first.launch.kind == "triton fusion" and first.source.startswith("bytes")
  assert first.uncalibrated == pytest.approx(F32_MIB4 / BANDWIDTH + LAUNCH, rel=1e-9)
  assert (second.source, second.uncalibrated) == ("xla estimate", pytest.approx(40e-6 + LAUNCH, rel=1e-9))
  assert third.uncalibrated == pytest.approx(F32_MIB4 / (BANDWIDTH * 4 / SMS) + LAUNCH, rel=1e-9)


def test_a_loops_kernels_cost_its_trip_count(tmp_path):
  """A while loop XLA knows runs 4 times (known_trip_count): its body's kernel counts 4 times in
  the time, once in kernels_per_step."""
  loop = (
    '  %while.1 = f32[1024,1024]{1,0} while(%p), condition=%cond, body=%body, '
    'backend_config={"known_trip_count":{"n":"4"}}'
  )
  thunks = [
    "001: kWhile        [source | sink]",
    "condition:",
    _thunk(2, "loop_compare_fusion", 1, "    "),
    "  body:",
    _thunk(3, "loop_add_fusion", indent="    "),
    _thunk(4, "loop_exp_fusion"),
  ]
  names = ["while.1", "loop_compare_fusion", "loop_add_fusion", "loop_exp_fusion"]
  fusions = [
    _fusion("loop_compare_fusion", "kLoop", 1.0),
    _fusion("loop_add_fusion", "kLoop", 5.0),
    _fusion("loop_exp_fusion", "kLoop", 7.0),
  ]
  _dump(tmp_path, fusions, thunks, names, extra_hlo=loop)
  program, _ = gpu_program.read_dump(tmp_path)
  assert (program.kernel_count, program.loops) == (3, 1)
  assert _predicted(program).uncalibrated == pytest.approx(4 * (1e-6 + 5e-6 + 2 * LAUNCH) + 7e-6 + LAUNCH, rel=1e-9)


def test_the_command_costs_a_dump_folder_and_leads_with_the_calibrated_step(tmp_path):
  """`python -m wyjax.aot.gpu_step_time DIR --card=h100 --tokens=N`: the calibrated step first,
  with its held-out band, the uncalibrated sum below it, then a JSON line whose
  predicted_step_seconds is the calibrated step: each kernel, launch included, times the shipped
  factor of its kind (an elementwise loop fusion and a Triton fusion)."""
  names = ["loop_add_fusion", "fusion.2"]
  _dump(
    tmp_path,
    [_fusion(names[0], "kLoop", 5.0), _fusion(names[1], "kCustom", 4.4e6, "__triton")],
    [_thunk(1, "loop_add_fusion"), _thunk(2, "fusion_2")],
    names,
  )
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.aot.gpu_step_time", str(tmp_path), "--card=h100", "--tokens=1000"],
    capture_output=True,
    text=True,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
  )
  assert result.returncode == 0, result.stderr[-2000:]
  *lines, last = result.stdout.strip().splitlines()
  report = json.loads(last)
  shipped = json.loads(gpu_step_time.CALIBRATION.read_text())
  work = 5e-6 + F32_MIB4 / BANDWIDTH
  by_hand = shipped["factors"]["elementwise"] * (5e-6 + LAUNCH) + shipped["factors"]["triton fusion"] * (
    F32_MIB4 / BANDWIDTH + LAUNCH
  )
  assert report["predicted_step_seconds"] == pytest.approx(by_hand, rel=1e-9)
  assert report["predicted_step_band_seconds"] == pytest.approx([by_hand * x for x in shipped["held_out_band"]])
  assert report["predicted_uncalibrated_step_seconds"] == pytest.approx(work + 2 * LAUNCH, rel=1e-9)
  assert report["predicted_tokens_per_second"] == pytest.approx(1000 / by_hand, rel=1e-9)
  assert [k["name"] for k in report["predicted_top_kernels"]] == ["loop_add_fusion", "fusion.2"]
  first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("predicted step on each h100: "))
  assert lines[first].lstrip().startswith(f"predicted step on each h100: {by_hand * 1e3:.4f} ms"), lines
  assert "held-out error band" in lines[first] and lines[first + 1].lstrip().startswith("bounds below it: "), lines


def test_an_operand_of_a_nested_tuple_counts_its_own_bytes():
  """`%a#0#1` is element 1 of element 0 of a's tuple: an s32[32,116] operand, 14,848 bytes."""
  hlo = optimized_hlo.read_hlo(
    "ENTRY %main () -> f32[32,116] {\n"
    "  %a = ((f32[32,116]{1,0}, s32[32,116]{1,0}), f32[8]{0}) custom-call(), custom_call_target=\"x\"\n"
    "  ROOT %b = f32[32,116]{1,0} fusion(%a#0#1, %a#1), kind=kLoop, calls=%f\n}\n"
  )
  assert optimized_hlo.operand_shape(hlo, "a#0#1") == "s32[32,116]{1,0}"
  assert optimized_hlo.io_bytes(hlo, hlo["b"]) == 32 * 116 * 4 + 32 * 116 * 4 + 8 * 4

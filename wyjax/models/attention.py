"""Which attention an encoder runs (config.attention), and the wiring of the fused kernels.

The routes (ROUTES, read top to bottom, says which one a call takes):
- "xla": the reference (einsums, the relative terms, a float32 softmax in HBM);
- "cudnn": cuDNN's flash attention, padding as sequence lengths, DeBERTa's relative terms as a bias;
- "cudnn_dropout": the same with cuDNN's own attention dropout, whose masks ignore the run's seed and step;
- "pallas": a fused kernel (Mosaic on a TPU, Triton on a GPU, interpreted on a CPU).
Incremental decoding (one query at a time against a cache) always takes "xla".
"""

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax._src.cudnn import fused_attention_stablehlo as cudnn_private

from wyjax.kernels import attention_common as common
from wyjax.kernels import disentangled_attention as tpu_kernel
from wyjax.kernels import disentangled_attention_gpu as gpu_kernel

TPU_BLOCK = 128  # the lane width: Mosaic's tiles of queries and keys
INTERPRET_BLOCK = 32  # several tiles per test sequence, cheap to interpret
# Keys from which "auto" trains through the GPU kernel: on an H200 its training pass lost to XLA at
# 512 and 1024 keys (0.71x, 0.77x; the backward adds score gradients atomically) and won at 4096
# (1.34x, in a fifth of the memory); 2048 is unmeasured (docs/benchmarks.md).
GPU_KERNEL_TRAINS_FROM = 2048


def platform() -> str:
  """The platform the traced program is for: the abstract mesh's if any, else the default backend's.

  Under a TPU topology's mesh on a CPU host (compiling ahead of time), that is "tpu".
  """
  mesh = jax.sharding.get_abstract_mesh()
  return jax.default_backend() if mesh.empty else mesh.abstract_device.platform


@dataclasses.dataclass(frozen=True)
class Call:
  """What the route of one attention call depends on."""

  relative: bool  # DeBERTa's relative terms
  training: bool  # a pass whose gradient is taken (deterministic=False)
  dropout: bool  # attention dropout in it
  length: int  # of the keys
  padding_only: bool  # the mask is a [batch, key] padding mask (not a prefix-LM's [batch, query, key] one)
  dtype: str
  head_dim: int

  @property
  def short(self) -> bool:
    """Training on fewer keys than GPU_KERNEL_TRAINS_FROM, where the GPU kernel trains slower than XLA."""
    return self.training and self.length < GPU_KERNEL_TRAINS_FROM

  @property
  def cudnn_serves(self) -> bool:
    return cudnn_serves(dropout=self.dropout, padding_only=self.padding_only, dtype=self.dtype, head_dim=self.head_dim)

  @property
  def cudnn_serves_but_for_dropout(self) -> bool:
    return self.dropout and cudnn_serves(
      dropout=False, padding_only=self.padding_only, dtype=self.dtype, head_dim=self.head_dim
    )


@dataclasses.dataclass(frozen=True)
class Route:
  """A row of ROUTES: the route that the calls it matches take, and why.

  It matches a call on `platform` under a config.attention in `asked` when `when(call)`. `takes` is the
  route, or None: refused with `refusal`. `evidence`: a measured row, a compiled program's test, a prediction.
  """

  takes: str | None
  platform: str  # "gpu", "tpu", "cpu", or "any"
  asked: tuple[str, ...]
  when: Callable[[Call], bool]
  evidence: str
  refusal: str = ""


AUTO = ("auto", "cudnn_dropout")  # "cudnn_dropout" is "auto" but where cuDNN serves all but the dropout
ANY = ("auto", "cudnn_dropout", "pallas", "xla")
# Which route a call takes: the first row whose platform, asked value and condition match.
ROUTES = (
  Route(
    "xla", "any", ("xla",), lambda c: True, "the reference; every route equals it (tests/models/attention_test.py)"
  ),
  Route(
    None,
    "gpu",
    ("pallas",),
    lambda c: c.relative and deterministic_gpu(),
    "the GPU kernel's backward adds the relative scores' gradients with float atomics "
    "(tests/models/attention_gpu_test.py::test_deterministic_gpu_ops_take_the_xla_path_for_deberta)",
    refusal="attention='pallas': the GPU kernel's backward adds the relative scores' gradients with float "
    "atomics, in no fixed order, and XLA_FLAGS asks for --xla_gpu_deterministic_ops. Use "
    "attention='auto' or 'xla' (reproducible), or drop the flag.",
  ),
  Route(
    "xla",
    "gpu",
    AUTO,
    lambda c: c.relative and deterministic_gpu(),
    "XLA_FLAGS asks for the same bits every run: XLA's reductions are made deterministic, the GPU "
    "kernel's atomics cannot be (tests/models/attention_gpu_test.py::"
    "test_deterministic_gpu_ops_take_the_xla_path_for_deberta)",
  ),
  Route(
    "cudnn_dropout",
    "gpu",
    ("cudnn_dropout",),
    lambda c: c.cudnn_serves_but_for_dropout and (not c.relative or c.short),
    "asked for by name, warned (warn_cudnn_dropout): cuDNN's dropout forward and backward kernels in "
    "the program lowered for an H100 (tests/models/attention_gpu_test.py::"
    "test_cudnn_dropout_lowers_to_cudnns_dropout_kernels)",
  ),
  Route(
    "cudnn",
    "gpu",
    ANY,
    lambda c: not c.relative and c.cudnn_serves,
    "BERT: NVIDIA's tuned flash attention, no [B, H, L, L] array in HBM (tests/models/attention_gpu_test.py::"
    "test_bert_base_pretrains_through_cudnn_on_a_gpu; the predicted step, docs/benchmarks.md)",
  ),
  Route(
    "cudnn",
    "gpu",
    AUTO,
    lambda c: c.relative and c.short and c.cudnn_serves,
    "DeBERTa's training with its relative terms as a bias: no float32 [B, H, L, L] array "
    "(tests/models/attention_test.py::test_auto_trains_deberta_on_a_gpu_through_cudnn_where_xla_trained; "
    "the predicted step, docs/benchmarks.md)",
  ),
  Route(
    "xla",
    "gpu",
    AUTO,
    lambda c: c.short,
    "measured on an H200: the GPU kernel's training pass 0.71x and 0.77x XLA's at 512 and 1,024 keys "
    "(docs/benchmarks.md, \"Fine-tuning, prediction and the attention alone\")",
  ),
  Route(
    "pallas",
    "gpu",
    ("auto", "cudnn_dropout", "pallas"),
    lambda c: c.head_dim in gpu_kernel.HEAD_DIMS,
    "measured on an H200: its forward 1.35x and 1.41x XLA's at 512 and 4,096 keys, its training pass 1.34x "
    "at 4,096 (docs/benchmarks.md, \"Fine-tuning, prediction and the attention alone\")",
  ),
  Route(
    None,
    "gpu",
    ("pallas",),
    lambda c: True,
    "Triton's tiles are powers of two",
    refusal="attention='pallas': the GPU kernel takes a head dimension of {HEAD_DIMS} (Triton's tiles are "
    "powers of two), not {head_dim}. Use attention='auto' or 'xla'.",
  ),
  Route("xla", "gpu", AUTO, lambda c: True, "no kernel takes this head dimension"),
  Route(
    "pallas",
    "tpu",
    ("auto", "cudnn_dropout", "pallas"),
    lambda c: True,
    "predicted on a v5p: a layer's forward and backward in a fraction of XLA's memory at every length "
    "(docs/benchmarks.md, \"TPU predicted (compile-only)\")",
  ),
  Route(
    "pallas",
    "any",
    ("pallas",),
    lambda c: True,
    "on a CPU, interpreted: the kernels tested against the reference (tests/models/attention_test.py)",
  ),
  Route("xla", "any", AUTO, lambda c: True, "a CPU has no fused kernel but an interpreted one"),
)


def route(choice: str, call: Call) -> Route:
  """The row of ROUTES that `call` takes under config.attention = `choice` on this platform."""
  where = platform()
  return next(r for r in ROUTES if r.platform in (where, "any") and choice in r.asked and r.when(call))


def implementation(
  choice: str,
  *,
  relative: bool,
  training: bool,
  dropout: bool,
  length: int,
  padding_only: bool = True,
  dtype: str = "float32",
  head_dim: int = 64,
) -> str:
  """The route ("xla", "pallas", "cudnn" or "cudnn_dropout") of a call on this platform.

  `choice` is config.attention; the rest are Call's fields. Raises ValueError where ROUTES refuses the call.
  """
  taken = route(choice, Call(relative, training, dropout, length, padding_only, dtype, head_dim))
  if taken.takes is None:
    raise ValueError(taken.refusal.format(HEAD_DIMS=gpu_kernel.HEAD_DIMS, head_dim=head_dim))
  return taken.takes


def deterministic_gpu() -> bool:
  """Whether XLA_FLAGS asks for --xla_gpu_deterministic_ops (bare, true or 1; the last mention wins).

  The flag asks for the same bits every run: XLA's reductions and cuDNN's backward comply, the GPU kernel's
  atomics cannot.
  """
  deterministic = False
  for flag in os.environ.get("XLA_FLAGS", "").split():
    name, _, value = flag.partition("=")
    if name == "--xla_gpu_deterministic_ops":
      deterministic = value.lower() in ("", "true", "1")
  return deterministic


def cudnn_serves(*, dropout: bool, padding_only: bool, dtype: str, head_dim: int) -> bool:
  """Whether cuDNN's flash attention can compute this attention.

  It needs no attention dropout (jax.nn.dot_product_attention has none), 16-bit inputs, a head dimension
  that is a multiple of 8 up to 128, and a padding mask (taken as sequence lengths: a prefix-LM mask would
  be a [batch, 1, query, key] bias, whose gradient some jax releases compute in full).
  """
  return (
    not dropout
    and padding_only
    and jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16)
    and head_dim % 8 == 0
    and head_dim <= 128
  )


def sequence_lengths(key_mask):
  """Each row's count of real tokens in a [batch, 1, 1, L] mask, real tokens first: padding as cuDNN takes it.

  A row of padding alone counts as one token long, so that it stays finite.
  """
  return jnp.maximum(jnp.sum(key_mask[:, 0, 0], axis=-1, dtype=jnp.int32), 1)


def cudnn_attention(q, k, v, key_mask, scale: float, bias=None, implementation: str = "cudnn"):
  """softmax(q·k / scale + bias, over the real keys) · v, by jax.nn.dot_product_attention.

  Args:
    q, k, v: [batch, L, heads, d].
    key_mask: boolean [batch, 1, 1, L] (layers.expand_mask of a padding mask), the real tokens first, as
      wyjax's batches pad at the end. Unchecked (a check would copy it to the host): a row padded at the
      start or with holes attends the wrong keys.
    scale: the scores' divisor.
    bias: None or [batch, heads, L, L] in q's dtype (DeBERTa's relative terms; cuDNN's backward gives its
      gradient).
    implementation: "cudnn" (cuDNN's flash attention, on a GPU) or "xla" (the tests).

  Returns:
    [batch, L, heads, d]; the queries past a row's length are zero (nobody reads them).
  """
  # The padding as sequence lengths: cuDNN takes a mask only as a full [batch, heads or 1, L, L] bias.
  lengths = sequence_lengths(key_mask)
  return jax.nn.dot_product_attention(
    q,
    k,
    v,
    bias,
    scale=1.0 / scale,
    query_seq_lengths=lengths,
    key_value_seq_lengths=lengths,
    implementation=implementation,
  )


CUDNN_DROPOUT_SEED = 0  # cuDNN's dropout seed is a static integer of the compiled program


def cudnn_dropout_attention(q, k, v, key_mask, scale: float, rate: float, bias=None):
  """`cudnn_attention` with cuDNN's own attention dropout at `rate` (config.attention="cudnn_dropout").

  It calls jax's private cuDNN wrapper (jax.nn.dot_product_attention takes no dropout). cuDNN draws the
  masks from CUDNN_DROPOUT_SEED and a counter XLA keeps per compiled call: they follow neither the run's
  seed nor its step, restart when the program is recompiled or a run resumes, and are the same on every
  device (`warn_cudnn_dropout`).
  """
  lengths = sequence_lengths(key_mask)
  return cudnn_private.dot_product_attention(
    q,
    k,
    v,
    bias,
    q_seqlen=lengths,
    kv_seqlen=lengths,
    scale=1.0 / scale,
    mask_type=cudnn_private.MaskType.PADDING,
    seed=CUDNN_DROPOUT_SEED,
    dropout_rate=rate,
    qkv_layout="BTNH",
  )


@functools.cache
def warn_cudnn_dropout() -> None:
  """Says once per process what attention="cudnn_dropout" gives up for cuDNN's fused dropout."""
  logging.warning(
    "attention='cudnn_dropout': cuDNN's attention dropout follows its own counter, not the run's "
    "seed and step: a resumed run draws other masks than an uninterrupted one, and every device "
    "draws the same; 'auto' keeps wyjax's masks (docs/models.md)"
  )


def dropout_seed(module: nn.Module) -> jax.Array:
  """An int32 seed for the kernel's dropout hash, from the module's 'dropout' RNG stream."""
  return jax.lax.bitcast_convert_type(jax.random.bits(module.make_rng("dropout"), dtype=jnp.uint32), jnp.int32)


def fused_attention(
  q,
  k,
  v,
  mask,
  *,
  scale: float,
  dropout_rate: float = 0.0,
  seed=None,
  pos_key=None,
  pos_query=None,
  relative_index=None,
  target: str | None = None,
):
  """softmax((q·k + q·pos_key[r] + k·pos_query[r]) / scale, masked) · v, fused.

  Args:
    q, k, v: [batch, L, heads, d].
    mask: boolean [batch, 1, 1 or L, L] (layers.expand_mask).
    scale: the scores' divisor.
    dropout_rate, seed: attention dropout, hashed from the int32 `seed` (dropout_seed).
    pos_key, pos_query: [2S, heads, d] relative projections for c2p / p2c, or None.
    relative_index: numpy distances i - j → rows r of those projections.
    target: "tpu" or "gpu", whose kernel runs (default: the platform's; on a CPU, interpreted, the TPU one).

  Returns:
    [batch, L, heads, d].
  """
  where = platform()
  if target is not None and (target not in ("tpu", "gpu") or where not in (target, "cpu")):
    raise ValueError(f"fused_attention: no {target!r} kernel on a {where}; a CPU interprets 'tpu' or 'gpu'")
  gpu = (target or where) == "gpu"
  # Interpreted where the program runs on a CPU (a target kernel on a CPU, tests); under a TPU or
  # GPU mesh on a CPU host (compiling ahead of time) the kernel is lowered for that platform.
  interpret = where == "cpu"
  length = q.shape[1]
  spec = common.Spec(
    length=length,
    block=_block(length, gpu, interpret),
    scale=float(scale),
    c2p=pos_key is not None,
    p2c=pos_query is not None,
    dropout_rate=float(dropout_rate),
    interpret=interpret,
  )
  padded = spec.padded_length
  to_tiles = lambda x: jnp.pad(x, ((0, 0), (0, padded - length), (0, 0), (0, 0))).transpose(0, 2, 1, 3)
  mask = mask[:, 0].astype(jnp.int32)  # padded queries see nothing (uniform over the real keys), unread
  mask = jnp.pad(mask, ((0, 0), (0, padded - length if mask.shape[1] > 1 else 0), (0, padded - length)))
  kernel = gpu_kernel if gpu else tpu_kernel
  tables = kernel.distance_tables(pos_key, pos_query, relative_index, padded)
  seed = jnp.zeros((), jnp.int32) if seed is None else seed
  with gpu_kernel.branch_scope(relative_index, spec) if gpu else contextlib.nullcontext():
    out = _per_shard(kernel, spec)(to_tiles(q), to_tiles(k), to_tiles(v), mask, tables, seed)
  return out.transpose(0, 2, 1, 3)[:, :length]


def _block(length: int, gpu: bool, interpret: bool) -> int:
  """Queries and keys per tile.

  Interpreted: at most INTERPRET_BLOCK, so that test sequences have several tiles; the GPU kernel's a power
  of two (Triton's tiles) and at least 16.
  """
  if not interpret:
    return gpu_kernel.BLOCK if gpu else TPU_BLOCK
  if gpu:
    return min(INTERPRET_BLOCK, max(16, 1 << (length - 1).bit_length()))
  return min(INTERPRET_BLOCK, -(-length // 8) * 8)


def _per_shard(kernel, spec: common.Spec):
  """`kernel` (the TPU or GPU kernel's module), run by shard_map per device when a mesh is in context.

  XLA cannot partition a Pallas call. The logical axis rules say which mesh axes hold the batch and the
  heads; each shard hashes its dropout from its own seed, and the tables' gradients (partial sums over a
  shard's rows) are summed over the batch axes.
  """
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return functools.partial(kernel.fused_attention, spec)
  batch_axes, head_axes = nn.logical_to_mesh_axes(("activation_batch", "activation_heads"))
  sharded_axes = tuple(
    name for axes in (batch_axes, head_axes) if axes for name in ((axes,) if isinstance(axes, str) else axes)
  )
  P = jax.sharding.PartitionSpec

  def shard(q, k, v, mask, tables, seed):
    if sharded_axes:
      seed = common.fold_in(seed, jax.lax.axis_index(sharded_axes))
    return kernel.fused_attention(spec, q, k, v, mask, tables, seed)

  return jax.shard_map(
    shard,
    mesh=mesh,
    in_specs=(P(batch_axes, head_axes),) * 3 + (P(batch_axes), P(head_axes), P()),
    out_specs=P(batch_axes, head_axes),
    check_vma=False,
  )

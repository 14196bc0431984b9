"""Shared fixtures. Tests that read ../shared/data use `shared_data`; CI always has it."""

import os
import pathlib
import sys

# libtpu (a test dependency: the compile-only tests compile for TPU topologies) would probe for
# TPUs in every process; the tests and the runs they start use the CPU.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The tests compile many small programs and run each briefly: without LLVM's optimisation of the
# CPU code a tiny fine-tune's compiles take half as long.
# XLA's programs are the same (their HLO, buffers, and the GPU and TPU compiles); only the CPU's
# machine code is slower. Set here for this process and every command the tests start.
CPU_XLA_FLAGS = "--xla_backend_optimization_level=0"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {CPU_XLA_FLAGS}".strip()

import jax  # noqa: E402 (after the environment above, which jax reads when imported)
import pytest  # noqa: E402

SHARED_DATA = pathlib.Path(
  os.environ.get("WYJAX_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)

# The tests compile the same programs in this process and in the runs they start
# (tests.train.conftest.pretrain_env): one persistent compilation cache for all of them.
XLA_CACHE = pathlib.Path(os.environ.get("PYTEST_XLA_CACHE", "/tmp/wyjax-test-xla-cache"))
jax.config.update("jax_compilation_cache_dir", str(XLA_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
  if not SHARED_DATA.is_dir():
    if os.environ.get("CI"):
      pytest.fail(f"CI must have the shared data at {SHARED_DATA}")
    pytest.skip(f"no shared data at {SHARED_DATA}")
  return SHARED_DATA


@pytest.fixture(scope="session")
def h100_mesh() -> jax.sharding.AbstractMesh:
  """One abstract H100: under jax.sharding.use_abstract_mesh(h100_mesh) a program takes a GPU's
  choices (wyjax.models.attention.platform) and lowers for CUDA on this CPU host."""
  device = jax.sharding.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu")
  return jax.sharding.AbstractMesh((1,), ("data",), abstract_device=device)


@pytest.fixture(scope="session")
def classical_dirs(shared_data, tmp_path_factory) -> dict[str, pathlib.Path]:
  """Data folders of the non-WYWEB benchmarks: C-CLUE NER as shared; CCPM, C-CLUE relations
  and AC-EVAL written by tests.classical_fixtures in their exact formats, from real text."""
  from tests import classical_fixtures

  root = tmp_path_factory.mktemp("classical")
  return {
    "ccpm": classical_fixtures.write_ccpm(shared_data, root / "ccpm"),
    "cclue_ner": shared_data / "cclue" / "ner",
    "cclue_re": classical_fixtures.write_cclue_re(shared_data, root / "cclue_re"),
    "aceval": classical_fixtures.write_aceval(shared_data, root / "aceval"),
  }


def assert_plot(path):
  """A PNG that decodes to a real figure: a few hundred pixels a side, more than a blank page."""
  import matplotlib.image
  import numpy as np

  image = matplotlib.image.imread(path)
  assert image.shape[0] >= 200 and image.shape[1] >= 200, image.shape
  assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 20  # axes, text, cells: not one colour


def as_from_a_terminal(command: list[str]) -> list[str]:
  """`command` started with SIGINT at its default action, as a terminal's foreground job has it.
  A pytest worker can fork while it holds SIGINT ignored (seen: SIGHUP, SIGINT and SIGQUIT
  ignored in the child, from a library at work in the worker), and an ignored signal stays
  ignored across exec: Python would then never turn Ctrl-C into KeyboardInterrupt."""
  default = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
  return [sys.executable, "-c", default, *command]

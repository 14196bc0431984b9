"""wyjax as users install it: the wheel in a fresh virtualenv, run from outside the repository;
and setup.py's bounds and pins against constraints.txt, the exact set CI tests."""

import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile

from packaging.requirements import Requirement

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _constraints() -> dict[str, str]:
  pins = {}
  for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
    if line and not line.startswith("#"):
      name, version = line.split("==")
      pins[re.sub(r"[-_.]+", "-", name).lower()] = version
  return pins


def test_every_dependency_is_bounded_and_the_accelerator_extras_pin_the_tested_jax():
  requirements = [Requirement(r) for r in importlib.metadata.requires("wyjax")]
  for r in requirements:
    if r.marker is None:  # install_requires
      operators = {s.operator for s in r.specifier}
      assert {">=", "<"} <= operators, f"{r}: needs a lower and an upper bound"
  pins = _constraints()
  extras = {str(r.marker).split('"')[1]: r for r in requirements if r.name == "jax" and r.marker is not None}
  assert {"cuda12", "cuda13", "tpu", "test"} <= set(extras)
  for extra, r in extras.items():
    assert str(r.specifier) == f"=={pins['jax']}", f"[{extra}] pins jax {r.specifier}, CI tests {pins['jax']}"
  gpu_compile = {r.name: r for r in requirements if r.marker is not None and "gpu-compile" in str(r.marker)}
  for plugin in ("jax-cuda13-plugin", "jax-cuda13-pjrt"):  # built against the one jaxlib
    assert str(gpu_compile[plugin].specifier) == f"=={pins['jax']}", gpu_compile[plugin]
  assert gpu_compile["nvidia-cuda-nvcc"].specifier.contains(pins["nvidia-cuda-nvcc"])  # ptxas
  for r in requirements:  # the versions CI tests satisfy setup.py
    name = re.sub(r"[-_.]+", "-", r.name).lower()
    if r.marker is None:
      assert name in pins and r.specifier.contains(pins[name]), f"{r} vs constraints.txt {pins.get(name)}"


def test_the_wheel_installs_and_runs_from_outside_the_repository(shared_data, tmp_path):
  """Builds the wheel, installs it with constraints.txt into a new virtualenv, then fine-tunes
  with `--config=tlc.py` and runs `wyjax.benchmark` in a folder that is not the checkout."""
  run = lambda *command, **kwargs: subprocess.run(command, capture_output=True, text=True, **kwargs)
  built = run(
    sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(REPO_ROOT)
  )
  assert built.returncode == 0, built.stderr[-3000:]
  (wheel,) = (tmp_path / "dist").glob("wyjax-*.whl")
  shipped = set(zipfile.ZipFile(wheel).namelist())  # the GPU step prediction's data: XLA's GEMM table, the factors
  assert {"wyjax/aot/xla_gemm_sm90.json", "wyjax/aot/gpu_calibration.json"} <= shipped
  # The venv's Python, installing too, sees neither this one's environment nor a checkout on
  # PYTHONPATH: with one there, pip took wyjax as installed and installed nothing.
  env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "PYTHON", "VIRTUAL_ENV"))}
  env.update(JAX_PLATFORMS="cpu", WYJAX_CACHE=str(tmp_path / "cache"))
  venv = tmp_path / "venv"
  assert run(sys.executable, "-m", "venv", str(venv), env=env).returncode == 0
  python = str(venv / "bin" / "python")
  # --no-compile: pip's bytecode for every file of 1.4 GB of packages took 40% of the install; the runs
  # below compile what they import.
  installed = run(
    python,
    "-m",
    "pip",
    "install",
    "--quiet",
    "--no-compile",
    "-c",
    str(REPO_ROOT / "constraints.txt"),
    str(wheel),
    env=env,
  )
  assert installed.returncode == 0, installed.stderr[-3000:]

  # A small TLC folder of real lines; data_root/tlc for the benchmark.
  lines = (shared_data / "wyweb" / "tlc" / "train.tsv").read_bytes().split(b"\n")
  data = tmp_path / "data" / "tlc"
  data.mkdir(parents=True)
  (data / "train.tsv").write_bytes(b"\n".join(lines[:64]))
  (data / "dev.tsv").write_bytes(b"\n".join(lines[64:96]))
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  where = run(python, "-c", "import wyjax; print(wyjax.__file__)", cwd=elsewhere, env=env)
  assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

  small = ["--config.num_train_steps=2", "--config.max_length=32", "--config.batch_size=8"]
  finetune = run(
    python,
    "-m",
    "wyjax.finetune",
    "--config=tlc.py",
    f"--workdir={tmp_path / 'tlc'}",
    f"--config.data_dir={data}",
    *small,
    cwd=elsewhere,
    env=env,
  )
  assert finetune.returncode == 0, finetune.stderr[-3000:]
  assert json.loads(finetune.stdout[finetune.stdout.index("{") :])["task"] == "tlc"
  # The terminal gets wyjax's lines; orbax's and TFDS's absl-formatted records go to the log file.
  absl_record = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d", re.M)
  assert not absl_record.search(finetune.stderr), finetune.stderr
  assert "seed 0 step 2: dev" in finetune.stderr
  assert absl_record.search((tmp_path / "tlc" / "finetune.log").read_text())

  # Without the gpu-compile extra, compiling for a GPU is one line saying what to install.
  gpu = run(
    python,
    "-m",
    "wyjax.pretrain",
    "--config=pretrain/deberta_tiny.py",
    "--config.model.vocab_size=100",
    "--compile_only=h100",
    cwd=elsewhere,
    env=env,
  )
  assert gpu.returncode == 1 and "Traceback" not in gpu.stderr, gpu.stderr[-3000:]
  assert ".[gpu-compile]" in gpu.stderr.strip().splitlines()[-1], gpu.stderr[-3000:]

  benchmark = run(
    python,
    "-m",
    "wyjax.benchmark",
    f"--data_root={data.parent}",
    f"--out={tmp_path / 'bench'}",
    "--tasks=tlc",
    "--num_train_steps=2",
    "--batch_size=8",
    cwd=elsewhere,
    env=env,
  )
  assert benchmark.returncode == 0, benchmark.stderr[-3000:]
  board = json.loads((tmp_path / "bench" / "leaderboard.json").read_text())
  assert set(board["tasks"]) == {"tlc"} and not board["failed"]
  assert (tmp_path / "bench" / "leaderboard.md").read_text() in benchmark.stdout

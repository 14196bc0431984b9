"""Every shipped config a CPU runs, its programs compiled on this CPU at its own batch size and
sequence length (benchmarks/config_memory.py, in a process of its own): XLA's buffers of its train
and evaluation steps and the compile's peak resident memory stay within 1.5× of what they were
when pinned, so a change that doubles either fails here (CMRC 2018's steps at 512 tokens were once
killed for memory and no test noticed).

The base and large pretraining configs are left to the benchmark and its table in
docs/benchmarks.md: they are accelerator programs that a CPU run refuses, and their CPU compiles
took a quarter of this test's ten minutes. The base configs' steps are pinned where they run, on an
H100 at 32 × 512 (tests/train/lean_step_test.py); the large one's buffers no test pins."""

import json
import pathlib
import re
import subprocess
import sys

import pytest

from benchmarks import config_memory
from tests.tasks.clue_test import write_pair_folders
from tests.train.conftest import REPO_ROOT, pretrain_command, pretrain_env

MiB = 2**20
BENCHMARK = config_memory.__file__
# config → (train step's buffers, evaluation step's buffers, the compile's peak above its start),
# MiB, on the data root below (the peaks: 2026-11-27, a 2-core AMD EPYC, the largest of three runs; the
# buffers, XLA's own figures and alike at either LLVM optimisation level, pinned again on 2026-11-29 at
# fcb2dd0, most evaluation steps' having shrunk to 0.4-0.8 of their earlier pins: docs/benchmarks.md).
PINNED = {
  "punc": (1519, 419, 767),
  "glner": (1526, 421, 257),
  "gjc": (2198, 420, 255),
  "tlc": (1515, 420, 229),
  "fspc": (80, 16, 295),
  "xuci": (227, 42, 227),
  "irc": (3614, 148, 266),
  "wywrc": (1858, 420, 259),
  "wywmt": (4473, 764, 246),
  "ccpm": (667, 58, 234),
  "ccpm:match": (842, 47, 302),
  "ccpm:softmax": (667, 58, 222),
  "ccpm:match_shared": (840, 54, 227),
  "cclue_ner": (1524, 421, 196),
  "cclue_re": (179, 58, 198),
  "cclue_re:spo": (182, 58, 202),
  "cclue_re:given_entities": (487, 146, 184),
  "aceval": (1507, 210, 220),
  "clue/afqmc": (92, 58, 200),
  "clue/tnews": (95, 59, 249),  # its peak re-pinned on 2026-12-04 (249 in .ci/run on a loaded machine)
  "clue/iflytek": (186, 59, 192),
  "clue/cmnli": (341, 58, 232),
  "clue/ocnli": (184, 59, 126),
  "clue/cluewsc2020": (55, 58, 185),
  "clue/csl": (95, 147, 187),
  "clue/cmrc2018": (7002, 394, 219),
  "clue/chid": (361, 20, 178),
  "clue/c3": (4258, 420, 345),
  "pretrain/deberta_tiny": (127, 68, 303),
}
# Pretraining configs sized for accelerators (the module's docstring says where they are pinned).
ACCELERATOR_CONFIGS = {
  "pretrain/bert_base",
  "pretrain/deberta_base",
  "pretrain/deberta_v3_base",
  "pretrain/deberta_large",
}
# Buffers are the compiler's own figures; a compile's peak varies by up to ~100 MiB between runs.
SLACK, PEAK_NOISE = 1.5, 64


def _data_root(shared_data, classical_dirs, root: pathlib.Path) -> pathlib.Path:
  """Every task's folder as wyjax.benchmark reads them: the shared files, and the test fixtures
  where a benchmark's files are not shared (PUNC and GJC built from the Daizhige sample)."""
  for task in ("fspc", "glner", "irc", "tlc", "wywmt", "wywrc", "xuci"):
    (root / task).symlink_to(shared_data / "wyweb" / task)
  for task in ("tnews", "iflytek", "csl", "cluewsc2020", "chid", "ocnli", "c3", "cmrc2018"):
    (root / task).symlink_to(shared_data / "clue" / task)
  for task, folder in classical_dirs.items():
    (root / task).symlink_to(folder)
  write_pair_folders(shared_data, root)
  for builder, options in (
    ("build-punc", ["--dev_fraction=0.3", "--test_fraction=0.1"]),
    ("build-gjc", ["--per_collection=200", "--dev_fraction=0.3"]),
  ):
    subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.tasks",
        builder,
        f"--daizhige={shared_data / 'daizhige_sample'}",
        f"--out={root / builder.removeprefix('build-')}",
        *options,
      ],
      check=True,
      capture_output=True,
    )
  return root


@pytest.fixture(scope="module")
def measured(shared_data, classical_dirs, tmp_path_factory) -> dict:
  root = _data_root(shared_data, classical_dirs, tmp_path_factory.mktemp("config_memory"))
  # A hang's guard, not a speed target: 642-714 s on a slow 2-core machine (2026-11-29, with the accelerator
  # configs), so 900 s would fail on one a third slower.
  result = subprocess.run(
    [sys.executable, str(BENCHMARK), f"--data_root={root}", f"--configs={','.join(PINNED)}"],
    capture_output=True,
    text=True,
    timeout=1800,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
  return {row["config"]: row for row in rows}


def test_every_shipped_config_is_measured(measured):
  assert sorted(set(config_memory.shipped_configs()) - ACCELERATOR_CONFIGS) == sorted(PINNED) == sorted(measured)


@pytest.mark.parametrize("config", sorted(PINNED))
def test_memory_within_its_pin(measured, config):
  train, evaluation, compile_peak = PINNED[config]
  row = measured[config]
  for what, bound, value in (
    ("train step's buffers", SLACK * train, row["train_bytes"]),
    ("evaluation step's buffers", SLACK * evaluation, row["evaluation_bytes"]),
    ("compile's peak", SLACK * compile_peak + PEAK_NOISE, row["compile_peak_bytes"]),
  ):
    assert value <= bound * MiB, f"{config}: {what} {value / MiB:.0f} MiB, more than {bound:.0f} MiB"


def _refusal(result, workdir) -> re.Match:
  """The one line a run too large for this machine ends with; the workdir it would have made is not there."""
  assert result.returncode == 1, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  refusal = re.fullmatch(
    r"wyjax: error: the training step at [\d × ]+ tokens needs ([\d.]+) GiB of memory and this "
    r"machine has ([\d.]+) GiB free: set --config\.batch_size=(\d+) or lower \(now (\d+)\), .*",
    last,
  )
  assert refusal, result.stderr[-3000:]
  needed, free, fits, now = float(refusal[1]), float(refusal[2]), int(refusal[3]), int(refusal[4])
  assert needed > free and 1 <= fits < now
  assert not workdir.exists()  # (its log and empty folders removed: cli.nothing_left_if_refused)
  return refusal


def test_a_finetuning_run_too_large_for_the_machine_is_refused_in_one_line(shared_data, tmp_path):
  """CMRC 2018 at 900 questions a batch (its step of 5 windows of 512 tokens: about 190 GiB) is
  refused before its first step, naming the batch size that would fit."""
  workdir = tmp_path / "run"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.finetune",
      "--config=clue/cmrc2018.py",
      f"--config.data_dir={shared_data / 'clue' / 'cmrc2018'}",
      f"--workdir={workdir}",
      "--config.batch_size=900",
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert "× 5 × 512 tokens" in _refusal(result, workdir)[0]


def test_a_pretraining_run_too_large_for_the_machine_is_refused_in_one_line(tiny_corpus, tmp_path):
  workdir = tmp_path / "run"
  result = subprocess.run(
    pretrain_command(workdir, tiny_corpus, "--config.batch_size=131072"),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert "131072 × 64 tokens" in _refusal(result, workdir)[0]

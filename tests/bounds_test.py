"""Every config value and flag of every command has a range the work can honour, checked before
any work (issue 57, docs/reliability.md "Wave 6"), walked with hypothesis: a drawn value is
refused in one line naming it, or the work it feeds runs within a time and a memory limit.

- config values: drawn for every key of fine-tuning's and pretraining's tables, checked by
  config_values.check and check_data (the bounds, directly), and an accepted one planned: the
  batches, buckets and largest batch a run would draw (where --config.sort_window=1000000000
  took 2.6 GB and minutes);
- flags: in one process per command (their flags cannot share one), every flag drawn and parsed
  as cli.run parses it; an accepted number is in the range the flag declares (every numeric flag
  declares one), and for the two commands that need no model (build-punc, prepare-corpus) runs
  that work on a tiny tree; an accepted text (a path, a name, a choice) is UTF-8;
- real processes: the runaways of the issue, each refused in one line within a time and memory
  limit (--config.eval_batch_size=1000000000 grew to 16.7 GB and on).

CI draws a fixed sample (derandomized); WYJAX_FUZZ=long draws many more.
"""

import concurrent.futures
import contextlib
import functools
import json
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.stops_test import tlc_folder
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.core import config_files
from wyjax.tasks import batching
from wyjax.train import config_values, suite

LONG = os.environ.get("WYJAX_FUZZ") == "long"
PROFILE = settings(
  derandomize=not LONG,
  max_examples=500 if LONG else 12,
  deadline=None,
  database=None,
  phases=[Phase.explicit, Phase.generate],  # a runaway is reported as drawn, not shrunk for minutes
  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
# What a user can type: any integer, any float (NaN and the infinities among them), the edges of
# int32 and of the ranges, other types.
VALUES = st.one_of(
  st.integers(-3, 70),
  st.integers(-(2**70), 2**70),
  st.floats(allow_nan=True, allow_infinity=True),
  st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 10**6, 10**9, 0.0, 0.5, 1.0, 1.5, -0.2, None, True, "", "x"]),
)
EDGES = functools.reduce(
  lambda f, g: lambda test: f(g(test)),
  [example(value=v) for v in (0, -1, 2**31 - 1, 2**31, 10**9, float("nan"), float("inf"), -0.5, 1.0)],
)  # drawn for every key, every run
SECONDS, BYTES = 2.0, 64 << 20  # what planning an accepted value may take
PLANNED = ("batch_size", "eval_batch_size", "sort_window", "length_buckets", "max_length", "seed")  # what _plan reads


def _features(count: int = 100, seed: int = 0) -> list[dict]:
  """TLC-like featurized examples: 12 to 120 tokens."""
  rng = np.random.default_rng(seed)
  return [{"input_ids": np.zeros(n, np.int32), "label": np.int32(0)} for n in rng.integers(12, 121, count)]


FEATURES = _features()
LONGEST = max(f["input_ids"].shape[-1] for f in FEATURES)


def _with(config, key: str, value):
  """config with key set, or None where ml_collections refuses the value's type (as the flag
  --config.<key> is refused when parsed: one line)."""
  *parents, name = key.split(".")
  holder = config
  for parent in parents:
    holder = holder[parent]
  try:
    holder[name] = value
  except (TypeError, ValueError):
    return None
  return config


def _refused_in_one_line(error: ValueError, key: str) -> None:
  message = str(error)
  assert "\n" not in message and f"config.{key} is" in message, message


@contextlib.contextmanager
def _time_limited(seconds: float):
  """TimeoutError once the block has run `seconds` (between Python's bytecodes)."""

  def expired(signum, frame):
    raise TimeoutError(f"ran past {seconds} s")

  previous = signal.signal(signal.SIGALRM, expired)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _memory_limited(extra: int):
  """Allocations past `extra` bytes more than the process holds now fail (MemoryError) while the
  block runs: a runaway plan fails the test, not the machine it runs on."""
  soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
  status = pathlib.Path("/proc/self/status").read_text()
  used = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmData:"))) << 10
  resource.setrlimit(resource.RLIMIT_DATA, (used + extra, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _plan(config) -> None:
  """What a fine-tuning run plans before its first step: the train and evaluation buckets and
  the largest batches (task_model.largest_programs), the steps (task_model.total_steps)."""
  max_length = config.max_length or 128
  buckets = config.length_buckets or None
  lengths = batching.train_lengths(
    FEATURES,
    batch_size=config.batch_size,
    max_length=max_length,
    seed=config.seed,
    sort_window=config.sort_window,
    bucket_count=buckets,
  )
  batching.largest_batch(FEATURES, batch_size=config.batch_size, lengths=lengths, pad_id=0)
  size = config.eval_batch_size
  lengths = batching.eval_lengths(FEATURES, batch_size=size, max_length=max_length, bucket_count=buckets)
  batching.largest_batch(FEATURES, batch_size=size, lengths=lengths, pad_id=0)


@pytest.mark.parametrize(
  "table, key",
  [("fine-tuning", key) for key in sorted(config_values.FINETUNING)]
  + [("pretraining", key) for key in sorted(config_values.PRETRAINING)],
)
@PROFILE
@given(value=VALUES)
@EDGES
def test_every_config_value_is_refused_in_one_line_or_planned_within_limits(table, key, value):
  if table == "pretraining":
    config = _with(config_files.load("pretrain/deberta_tiny"), key, value)
  else:
    config = _with(suite.task_config("wywmt" if key.startswith("decoding.") else "tlc"), key, value)
  if config is None:
    return
  try:
    config_values.check(config, config_values.PRETRAINING if table == "pretraining" else config_values.FINETUNING)
  except ValueError as e:
    _refused_in_one_line(e, key)
    return
  if table == "pretraining" or key not in PLANNED:
    return  # planned elsewhere (wyjax.train.pretraining), or by no planning
  try:
    config_values.check_data(config, train_examples=len(FEATURES), longest=LONGEST, max_length=config.max_length or 128)
  except ValueError as e:
    _refused_in_one_line(e, key)
    return
  tracemalloc.start()
  start = time.perf_counter()
  try:
    with _memory_limited(1 << 30), _time_limited(SECONDS):
      _plan(config)
  finally:
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
  assert time.perf_counter() - start < SECONDS and peak < BYTES, (key, value, time.perf_counter() - start, peak)


# --- every flag of every command, in a process of its own ---------------------------------------

_WALK = r"""
import contextlib, importlib, io, json, math, os, pathlib, sys, tempfile, time
from absl import flags
from hypothesis import example, given, settings, strategies as st
sys.path.insert(0, os.getcwd())
from tests import bounds_test
from wyjax.core import cli
module_name, required, examples = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
module = importlib.import_module(module_name)
FLAGS = flags.FLAGS
own = FLAGS.flags_by_module_dict()[module_name]
numeric = [f for f in own if isinstance(f.parser, (flags.IntegerParser, flags.FloatParser))]
textual = [f for f in own if f not in numeric and not isinstance(f.parser, flags.BooleanParser)]
failures = []

def parse(name, value):
  '''None where the value is accepted, else the lines on stderr.'''
  FLAGS.unparse_flags()
  stderr = io.StringIO()
  try:
    with contextlib.redirect_stderr(stderr):
      cli._parse_flags(["command", *required, f"--{name}={value}"])
  except SystemExit:
    return stderr.getvalue().splitlines()
  return None

for flag in numeric:
  @settings(derandomize=examples < 100, max_examples=examples, deadline=None, database=None)
  @given(value=bounds_test.VALUES)
  def walk(value):
    lines = parse(flag.name, value)
    if lines is not None:
      assert lines[0].startswith(f"wyjax: error: flag") and f"--{flag.name}" in lines[0] and len(lines) <= 2, lines
      return
    parsed = FLAGS[flag.name].value
    bounds = flag.parser.lower_bound, flag.parser.upper_bound
    assert parsed is None or math.isfinite(parsed)
    message = bounds_test.honoured(module_name, flag.name, parsed, bounds)
    assert message is None, message
  try:
    walk()
  except AssertionError as e:
    failures.append(f"--{flag.name}: {e}")

for flag in textual:  # paths, names, choices, lists: refused in one line, and never bytes that are not UTF-8
  @settings(derandomize=examples < 100, max_examples=examples, deadline=None, database=None)
  @given(value=bounds_test.TEXTS)
  @example(value="\udcb9\udcc5")  # 古 in GBK, as os reads its bytes: for every text flag
  def walk_text(value):
    lines = parse(flag.name, value)
    if lines is not None:
      assert lines[0].startswith(f"wyjax: error: flag") and f"--{flag.name}" in lines[0] and len(lines) <= 2, lines
    assert lines is not None or not bounds_test.UNDECODABLE.search(value), f"{value!r} accepted"
  try:
    walk_text()
  except AssertionError as e:
    failures.append(f"--{flag.name}: {e}")
print(json.dumps({"flags": [f.name for f in numeric + textual], "failures": failures}))
"""

# What a user can type for a path, a name or a choice: any text, bytes that are not UTF-8 (as os
# reads them: lone surrogates), the shapes of paths.
TEXTS = st.one_of(
  st.text(st.characters(exclude_categories=()), max_size=12),
  st.sampled_from(["", "-", ".", "..", "a/b/", "gs://b/x", "\udcb9\udcc5", "x\udcff.txt", "tlc"]),
)
UNDECODABLE = re.compile(r"[\ud800-\udfff]")
SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "daizhige_sample"


def honoured(module: str, name: str, value, bounds: tuple) -> str | None:
  """Why `value`, which --name parsed to, is not honoured (None: it is): outside the flag's
  declared range (every flag declares one: the demo's, the benchmark's and prepare-corpus's were
  checked only by the work they fed, after pretraining or naming no flag), or (the builders) its
  tiny job failing or running past its time."""
  low, high = bounds
  if low is None:
    return f"declares no range (its lower bound is None) and {value!r} was accepted"
  if value is not None and not (low <= value and (high is None or value <= high)):
    return f"{value!r} is outside its declared range [{low}, {high}]"
  if module in ("wyjax.tasks.__main__", "wyjax.data.__main__"):
    return _tiny_job(module, name)
  return None


def _tiny_job(module: str, name: str) -> str | None:
  """The command's work with the flags parsed, on a tiny tree, within 20 s and 2 GB more memory:
  a user error it finds (cli.USER_ERRORS) is one line."""
  import importlib  # pylint: disable=import-outside-toplevel
  import tempfile  # pylint: disable=import-outside-toplevel

  from absl import flags  # pylint: disable=import-outside-toplevel

  from wyjax.core import cli  # pylint: disable=import-outside-toplevel

  entry = importlib.import_module(module)
  command = "prepare-corpus" if "data" in module else "build-gjc" if name == "per_collection" else "build-punc"
  with tempfile.TemporaryDirectory() as out:
    flags.FLAGS.out = out
    flags.FLAGS.overwrite = True
    try:
      with _memory_limited(2 << 30), _time_limited(20):
        entry.main(["command", command])
    except TimeoutError as e:  # (an OSError, as a user's error is)
      return f"the tiny job {e}"
    except cli.USER_ERRORS as e:
      if "\n" in str(e):
        return f"an error of several lines: {e}"
  return None


def _commands(tmp_path: pathlib.Path) -> dict[str, list[str]]:
  """module: the flags it needs to parse (the builders': a tiny tree to build from)."""
  texts = tmp_path / "texts"
  texts.mkdir()
  (texts / "a.txt").write_text("子曰：學而時習之，不亦說乎？\n有朋自遠方來，不亦樂乎？\n" * 30, encoding="utf-8")
  return {
    "wyjax.predict": ["--model=m"],
    "wyjax.export": ["--out=o"],
    "wyjax.finetune": [],
    "wyjax.pretrain": ["--config=pretrain/deberta_tiny"],
    "wyjax.translate": ["--init=i"],
    "wyjax.benchmark": ["--data_root=d", "--out=o"],
    "wyjax.demo": [],
    "wyjax.probe": ["--model=m"],
    "wyjax.data.__main__": [f"--source=text:{texts}", "--workers=1"],
    "wyjax.tasks.__main__": [f"--daizhige={SAMPLE}"],
  }


def test_every_flag_of_every_command_is_refused_in_one_line_or_honoured(shared_data, tmp_path):
  del shared_data  # the builders build from its Daizhige sample
  commands = _commands(tmp_path)
  examples = 400 if LONG else 12

  def walk(module, required):
    result = subprocess.run(
      [sys.executable, "-c", _WALK, module, json.dumps(required), str(examples)],
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=600,
      env=pretrain_env(WYJAX_CACHE=str(tmp_path)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    walked = dict(zip(commands, pool.map(walk, commands, commands.values())))
  assert sum(len(w["flags"]) for w in walked.values()) >= 30  # every command's flags were walked
  assert {"workdir", "punc_steps", "poetry_package"} <= set(walked["wyjax.demo"]["flags"]), walked["wyjax.demo"]
  failures = {
    (module, failure.split(":")[0].removeprefix("--")): failure
    for module, w in walked.items()
    for failure in w["failures"]
  }
  assert not failures, failures


# --- the runaways of the issue, as real commands --------------------------------------------------

_MEASURED = (
  "import resource, subprocess, sys\n"
  "code = subprocess.run(sys.argv[1:]).returncode\n"
  "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
  "sys.exit(code)\n"
)


@pytest.fixture(scope="module")
def tlc(tmp_path_factory) -> pathlib.Path:
  """A tiny TLC folder (64 training lines) and a cache its runs share (one TFDS build)."""
  root = tmp_path_factory.mktemp("runaways")
  return tlc_folder(root / "tlc", {"train": 64, "dev": 16, "test": 16})


@pytest.mark.parametrize(
  "override, says",
  [
    ("length_buckets=1000000", "config.length_buckets is 1000000; allowed: an integer ≥ 0 and ≤ 64"),  # planned minutes
    ("sort_window=1000000000", "config.sort_window is 1000000000; allowed: at most an epoch's 2 batches"),  # 2.6 GB
    # 16.7 GB and on: an evaluation batch is now at most the split (16 lines), and the run trains
    # (two short steps: what grew was the evaluation's batch, not the training)
    ("eval_batch_size=1000000000", None),
  ],
  ids=["length_buckets", "sort_window", "eval_batch_size"],
)
def test_a_runaway_setting_is_refused_in_one_line_or_honoured_within_limits(tlc, tmp_path, override, says):
  start = time.monotonic()
  result = subprocess.run(
    [
      sys.executable,
      "-c",
      _MEASURED,
      sys.executable,
      "-m",
      "wyjax.finetune",
      "--config=tlc",
      f"--workdir={tmp_path / 'run'}",
      f"--config.data_dir={tlc}",
      "--config.num_train_steps=2",
      "--config.max_length=32",
      f"--config.{override}",
    ],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    env=pretrain_env(WYJAX_CACHE=str(tlc.parent / "cache")),
  )
  *lines, peak_kb = result.stderr.splitlines()
  errors = [line for line in lines if line.startswith("wyjax: error: ")]
  if says is None:
    assert result.returncode == 0 and not errors, result.stderr[-3000:]
  else:
    assert result.returncode == 1 and len(errors) == 1 and says in errors[0], result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert time.monotonic() - start < 120 and int(peak_kb) < 3 << 20, (time.monotonic() - start, peak_kb)

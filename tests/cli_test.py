"""Every entry point answers a user error with one line, `wyjax: error: …` (and at most a short
hint), and a non-zero exit: bad flags and config keys, missing or wrong paths, bad input files.
The cases run as real commands, two at a time."""

import concurrent.futures
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from tests.conftest import as_from_a_terminal
from wyjax.data import prepare


def _write_inputs(root):
  (root / "a_file").write_text("not a folder")
  (root / "gbk").mkdir()
  (root / "gbk" / "gbk.txt").write_bytes("國家".encode("gbk"))
  (root / "tlc").mkdir()
  (root / "tlc" / "train.tsv").write_text("远古\t先秦\t学而时习之\n中古\t唐\n", encoding="utf-8")
  (root / "broken_config.py").write_text(
    "from wyjax.train.finetuning import base_config\ndef get_config()\n  return base_config('tlc')\n"
  )
  (root / "texts").mkdir()
  (root / "texts" / "a.txt").write_text("學而時習之\n" * 40, encoding="utf-8")
  (root / "gbk_name").mkdir()  # a file named in GBK: os reads the bytes as surrogates
  (root / "gbk_name" / "國家.txt".encode("gbk").decode("utf-8", "surrogateescape")).write_text("學而時習之\n" * 40)
  (root / "nested").mkdir()  # deeper than Python's JSON parser goes: 2,988 lines of RecursionError
  (root / "nested" / "train.json").write_text(
    '{"label": "100", "sentence": "学而"}\n{"label": ' + "[" * 100_000 + "]" * 100_000 + "}\n", encoding="utf-8"
  )
  prepare.prepare_corpus(
    root / "corpus",
    prepare.Options(source=f"text:{root / 'texts'}", sequence_length=16, valid_fraction=0),
    workers=1,
    progress=False,
    log=lambda *_: None,
  )  # a 10-token vocabulary
  (root / "demo" / "hf").mkdir(parents=True)
  (root / "demo" / "hf" / "README.md").write_text("# my notes\n")  # the user's, where the demo exports


def _cases(root):
  """Each command that reaches its workdir has its own: two at once in one would be refused (locks)."""
  a_file, gbk, tlc, missing = root / "a_file", root / "gbk", root / "tlc", root / "missing"
  return {
    # name: (module, arguments, exit code, what the line says[, environment])
    "pretrain: config key": (
      "wyjax.pretrain",
      ["--config=pretrain/deberta_tiny.py", f"--workdir={root / 'p'}", "--config.learnin_rate=1"],
      2,
      "--config.learnin_rate: the config has no field 'learnin_rate'; did you mean \"learning_rate\"",
    ),
    "pretrain: vocabulary size": (
      "wyjax.pretrain",
      [
        "--config=pretrain/deberta_tiny.py",
        "--compile_only=a100",
        f"--config.data_dir={root / 'p3'}",
        "--config.model.vocab_size=60000000",
      ],
      1,
      "--config.model.vocab_size=60000000: a character-level vocabulary holds",
    ),
    "pretrain: corpus path": (
      "wyjax.pretrain",
      ["--config=pretrain/deberta_tiny.py", f"--workdir={root / 'p1'}", f"--config.corpus.source=daizhige:{missing}"],
      1,
      str(missing),
    ),
    "pretrain: GBK corpus": (
      "wyjax.pretrain",
      [
        "--config=pretrain/deberta_tiny.py",
        f"--workdir={root / 'p2'}",
        f"--config.corpus.source=text:{gbk}",
        f"--config.data_dir={root / 'pc'}",  # read by the default workers
        "--prepare_corpus",
      ],
      1,
      f"{gbk / 'gbk.txt'}:1: not valid UTF-8",
    ),
    "pretrain: data_dir with no corpus": (
      "wyjax.pretrain",
      ["--config=pretrain/deberta_tiny.py", f"--workdir={root / 'p3'}", f"--config.data_dir={missing}"],
      1,
      f"--config.data_dir {missing} does not exist; prepare a corpus there",
    ),
    "finetune: no data_dir": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / 'f1'}"],
      1,
      "set --config.data_dir",
    ),
    "finetune: bad file": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / 'f2'}", f"--config.data_dir={tlc}"],
      1,
      f"{tlc / 'train.tsv'}:2: expected 3 tab-separated fields",
    ),
    "finetune: nested JSON": (
      "wyjax.finetune",
      ["--config=clue/tnews.py", f"--workdir={root / 'fn'}", f"--config.data_dir={root / 'nested'}"],
      1,
      f"{root / 'nested' / 'train.json'}:2: JSON nested 100001 levels deep",
    ),
    "finetune: workdir a file": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={a_file}", f"--config.data_dir={tlc}"],
      1,
      str(a_file),
    ),
    "finetune: config value": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / 'f'}", f"--config.data_dir={tlc}", "--config.dtype=float7"],
      1,
      "config.dtype is 'float7'; allowed: one of 'float32', 'bfloat16', 'float16'",
    ),
    "finetune: config file": (
      "wyjax.finetune",
      [f"--config={root / 'broken_config.py'}", f"--workdir={root / 'f'}"],
      2,
      f"{root / 'broken_config.py'}:2: SyntaxError: expected ':'",
    ),
    "pretrain: config value": (
      "wyjax.pretrain",
      ["--config=pretrain/deberta_tiny.py", f"--workdir={root / 'p'}", "--config.eval_every=0"],
      1,
      "config.eval_every is 0; allowed: an integer ≥ 1",
    ),
    "benchmark: config value": (
      "wyjax.benchmark",
      [f"--data_root={root}", f"--out={root / 'b'}", "--batch_size=0"],
      2,
      "flag --batch_size=0: 0 is not an integer in the range [1, 2147483647]",
    ),
    "finetune: no workdir": ("wyjax.finetune", ["--config=tlc.py"], 2, "--workdir is required"),
    "finetune: unknown flag": ("wyjax.finetune", ["--config=tlc.py", "--bogus"], 2, "'bogus'"),
    "finetune: unknown config": (
      "wyjax.finetune",
      ["--config=nope.py", f"--workdir={root / 'f'}"],
      2,
      "no config 'nope.py'",
    ),
    "benchmark: data_root": (
      "wyjax.benchmark",
      [f"--data_root={missing}", f"--out={root / 'b'}"],
      1,
      f"--data_root {missing}: no such folder",
    ),
    "demo: workdir a file": ("wyjax.demo", [f"--workdir={a_file}"], 1, str(a_file)),
    "export: checkpoint": (
      "wyjax.export",
      [f"--checkpoint={missing}", f"--out={root / 'e'}"],
      1,
      f"{missing} is neither a transformers folder",
    ),
    "translate: init": ("wyjax.translate", [f"--init={missing}"], 1, f"{missing} is neither a transformers folder"),
    "predict: model": ("wyjax.predict", [f"--model={missing}"], 1, str(missing)),
    "data: GBK file": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{gbk}", f"--out={root / 'c'}", "--workers=1"],
      1,
      f"{gbk / 'gbk.txt'}:1: not valid UTF-8",
    ),
    "data: out a file": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{gbk}", f"--out={a_file}"],
      1,
      f"--out {a_file} is a file, not a folder",
    ),
    "data: source": (
      "wyjax.data",
      ["prepare-corpus", "--source=nope", f"--out={root / 'c2'}"],
      1,
      "unknown corpus source 'nope'",
    ),
    "data: valid_fraction": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{gbk}", f"--out={root / 'c3'}", "--valid_fraction=2"],
      2,
      "flag --valid_fraction=2: 2.0 is not a number in the range [0, 1]",
    ),
    "tasks: daizhige": ("wyjax.tasks", ["build-punc", f"--daizhige={missing}", f"--out={root / 't'}"], 1, str(missing)),
    "tasks: no command": ("wyjax.tasks", [], 2, "expected one command"),
    # Issue 57's.
    "finetune: config argument": (
      "wyjax.finetune",
      ["--config=tlc.py:nosuch", f"--workdir={root / 'f'}"],
      2,
      "flag --config=tlc.py:nosuch: TypeError: get_config() takes 0 positional arguments but 1 was given",
    ),  # ml_collections' traceback in the message
    "data: GBK-named file": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{root / 'gbk_name'}", f"--out={root / 'c4'}", "--workers=1"],
      1,
      r"\x87\xf8\xbc\xd2.txt: a file name that is not UTF-8",
    ),  # "surrogates not allowed"
    "data: max_vocab 5": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{root / 'texts'}", f"--out={root / 'c5'}", "--workers=1", "--max_vocab=5"],
      1,
      "a vocabulary of 0 characters (max_vocab 5, min_count 1) leaves 100.00% of the text's 200 characters [UNK]",
    ),  # a corpus 99.75% [UNK] without a word
    "tasks: ascii stdout": (
      "wyjax.tasks",
      ["build-punc", f"--daizhige={root}", f"--out={root / 't1'}"],
      2,
      "standard output's encoding is ascii, which cannot hold Chinese; set PYTHONIOENCODING=utf-8",
      {"PYTHONIOENCODING": "ascii"},
    ),  # files written, then exit 1
    "translate: NaN": (
      "wyjax.translate",
      [f"--init={missing}", "--length_penalty=nan"],
      2,
      "flag --length_penalty=nan: not a finite number",
    ),
    "finetune: logical_axis_rules": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / 'f4'}", f"--config.data_dir={tlc}", "--config.logical_axis_rules=3"],
      1,
      "config.logical_axis_rules is (3,); allowed: pairs",
    ),  # 48 lines
    "finetune: num_train_steps 2**40": (
      "wyjax.finetune",
      [
        "--config=tlc.py",
        f"--workdir={root / 'f5'}",
        f"--config.data_dir={tlc}",
        "--config.num_train_steps=1099511627776",
      ],
      1,
      "config.num_train_steps is 1099511627776; allowed: an integer ≥ 0 and ≤ 2,147,483,647",
    ),  # a 68-line OverflowError
    "tasks: max_length 0": (
      "wyjax.tasks",
      ["build-punc", f"--daizhige={root}", f"--out={root / 't2'}", "--max_length=0"],
      2,
      "flag --max_length=0: 0 is not a positive",
    ),
    "tasks: dev_fraction 1.5": (
      "wyjax.tasks",
      ["build-punc", f"--daizhige={root}", f"--out={root / 't3'}", "--dev_fraction=1.5"],
      2,
      "flag --dev_fraction=1.5: 1.5 is not a number in the range [0, 1]",
    ),
    "tasks: dev_fraction -0.2": (
      "wyjax.tasks",
      ["build-punc", f"--daizhige={root}", f"--out={root / 't4'}", "--dev_fraction=-0.2"],
      2,
      "flag --dev_fraction=-0.2: -0.2 is not a number in the range [0, 1]",
    ),
    "tasks: collections typo": (
      "wyjax.tasks",
      ["build-punc", f"--daizhige={root}", f"--out={root / 't5'}", "--collections=史臧"],
      2,
      "flag --collections=['史臧']: expected Daizhige's collections, among 佛藏,",
    ),
    # Issue 63's: bounds before work, naming what the user typed.
    "finetune: a model key": (
      "wyjax.finetune",
      [
        "--config=tlc.py",
        f"--workdir={root / 'f6'}",
        f"--config.data_dir={tlc}",
        "--config.batch_size=8",
        "--config.model.hidden_size=7",
        "--config.eval_every=2",
      ],
      2,
      "error: --config.model.hidden_size: the config has no field 'model'",
    ),  # all 5 named
    "finetune: a workdir named in GBK": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / GBK_NAME}", f"--config.data_dir={tlc}"],
      2,
      rf"flag --workdir={root}/\xb9\xc5: not UTF-8",
    ),  # failed at a checkpoint
    "pretrain: a vocabulary size the corpus decides": (
      "wyjax.pretrain",
      [
        "--config=pretrain/deberta_tiny.py",
        f"--workdir={root / 'p6'}",
        f"--config.data_dir={root / 'corpus'}",
        "--config.model.vocab_size=3",
      ],
      1,
      f"--config.model.vocab_size=3, but the corpus {root / 'corpus'} decides "
      "it: 10; leave --config.model.vocab_size out, or give 10",
    ),  # replaced
    "pretrain: --prepare_corpus into a task folder": (
      "wyjax.pretrain",
      [
        "--config=pretrain/deberta_tiny.py",
        f"--workdir={root / 'p7'}",
        f"--config.data_dir={tlc}",
        f"--config.corpus.source=text:{root / 'texts'}",
        "--prepare_corpus",
      ],
      1,
      f"--config.data_dir {tlc} holds files that are not this corpus; choose an empty or new folder, or let "
      "`python -m wyjax.data prepare-corpus --overwrite` replace",
    ),  # advised --out, --overwrite
    "data: --out that is the source": (
      "wyjax.data",
      ["prepare-corpus", f"--source=text:{root / 'texts'}", f"--out={root / 'texts'}", "--overwrite"],
      1,
      f"--out {root / 'texts'} is --source {root / 'texts'}, which prepare-corpus reads",
    ),
    "demo: the user's files where it exports": (
      "wyjax.demo",
      [f"--workdir={root / 'demo'}"],
      1,
      f"{root / 'demo' / 'hf'} holds README.md, which no earlier export of this command wrote there",
    ),  # replaced without a word
    "demo: --workdir inside --poetry_package": (
      "wyjax.demo",
      [f"--workdir={root / 'texts' / 'demo'}", f"--poetry_package={root / 'texts'}"],
      1,
      f"--workdir {root / 'texts' / 'demo'} lies inside --poetry_package {root / 'texts'}, which the demo reads",
    ),
    "translate: --max_ratio=0 --max_extra=0": (
      "wyjax.translate",
      [f"--init={missing}", "--max_ratio=0", "--max_extra=0"],
      2,
      "--max_ratio 0 and --max_extra 0 leave a translation no token",
    ),
    "translate: --max_length=2**40": (
      "wyjax.translate",
      [f"--init={missing}", "--max_length=1099511627776"],
      2,
      "flag --max_length=1099511627776: 1099511627776 is not an integer in the range [5, 1048576]",
    ),
    **(
      {}
      if GPU
      else {
        "finetune: JAX_PLATFORMS=cuda": (
          "wyjax.finetune",
          ["--config=tlc.py", f"--workdir={root / 'f3'}", f"--config.data_dir={tlc}"],
          1,
          "JAX_PLATFORMS=cuda: JAX cannot start 'cuda' on this machine (RuntimeError: ",
          {"JAX_PLATFORMS": "cuda"},
        )
      }
    ),
  }


GPU = any(map(os.path.exists, ("/dev/nvidia0", "/dev/nvidiactl")))
GBK_NAME = "\udcb9\udcc5"  # 古 in GBK, as os reads undecodable bytes


def _run(module, arguments, env=None):
  return subprocess.run(
    [sys.executable, "-m", module, *arguments],
    capture_output=True,
    text=True,
    timeout=300,
    env={**os.environ, **(env or {})},
  )


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  root = tmp_path_factory.mktemp("cli")
  _write_inputs(root)
  cases = _cases(root)
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    runs = {name: pool.submit(_run, module, arguments, *env) for name, (module, arguments, _, _, *env) in cases.items()}
    return {name: (cases[name], run.result()) for name, run in runs.items()}


@pytest.mark.parametrize("name", list(_cases(pathlib.Path("."))))
def test_a_user_error_is_one_line(results, name):
  (_, _, code, says, *_), result = results[name]
  lines = result.stderr.splitlines()
  errors = [i for i, line in enumerate(lines) if line.startswith("wyjax: error: ")]
  assert result.returncode == code, result.stderr
  assert "Traceback" not in result.stderr, result.stderr
  assert len(errors) == 1 and says in lines[errors[0]], result.stderr
  assert len(lines) - errors[0] <= 2, result.stderr  # the line, and at most a hint after it


def test_verbosity_shows_the_traceback(tmp_path):
  result = _run("wyjax.translate", [f"--init={tmp_path / 'missing'}", "--verbosity=0"])
  assert result.returncode != 0 and "Traceback" in result.stderr and "FileNotFoundError" in result.stderr


_REFAULTS = """
import ctypes, resource, threading
from wyjax.core import cli
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
def step():  # XLA's way: a worker thread takes 200 MB of scratch, writes it, frees it
  scratch = libc.malloc(200 << 20)
  ctypes.memset(scratch, 1, 200 << 20)
  libc.free(ctypes.c_void_p(scratch))
def main(argv):
  faults = []
  for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    worker = threading.Thread(target=step); worker.start(); worker.join()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
  print(faults[-1])
cli.run(main)
"""


_SIGTERM = """
import os, signal, sys
from wyjax.core import cli
def main(argv):
  try:
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause() if len(argv) == 1 else None  # (a command with SIGTERM ignored goes on)
  except cli.Terminated:  # a cleanup still running when a second SIGTERM comes
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
  print("went on")
cli.run(main)
"""


def test_sigterm_is_one_line_143_a_second_ends_at_once_and_one_ignored_stays_so():
  """SIGTERM outside a training loop ends a command as Ctrl-C does (predict_test shows its output
  removed); a second SIGTERM ends one whose cleanup is stuck, at once; a command started with
  SIGTERM ignored (as `nohup`-like launchers may) keeps ignoring it."""
  once = subprocess.run(
    [sys.executable, "-c", _SIGTERM.replace("except cli.Terminated", "except OSError")],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert once.returncode == 143 and once.stderr.splitlines()[-1] == "wyjax: stopped by SIGTERM", once.stderr
  twice = subprocess.run([sys.executable, "-c", _SIGTERM], capture_output=True, text=True, timeout=120)
  assert twice.returncode == -signal.SIGTERM, twice.stderr
  # Ignored by the shell before exec, as a launcher would (no preexec_fn: forking a process whose
  # JAX is running warns of deadlocks, an error under pytest.ini).
  ignored = subprocess.run(
    ["bash", "-c", 'trap "" TERM && exec "$@"', "bash", sys.executable, "-c", _SIGTERM, "go on"],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert ignored.returncode == 0 and ignored.stdout == "went on\n", ignored.stderr


_SWALLOWED = """
import os, signal, time
from wyjax.core import cli
def main(argv):
  try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
  except KeyboardInterrupt:  # as an import, or JAX's plugin discovery (a bare except:), swallowed it
    pass
  print("went on")
cli.run(main)
"""


def test_a_stop_a_library_swallowed_still_ends_the_command_with_its_code():
  """The command's own code may never see the KeyboardInterrupt a Ctrl-C raised: it still ends
  with 130 and the line (it ended with exit 0). Started as from a terminal: from a pytest worker
  that holds SIGINT ignored, the kill would do nothing."""
  result = subprocess.run(
    as_from_a_terminal([sys.executable, "-c", _SWALLOWED]), capture_output=True, text=True, timeout=120
  )
  assert result.returncode == 130 and result.stdout == "went on\n", result.stderr
  assert result.stderr.splitlines() == ["wyjax: stopped by SIGINT (Ctrl-C)"]


def test_entry_points_keep_freed_memory_for_the_next_step_on_the_cpu_only():
  """An entry point on the CPU keeps a freed 200 MB buffer for the next step (without
  keep_freed_memory it faults in all its 51,200 pages again); one bound for a TPU (or a GPU), whose
  compiler threads one arena would serialise, leaves glibc's defaults. (A platform no plugin
  starts here, cuda, is refused: one_line_test.)"""

  def faults(platforms):
    env = {**os.environ, "JAX_PLATFORMS": platforms}
    return int(
      subprocess.run([sys.executable, "-c", _REFAULTS], check=True, capture_output=True, text=True, env=env).stdout
    )

  assert faults("cpu") < 1_000
  assert faults("tpu") > 40_000
  assert faults("tpu,cpu") > 40_000


_FROZEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print(gc.get_freeze_count()))  # registered first, so it runs after cli's own
from wyjax.core import cli
sys.argv = ["command"]
cli.run(lambda argv: None)
"""


def test_objects_alive_at_exit_are_frozen_out_of_the_last_collections():
  """A command's end skips the interpreter's last garbage collections over what it imported."""
  frozen = subprocess.run(
    [sys.executable, "-c", _FROZEN_AT_EXIT], check=True, capture_output=True, text=True, timeout=120
  )
  assert int(frozen.stdout) > 10_000, frozen.stdout  # 375 without the freeze at exit


_LOGS = """
import ctypes, logging, sys
from wyjax.core import cli, logs
def main(argv):
  logs.to_file(sys.argv[1], "command")
  for n in range(3):
    logging.getLogger("orbax").warning("a library's record %d", n)
  ctypes.CDLL(None).dprintf(2, b"W0000 a C++ library's own line\\n")  # as XLA logs its warnings
  raise OSError(28, "No space left on device", "ckpt/1")
cli.run(main)
"""


def test_a_log_that_cannot_be_written_warns_once_and_cpp_lines_go_to_the_log(tmp_path):
  """A full disk at fine-tuning's first checkpoint printed six "--- Logging error ---" tracebacks
  (522 lines): the library log is on that disk. Its records are now dropped after one warning
  (the log here is /dev/full: every write fails with ENOSPC). C++ libraries' own lines (XLA's
  rematerialization and slow-compile warnings) go to the log file, not the terminal."""
  full = tmp_path / "full"
  full.mkdir()
  (full / "command.log").symlink_to("/dev/full")
  result = subprocess.run([sys.executable, "-c", _LOGS, str(full)], capture_output=True, text=True, timeout=120)
  assert result.returncode == 1, result.stderr
  assert result.stderr.splitlines() == [
    f"warning: cannot write the log {full / 'command.log'} (No space left on device); library records are dropped",
    f"library logs go to {full / 'command.log'} (--verbosity=0 shows them here)",
    "wyjax: error: ckpt/1: No space left on device",
  ], result.stderr
  writable = tmp_path / "writable"
  result = subprocess.run([sys.executable, "-c", _LOGS, str(writable)], capture_output=True, text=True, timeout=120)
  assert "C++" not in result.stderr and len(result.stderr.splitlines()) == 2, result.stderr
  log = (writable / "command.log").read_text()
  assert "W0000 a C++ library's own line" in log and "a library's record 2" in log

"""Wave 5 (issue 50): predict, translate and export on tiny models, run as a user runs them
(JAX_PLATFORMS unset, a fresh cache, no Hub token): parts of a model that do not belong
together, flags out of range, a beam that cannot fit, outputs in folders that cannot take them,
a cache that cannot take the log, --verify without PyTorch, and a Hub that cannot be reached,
each one line naming the user's path with what to do, and no accelerator library's noise on
a machine without one (docs/reliability.md, "Wave 5")."""

import concurrent.futures
import glob
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

from tests import checkpoint_files
from tests.hf import parity_test, tiny_models
from tests.hf.fake_hub import FakeHub
from tests.hf.task_export_test import _fine_tuned
from tests.train.conftest import REPO_ROOT
from wyjax.core import config_files, guards
from wyjax.data import tokenizer as tk
from wyjax.hf import export_folder, task_models
from wyjax.tasks import wyweb_files
from wyjax.train import pretraining

SHORT_VOCAB = "".join(t + "\n" for t in [*tk.SPECIAL_TOKENS, *"子曰學而時習之不亦說乎"])  # 16 tokens
ON_A_TPU_MACHINE = bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def _read_only_folder(root: pathlib.Path) -> pathlib.Path:
  """A folder nothing can be created in: one without write permission, or (root ignores
  permissions) sysfs's."""
  if os.geteuid() == 0:
    return pathlib.Path("/sys/kernel")
  folder = root / "read_only"
  folder.mkdir()
  folder.chmod(0o555)
  return folder


def _closed_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _models(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """A TLC seed folder (a fine-tuning run's layout), its transformers export, an MLM folder
  and a WYWMT export (translate's), some with a damaged copy, and a PUNC export."""
  model = _fine_tuned("tlc", "deberta")
  (root / "run").mkdir()
  (root / "run" / "run_config.json").write_text(json.dumps({"task": "tlc", "max_length": 48}))
  seed = root / "run" / "seed_0"
  checkpoint_files.save_params(seed, 1, model.params, model.model_config, model.tokenizer)
  bad_seed = root / "bad_run" / "seed_0"
  shutil.copytree(root / "run", root / "bad_run")
  (bad_seed / "tokenizer" / "vocab.txt").write_text(SHORT_VOCAB, encoding="utf-8")
  tlc = task_models.export(task_models.load(seed), root / "tlc")
  bad_tlc = shutil.copytree(tlc, root / "bad_tlc")
  config = json.loads((tlc / "config.json").read_text())
  (bad_tlc / "config.json").write_text(json.dumps({**config, "vocab_size": 6000}))
  mlm = export_folder.export(parity_test._converted(tiny_models.deberta("bozhou", legacy=False)), root / "mlm")
  wywmt = task_models.export(_fine_tuned("wywmt", "deberta"), root / "wywmt")  # translate's: a generating head
  bad_wywmt = shutil.copytree(wywmt, root / "bad_wywmt")
  (bad_wywmt / "vocab.txt").write_text(SHORT_VOCAB, encoding="utf-8")
  task_models.export(_fine_tuned("punc", "deberta"), root / "punc")
  (root / "braces.txt").write_text("{注}學而時習之\n", encoding="utf-8")  # an editor's note in braces
  (root / "no_torch" / "torch").mkdir(parents=True)  # an environment without PyTorch
  (root / "no_torch" / "torch" / "__init__.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
  (root / "in.txt").write_text("子曰學而時習之\n有朋自遠方來\n", encoding="utf-8")
  for data in ("tlc_data", "corpus", "tasks"):  # what a run reads (refused before it is read)
    (root / data).mkdir()
    (root / data / "train.tsv").write_text("x\n")
  return {"seed": seed, "bad_seed": bad_seed, "tlc": tlc, "bad_tlc": bad_tlc, "mlm": mlm, "wywmt": wywmt}


def _cases(root: pathlib.Path, hub_url: str, read_only: pathlib.Path) -> dict:
  """name: (module, arguments, environment, exit code, what its one line says: None for a success)."""
  m = {k: root / k for k in ("tlc", "bad_tlc", "mlm", "wywmt", "bad_wywmt", "punc")} | {
    "seed": root / "run" / "seed_0",
    "bad_seed": root / "bad_run" / "seed_0",
  }
  predict = lambda model, *flags: [f"--model={model}", f"--input={root / 'in.txt'}", *flags]
  export = lambda out, *flags: [f"--checkpoint={m['mlm']}", f"--out={root / out}", *flags]
  token = {"HF_TOKEN": "hf_fake_token"}
  return {
    "translate: --beam=0": (
      "wyjax.translate",
      [f"--init={m['mlm']}", "--beam=0"],
      {},
      2,
      "flag --beam=0: 0 is not a positive integer",
    ),
    "translate: --beam=-2": (
      "wyjax.translate",
      [f"--init={m['mlm']}", "--beam=-2"],
      {},
      2,
      "flag --beam=-2: -2 is not a positive integer",
    ),
    "translate: --batch_size=0": (
      "wyjax.translate",
      [f"--init={m['mlm']}", "--batch_size=0"],
      {},
      2,
      "flag --batch_size=0: 0 is not a positive integer",
    ),
    "translate: --max_length=0": (
      "wyjax.translate",
      [f"--init={m['mlm']}", "--max_length=0"],
      {},
      2,
      "flag --max_length=0: 0 is not an integer in the range [5, 1048576]",
    ),
    "predict: --beam=0": (
      "wyjax.predict",
      predict(m["tlc"], "--beam=0"),
      {},
      2,
      "flag --beam=0: 0 is not a positive integer",
    ),
    "translate: a beam of terabytes": (
      "wyjax.translate",
      [f"--init={m['wywmt']}", "--beam=100000000"],
      {},
      1,
      "--beam 100000000 × --batch_size 32 needs about 840.0 TB to decode "
      "(3,200,000,000 rows of 512 tokens), more than the ",
    ),
    "translate: vocab.txt of another model": (
      "wyjax.translate",
      [f"--init={m['bad_wywmt']}"],
      {},
      1,
      f"{m['bad_wywmt']}/vocab.txt has 16 tokens but {m['bad_wywmt']}/config.json says vocab_size 23",
    ),
    # Issue 63's: a model checked for its job before its weights are read; no output inside an input.
    "translate: a pretrained encoder": (
      "wyjax.translate",
      [f"--init={m['mlm']}"],
      {},
      1,
      f"--init {m['mlm']} is no fine-tuned task model",
    ),  # gibberish, exit 0
    "translate: another task's model": (
      "wyjax.translate",
      [f"--init={m['tlc']}"],
      {},
      1,
      f"--init {m['tlc']} was fine-tuned for tlc, whose model generates no text",
    ),
    "predict: a pretrained encoder": (
      "wyjax.predict",
      predict(m["mlm"]),
      {},
      1,
      f"--model {m['mlm']} is no fine-tuned task model",
    ),
    "predict: --output inside the model": (
      "wyjax.predict",
      predict(m["tlc"], f"--output={m['tlc']}/vocab.txt", "--overwrite"),
      {},
      1,
      f"--output {m['tlc']}/vocab.txt lies inside --model {m['tlc']}, which predict reads",
    ),  # the model no longer loaded
    "predict: --output a run's file": (
      "wyjax.predict",
      predict(m["seed"], f"--output={m['seed']}/model.json", "--overwrite"),
      {},
      1,
      f"--output {m['seed']}/model.json lies inside --model {m['seed']}",
    ),
    "export: --out inside the checkpoint": (
      "wyjax.export",
      [f"--checkpoint={m['mlm']}", f"--out={m['mlm']}/hf"],
      {},
      1,
      f"--out {m['mlm']}/hf lies inside --checkpoint {m['mlm']}, which export reads",
    ),
    "predict: a PUNC line that opens with a brace": (
      "wyjax.predict",
      [f"--model={m['punc']}", f"--input={root / 'braces.txt'}"],
      {},
      0,
      None,
    ),  # "invalid JSON"
    "predict: a run's vocab.txt of another model": (
      "wyjax.predict",
      predict(m["bad_seed"]),
      {},
      1,
      f"{m['bad_seed']}/tokenizer/vocab.txt has 16 tokens but {m['bad_seed']}/model.json says vocab_size 23",
    ),
    "predict: an export's config.json of another model": (
      "wyjax.predict",
      predict(m["bad_tlc"]),
      {},
      1,
      f"{m['bad_tlc']}/config.json says vocab_size 6000, "
      f"hidden_size 32 but {m['bad_tlc']}/model.safetensors "
      "holds word_embeddings of 23 × 32",
    ),
    "predict: --output in a missing folder": (
      "wyjax.predict",
      predict(m["tlc"], f"--output={root}/no/out.txt"),
      {},
      1,
      f"{root}/no/out.txt: No such file or directory",
    ),
    "predict: --output in a read-only folder": (
      "wyjax.predict",
      predict(m["tlc"], f"--output={read_only}/o.txt"),
      {},
      1,
      f"{read_only}/o.txt: Permission denied",
    ),
    "export: --verify without PyTorch": (
      "wyjax.export",
      export("verified", "--verify"),
      {"PYTHONPATH": f"{root / 'no_torch'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
      1,
      "--verify needs PyTorch and transformers (No module named 'torch'); install them",
    ),
    "export: --out that is the folder read": (
      "wyjax.export",
      [f"--checkpoint={m['mlm']}", f"--out={m['mlm']}/", "--overwrite"],
      {},
      1,
      f"--out {m['mlm']}/ is --checkpoint {m['mlm']}, which export reads; "
      "writing there would change what it reads: choose another --out",
    ),
    # A run's folder that is what it reads: refused before its log goes there.
    "finetune: --workdir its data folder": (
      "wyjax.finetune",
      ["--config=tlc.py", f"--workdir={root / 'tlc_data'}", f"--config.data_dir={root / 'tlc_data'}"],
      {},
      1,
      f"--workdir {root / 'tlc_data'} is --config.data_dir {root / 'tlc_data'}, which fine-tuning reads",
    ),
    "finetune --compile_only: --workdir its data folder": (
      "wyjax.finetune",
      [
        "--config=tlc.py",
        "--compile_only=local",
        f"--workdir={root / 'tlc_data'}",
        f"--config.data_dir={root / 'tlc_data'}",
      ],
      {},
      1,
      f"--workdir {root / 'tlc_data'} is --config.data_dir {root / 'tlc_data'}, which fine-tuning reads",
    ),
    "pretrain: --workdir its corpus": (
      "wyjax.pretrain",
      ["--config=pretrain/deberta_tiny.py", f"--workdir={root / 'corpus'}", f"--config.data_dir={root / 'corpus'}"],
      {},
      1,
      f"--workdir {root / 'corpus'} is --config.data_dir {root / 'corpus'}, which pretraining reads",
    ),
    "pretrain --compile_only: --workdir its corpus": (
      "wyjax.pretrain",
      [
        "--config=pretrain/deberta_tiny.py",
        "--compile_only=local",
        f"--workdir={root / 'corpus'}",
        f"--config.data_dir={root / 'corpus'}",
      ],
      {},
      1,
      f"--workdir {root / 'corpus'} is --config.data_dir {root / 'corpus'}, which pretraining reads",
    ),
    "benchmark: --out inside --data_root": (
      "wyjax.benchmark",
      [f"--data_root={root / 'tasks'}", f"--out={root / 'tasks' / 'out'}"],
      {},
      1,
      f"--out {root / 'tasks' / 'out'} lies inside --data_root {root / 'tasks'}, which the benchmark reads",
    ),
    # Each its own --out: the cases run at once, and a folder has one writer (wyjax.core.locks).
    "export: push with no token": (
      "wyjax.export",
      export("pushed", "--push_to_hub=org/tiny"),
      {},
      1,
      "--push_to_hub needs a Hugging Face token with write access: set HF_TOKEN",
    ),
    "export: push with no network": (
      "wyjax.export",
      export("pushed_offline", "--push_to_hub=org/tiny"),
      {**token, "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"},
      1,
      "org/tiny: the Hub at http://127.0.0.1:",
    ),
    "export: push to an endpoint that is no Hub": (
      "wyjax.export",
      export("pushed_nowhere", "--push_to_hub=org/tiny"),
      {**token, "HF_ENDPOINT": f"{hub_url}/nothing"},
      1,
      f"org/tiny: the Hub at {hub_url}/nothing failed (Client error '404 Not Found'",
    ),
    # They work: a legal file name of 244 bytes, and a cache that cannot take the log.
    "predict: a 244-byte file name": (
      "wyjax.predict",
      predict(m["tlc"], f"--output={root / ('p' * 240)}.txt"),
      {},
      0,
      None,
    ),
    "predict: a read-only cache": (
      "wyjax.predict",
      predict(m["seed"]),
      {"WYJAX_CACHE": str(read_only / "cache")},
      0,
      None,
    ),
  }


def _run(root, module, arguments, environment):
  """The command as a user runs it: JAX_PLATFORMS unset, the test's own cache and Hub login."""
  env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "TPU_", "HF_"))}
  env.update(WYJAX_CACHE=str(root / "cache"), HF_HOME=str(root / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1")
  return subprocess.run(
    [sys.executable, "-m", module, *arguments],
    env={**env, **environment},
    cwd=REPO_ROOT,
    stdin=subprocess.DEVNULL,
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  root = tmp_path_factory.mktemp("wave5")
  _models(root)
  with FakeHub() as hub, concurrent.futures.ThreadPoolExecutor(2) as pool:
    cases = _cases(root, hub.url, _read_only_folder(root))
    runs = {
      name: pool.submit(_run, root, module, arguments, env) for name, (module, arguments, env, _, _) in cases.items()
    }
    return root, hub, {name: (cases[name], run.result()) for name, run in runs.items()}


@pytest.mark.parametrize("name", list(_cases(pathlib.Path("."), "http://hub", pathlib.Path("."))))
def test_each_case_is_one_line_naming_the_users_path(results, name):
  root, _, all_results = results
  (_, _, _, code, says), result = all_results[name]
  assert result.returncode == code, result.stderr[-3000:]
  assert "Traceback" not in result.stderr and ".partial" not in result.stderr, result.stderr[-3000:]
  if says is None:
    return
  lines = result.stderr.splitlines()
  errors = [i for i, line in enumerate(lines) if line.startswith("wyjax: error: ")]
  assert len(errors) == 1 and says in lines[errors[0]], result.stderr[-3000:]
  assert len(lines) - errors[0] <= 2, result.stderr  # the line, and at most a hint after it


def test_what_a_failed_command_leaves(results):
  """Nothing of an export whose verification or push could not run (the export it wrote before
  blocked the rerun), no temporary file beside an output that could not be written, and no log in
  what a refused run reads (finetune.log was left in the data folder it refused to write in)."""
  root, hub, _ = results
  assert [[p.name for p in (root / data).iterdir()] for data in ("tlc_data", "corpus", "tasks")] == [["train.tsv"]] * 3
  assert not any((root / name).exists() for name in ("verified", "pushed", "pushed_offline", "pushed_nowhere"))
  assert sorted(p.name for p in (root / "tlc").iterdir()) == sorted(export_folder.FILES)  # nothing written in a model
  assert sorted(p.name for p in (root / "mlm").iterdir()) == sorted(export_folder.FILES)
  task_models.load(root / "tlc")
  assert not hub.repos
  assert not any(p.name.endswith(".partial") for p in root.iterdir())


def test_a_legal_name_and_a_read_only_cache_work(results):
  root, _, all_results = results
  _, braces = all_results["predict: a PUNC line that opens with a brace"]
  assert "".join(c for c in braces.stdout.strip() if c not in wyweb_files.PUNC_MARKS) == "{注}學而時習之"
  assert (root / f"{'p' * 240}.txt").read_text(encoding="utf-8").count("\n") == 2
  _, read_only_cache = all_results["predict: a read-only cache"]
  assert len(read_only_cache.stdout.splitlines()) == 2, read_only_cache.stderr[-3000:]
  warnings = [line for line in read_only_cache.stderr.splitlines() if line.startswith("warning: ")]
  assert len(warnings) == 1 and "cannot write the log at" in warnings[0], read_only_cache.stderr[-3000:]


@pytest.mark.skipif(ON_A_TPU_MACHINE, reason="a TPU's machine: libtpu is right to start")
def test_no_accelerator_library_speaks_where_no_accelerator_is(results):
  """libtpu printed its warnings and `E0000 … TPU_WORKER_HOSTNAMES` at the start of every
  command on a machine without a TPU (JAX_PLATFORMS unset, as after README's install)."""
  _, _, all_results = results
  for name, (_, result) in all_results.items():
    assert "TPU" not in result.stderr and "E0000" not in result.stderr, (name, result.stderr[-3000:])


def test_positions_past_the_models_are_an_error_before_training():
  """Sequences longer than the model's absolute positions gathered NaN embeddings: a short run
  exited 0 with a NaN loss, a long one stopped on non-finite steps, blamed on the learning rate."""
  config = config_files.load("pretrain/deberta_tiny.py")
  config.model.position_biased_input, config.model.max_position_embeddings = True, 32
  with pytest.raises(
    guards.RunError, match="the corpus's sequences are 64 tokens but config.model.max_position_embeddings is 32"
  ):
    pretraining.build(config, tk.placeholder(100), 64)

"""A wyjax workdir read as a model (issue 84): a damaged step, and a fine-tuning workdir, are one line naming what to
read instead."""

import json
import re
import subprocess
import sys

import pytest

import wyjax.hf
from tests import checkpoint_files
from tests.hf import parity_test, tiny_models
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.core import checkpoints
from wyjax.hf import export_folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  model = parity_test._converted(tiny_models.deberta("bozhou", legacy=False))
  return export_folder.export(model, tmp_path_factory.mktemp("hf") / "model")


def _two_steps(exported, workdir):
  """A wyjax workdir of exported's model with checkpoints 3 and 7: step 7's folder and its largest array file."""
  model = wyjax.hf.load(exported)
  for step in (3, 7):
    checkpoint_files.save_params(workdir, step, model.params, model.config, model.tokenizer)
  step_dir = workdir / "checkpoints" / "7"
  return step_dir, max((step_dir / "state").glob("ocdbt.process_0/d/*"), key=lambda p: p.stat().st_size)


def _flipped(file):
  data = bytearray(file.read_bytes())
  data[len(data) // 2] ^= 0xFF
  file.write_bytes(bytes(data))


ORBAX_DAMAGE = {  # (damage to step 7's largest array file or its metadata, what is wrong; sealed and not)
  # Unsealed, a flipped byte is told by nothing but, at times, the compression or a NaN it makes: not tested.
  "a flipped byte": (_flipped, r"{file} does not match its SHA-256 \(corrupted\)", None),
  "an array file cut short": (
    lambda file: file.write_bytes(file.read_bytes()[: file.stat().st_size // 2]),
    r"{file} has \d+ bytes, \d+ were written",
    r"it cannot be read \(ValueError: OUT_OF_RANGE: Error reading .+\), and it has no checksums\.json to tell "
    "which file",
  ),
  "a missing array file": (
    lambda file: file.unlink(),
    r"{file} is missing",
    r"it cannot be read \(ValueError: FAILED_PRECONDITION: .+\), and it has no checksums\.json to tell which file",
  ),
  "a missing _METADATA": (
    lambda file: (file.parents[2] / "_METADATA").unlink(),
    r"state/_METADATA is missing",
    r"it cannot be read \(FileNotFoundError: state/_METADATA is missing\), and it has no checksums\.json to tell "
    "which file",
  ),
}


# A failed read leaves tensorstore's callbacks of the reads still running to a closed event loop (the commands
# send what they raise, unraisable, to the log file).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
  "kind,sealed",
  [(kind, sealed) for kind, (_, _, unsealed) in ORBAX_DAMAGE.items() for sealed in (True, False) if sealed or unsealed],
)
def test_a_damaged_orbax_step_is_one_line_naming_it_and_an_earlier_step(exported, kind, sealed, tmp_path):
  """Issue 84: a wyjax workdir's latest step damaged, read as pretraining's and fine-tuning's --config.init,
  probe --model and export --checkpoint read it (loading.read). With its checksums.json: the file and what is
  wrong. Without (a step whose seal was never written): orbax's error (was a KeyError or AttributeError traceback
  for a missing state/ or _METADATA), cut to one line. Each names the step folder and an earlier step's folder,
  which these commands accept."""
  workdir = tmp_path / "workdir"
  step_dir, file = _two_steps(exported, workdir)
  damage, with_checksums, without = ORBAX_DAMAGE[kind]
  if not sealed:
    (step_dir / checkpoints.CHECKSUMS).unlink()
  damage(file)
  with pytest.raises(ValueError) as error:
    wyjax.hf.loading.read(workdir)
  what = with_checksums.format(file=re.escape(str(file.relative_to(step_dir)))) if sealed else without
  assert re.fullmatch(
    re.escape(f"{step_dir} is corrupt: ")
    + what
    + re.escape(
      f"; name an earlier step's folder, {workdir}/checkpoints/3, or copy {workdir} again from where it was made"
    ),
    str(error.value),
  ), str(error.value)
  wyjax.hf.loading.read(workdir / "checkpoints" / "3")  # the folder the message names is read


def test_a_damaged_orbax_step_ends_export_in_one_line_and_a_missing_step_is_named(exported, tmp_path):
  """The command, as a user runs it: an unsealed step without _METADATA was an AttributeError traceback. A step
  folder that does not exist is named with the steps there are."""
  workdir = tmp_path / "workdir"
  step_dir, _ = _two_steps(exported, workdir)
  (step_dir / checkpoints.CHECKSUMS).unlink()
  (step_dir / "state" / "_METADATA").unlink()
  result = subprocess.run(
    [sys.executable, "-m", "wyjax.export", f"--checkpoint={workdir}", f"--out={tmp_path / 'out'}"],
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  assert result.stderr.splitlines()[-1] == (
    f"wyjax: error: {step_dir} is corrupt: it cannot be read (FileNotFoundError: state/_METADATA is missing), and "
    f"it has no checksums.json to tell which file; name an earlier step's folder, {workdir}/checkpoints/3, or copy "
    f"{workdir} again from where it was made"
  ), result.stderr[-3000:]
  assert not (tmp_path / "out").exists()
  with pytest.raises(FileNotFoundError, match=re.escape(f"checkpoints/5: no such checkpoint; {workdir}/checkpoints")):
    wyjax.hf.loading.read(workdir / "checkpoints" / "5")


def test_a_fine_tuning_workdir_given_as_a_model_names_its_seed_runs_and_its_export(exported, tmp_path):
  """Issue 84: a fine-tuning workdir given as --config.init (pretraining, fine-tuning) or probe --model was "neither
  a transformers folder (config.json) nor a wyjax workdir (model.json)". It holds one model per seed: the message
  says so and names its best seed's folder and its export, which are accepted."""
  model = wyjax.hf.load(exported)
  workdir = tmp_path / "tlc"
  checkpoint_files.save_params(workdir / "seed_1", 4, model.params, model.config, model.tokenizer)
  (workdir / "results.json").write_text(json.dumps({"task": "tlc", "best_run": str(workdir / "seed_1")}))
  says = re.escape(
    f"{workdir} is a fine-tuning workdir, which holds one model per seed: name one of its seed runs, "
    f"{workdir / 'seed_1'} (its best), or its export (python -m wyjax.export --checkpoint={workdir} --out=DIR, "
    "then that folder)"
  )
  for reads in (wyjax.hf.loading.architecture, wyjax.hf.loading.read, wyjax.hf.loading.files):
    with pytest.raises(FileNotFoundError, match=f"^{says}$"):
      reads(workdir)
  assert wyjax.hf.loading.architecture(workdir / "seed_1") == model.config

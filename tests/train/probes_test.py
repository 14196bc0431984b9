"""Linear probes (wyjax/train/probes.py): in a pretraining run at step 0 and each evaluation,
stopped between batches and resumed without a record repeated or lost; from `python -m wyjax.probe` on
every kind of model it names, scoring a checkpoint as its run did."""

import concurrent.futures
import functools
import json
import re
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from tests.stops_test import tlc_folder
from tests.train import pretrain_config
from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.core import guards, partitioning, run_metrics
from wyjax.data.tokenizer import Tokenizer
from wyjax.hf import export_folder, loading
from wyjax.models import EncoderConfig, encoder_class
from wyjax.tasks.builders import punc
from wyjax.train import pretraining, probes

STEPS, EXAMPLES = 4, 40  # evaluations at steps 2 and 4; 32 training examples fitted, 8 held out


def _punc_folder(shared_data, folder):
  """PUNC lines of 10 to 62 characters from the Daizhige sample's 史记 (train 60, dev 20)."""
  shiji = shared_data / "daizhige_sample" / "史藏" / "正史" / "史记.txt"
  paragraphs = shiji.read_text(encoding="utf-8").split()
  lines = [
    f"{text}\t{tags}"
    for text, tags in map(punc.label_paragraph, paragraphs)
    if 10 <= len(text) <= 62 and set(tags) != {"O"}
  ]
  folder.mkdir()
  for split, chosen in (("train", lines[:60]), ("dev", lines[60:80])):
    (folder / f"{split}.tsv").write_text("".join(line + "\n" for line in chosen), encoding="utf-8")
  return folder


@pytest.fixture(scope="module")
def task_folders(shared_data, tmp_path_factory):
  root = tmp_path_factory.mktemp("probe_tasks")
  return {"tlc": tlc_folder(root / "tlc", {"train": 60, "dev": 24}), "punc": _punc_folder(shared_data, root / "punc")}


def _records(workdir) -> list[dict]:
  return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def probed_run(tiny_corpus, task_folders, tmp_path_factory):
  """The tiny pretraining probing TLC and PUNC, stopped twice by SIGTERM in its probes and
  rerun: (workdir, the two stops, the records after each stop)."""
  workdir = tmp_path_factory.mktemp("probed") / "run"
  config = pretrain_config.get_config()
  config.data_dir, config.num_train_steps, config.eval_every = str(tiny_corpus), STEPS, 2
  config.probes = ",".join(f"{task}:{folder}" for task, folder in task_folders.items())
  config.probe_examples = EXAMPLES
  stops, records = [], []
  fit_and_score = probes.fit_and_score
  for stop_at_fit in (1, 3):  # TLC's fit at step 0 (before any checkpoint); at step 2's evaluation
    fits = []

    def fit_then_stop(probe, features, fits=fits, stop_at_fit=stop_at_fit):
      fits.append(probe.task.name)
      if len(fits) == stop_at_fit:
        signal.raise_signal(signal.SIGTERM)  # taken between the batches that follow
      return fit_and_score(probe, features)

    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(probes, "fit_and_score", fit_then_stop)
      with pytest.raises(guards.Interrupted) as stopped:
        pretraining.train_and_evaluate(config, workdir)
    stops.append((stopped.value, fits))
    records.append(_records(workdir))
  # The rerun's step clock sees every probe fit take 1,000 s more than it did: no step is timed with them.
  fitted = []
  clock = lambda: time.perf_counter() + 1000 * len(fitted)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(probes, "fit_and_score", lambda probe, features: fitted.append(1) or fit_and_score(probe, features))
    patch.setattr(run_metrics, "StepClock", functools.partial(run_metrics.StepClock, clock=clock))
    pretraining.train_and_evaluate(config, workdir)
  return workdir, stops, records


def test_probes_run_at_step_0_and_each_evaluation_and_a_stop_between_batches_resumes_once(probed_run):
  workdir, ((first, first_fits), (second, second_fits)), (after_first, after_second) = probed_run
  # Stopped inside step 0's probes: no step trained, no checkpoint, nothing but the compile time written.
  assert (first.step, first_fits) == (0, ["tlc"])
  assert [set(r) for r in after_first] == [{"step", "compile_seconds"}]
  # Stopped after TLC's probe at step 2, before PUNC's first batch: checkpointed, no evaluation of step 2.
  assert (second.step, second_fits) == (2, ["tlc", "punc", "tlc"])
  assert not any("valid_loss" in r or "probe_seconds" in r for r in after_second if r["step"] == 2)
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()) == ["2", "4"]
  # Resumed: step 0's probes once (the fresh rerun after the first stop redid them), step 2's evaluation redone.
  records = _records(workdir)
  keyed = [(r["step"], key) for r in records for key in r if key != "step"]
  assert len(keyed) == len(set(keyed)), "a step's metric recorded twice"
  evaluated = {r["step"]: r for r in records if "probe_seconds" in r}
  assert sorted(evaluated) == [0, 2, STEPS]
  for record in evaluated.values():
    assert {
      "valid_loss",
      "probe/tlc/accuracy",
      "probe/tlc/period_accuracy",
      "probe/punc/f1",
      "probe/punc/precision",
    } <= set(record)
    assert all(0 <= v <= 1 for k, v in record.items() if k.startswith("probe/"))
  # The rerun's evaluations (step 2's, redone, before step 3) lasted 2,000 s more by its step clock.
  assert [r["step_seconds"] < 1000 for r in records if "step_seconds" in r] == [True] * STEPS


def _exported(tokenizer, folder, **architecture):
  """A randomly initialised encoder of `architecture` with `tokenizer`, exported as a transformers folder."""
  config = EncoderConfig(
    **architecture,
    vocab_size=len(tokenizer),
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=4,
    intermediate_size=64,
  )
  return export_folder.export(loading.Model(config, loading.init_params(config, jax.random.key(1)), tokenizer), folder)


def test_the_probe_command_scores_every_kind_of_model_and_a_checkpoint_as_its_run_did(
  probed_run, task_folders, tmp_path
):
  workdir, _, _ = probed_run
  run = loading.load(workdir)
  tokenizer = Tokenizer.load(workdir / "tokenizer")
  models = {
    "workdir": workdir,
    "step 2": workdir / "checkpoints" / "2",
    "deberta-v2": export_folder.export(run, tmp_path / "deberta"),  # the workdir's weights as transformers'
    "bert": _exported(tokenizer, tmp_path / "bert", model_type="bert", max_position_embeddings=128),
    "roberta": _exported(
      tokenizer,
      tmp_path / "roberta",
      model_type="roberta",
      pad_token_id=tokenizer.pad_id,
      max_position_embeddings=130,
      type_vocab_size=1,
    ),
  }
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.probe",
      *(f"--model={m}" for m in models.values()),
      "--config=tlc.py",
      f"--config.data_dir={task_folders['tlc']}",
      f"--probes=punc:{task_folders['punc']}",
      f"--probe_examples={EXAMPLES}",
    ],
    cwd=REPO_ROOT,
    env=pretrain_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  lines = {
    (model, task): scores for model, task, scores in re.findall(r"^(\S+)  (\w+): (.+)$", result.stdout, re.MULTILINE)
  }
  assert set(lines) == {(str(m), t) for m in models.values() for t in ("tlc", "punc")}, result.stdout
  # The workdir (its latest step) scores what its run recorded at that step, to the digits printed.
  final = next(r for r in _records(workdir) if r["step"] == STEPS and "probe_seconds" in r)
  for task in ("tlc", "punc"):
    printed = dict(pair.split(" ") for pair in lines[str(workdir), task].split(", "))
    assert printed == {k.split("/")[2]: f"{v:.4f}" for k, v in final.items() if k.startswith(f"probe/{task}/")}
    # The same weights as a transformers folder score the same.
    assert lines[str(models["deberta-v2"]), task] == lines[str(workdir), task]
  # Several models: a table of each task's main metric, one row per model.
  table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
  assert table[0] == "| Model | TLC accuracy | PUNC f1 |"
  assert [row.split(" | ")[0].removeprefix("| ") for row in table[1:]] == [str(m) for m in models.values()]
  # Its table redirected into a model it reads (`> M/vocab.txt` once replaced an input) is refused first.
  with open(models["deberta-v2"] / "probe.txt", "w") as redirected:
    into_model = subprocess.run(
      [
        sys.executable,
        "-m",
        "wyjax.probe",
        f"--model={workdir}",
        f"--model={models['deberta-v2']}",
        "--config=tlc.py",
        f"--config.data_dir={task_folders['tlc']}",
      ],
      cwd=REPO_ROOT,
      env=pretrain_env(),
      stdout=redirected,
      stderr=subprocess.PIPE,
      text=True,
      timeout=300,
    )
  assert into_model.returncode == 1 and into_model.stderr.splitlines()[-1] == (
    f"wyjax: error: standard output ({models['deberta-v2']}/probe.txt) lies inside --model {models['deberta-v2']}, "
    "which probe reads: redirect it elsewhere"
  ), into_model.stderr[-3000:]


@pytest.mark.parametrize(
  "spec, error",
  [
    ("tlc", "--config.probes: 'tlc' is not TASK:FOLDER"),
    ("tcl:{folder}", "--config.probes: unknown task 'tcl'; probes: "),
    (
      "ccpm:{folder}",
      "--config.probes: ccpm has no linear probe: its head (binary_choice) predicts neither one label "
      "per example nor one per token; probes: ",
    ),
    ("tlc:{folder},tlc:{folder}", "--config.probes: tlc named twice"),
    ("tlc:{folder}/absent", "--config.probes: {folder}/absent: no such task folder (for tlc)"),
  ],
)
def test_a_probe_that_cannot_run_is_one_error_before_any_work(tmp_path, spec, error):
  config = pretrain_config.get_config()
  config.data_dir = str(tmp_path / "corpus")  # never prepared: the probes are checked first
  config.probes = spec.format(folder=tmp_path)
  with pytest.raises((ValueError, FileNotFoundError), match=re.escape(error.format(folder=tmp_path))) as refused:
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert "\n" not in str(refused.value) and not (tmp_path / "run").exists()


def test_packing_places_every_example_once_in_rows_it_fits():
  lengths = np.random.default_rng(0).integers(1, 33, 500).tolist()
  rows = probes.pack(lengths, 32)
  assert sorted(i for row in rows for i in row) == list(range(500))
  filled = sorted(sum(lengths[i] for i in row) for row in rows)
  assert filled[-1] <= 32
  assert filled[0] + filled[1] > 32  # no two rows could be one: a row is opened only for an example no other fits


@pytest.mark.parametrize(
  "architecture",
  [
    dict(model_type="bert", type_vocab_size=2),
    dict(model_type="roberta", pad_token_id=1, type_vocab_size=1, max_position_embeddings=40),  # positions from 2
    dict(
      model_type="deberta-v2",
      relative_attention=True,
      position_buckets=4,
      pos_att_type="p2c|c2p",
      share_att_key=True,
      position_biased_input=True,
      type_vocab_size=2,
    ),
  ],
)
def test_packed_examples_encode_as_each_alone(architecture):
  """Each example's features from packed rows against the encoder's on that example alone (its
  row of an ordinary padded batch): packing must change nothing but the float rounding."""
  config = EncoderConfig(
    **{
      "vocab_size": 50,
      "hidden_size": 16,
      "num_hidden_layers": 2,
      "num_attention_heads": 2,
      "intermediate_size": 32,
      "max_position_embeddings": 38,
      **architecture,
    }
  )
  rng = np.random.default_rng(1)
  lengths = rng.integers(2, 39 - config.first_position, 12)
  features = [
    {
      "input_ids": rng.integers(config.pad_token_id + 1, 50, n),
      "token_type_ids": (np.arange(n) >= n // 2).astype(np.int64) * (config.type_vocab_size - 1),
    }
    for n in lengths
  ]
  mesh = partitioning.make_mesh({"data": -1})
  encoder = probes.Encoder.of_params(
    config, mesh, partitioning.rules(partitioning.LOGICAL_AXIS_RULES), config.pad_token_id
  )
  model = encoder_class(config)(config)
  params = model.init(jax.random.key(0), np.zeros((1, 8), np.int32))["params"]
  batches = probes.packed_batches(features, rows=encoder.rows, row_length=lengths.max(), pad_id=config.pad_token_id)
  assert (
    sum(len(placements) for placements, _ in batches) == 12
    and len(batches[0][0]) > len(batches[0][1]["input_ids"]) // 2
  )
  width = lengths.max()
  alone = np.full((12, width), config.pad_token_id)
  types = np.zeros((12, width), np.int64)
  for i, f in enumerate(features):
    alone[i, : lengths[i]], types[i, : lengths[i]] = f["input_ids"], f["token_type_ids"]
  expected = model.apply({"params": params}, alone, (alone != config.pad_token_id).astype(np.int32), types)
  for placements, batch in batches:
    packed = np.asarray(encoder.features(params, batch))
    for i, row, start in placements:
      np.testing.assert_allclose(packed[row, start : start + lengths[i]], expected[i, : lengths[i]], atol=2e-5, rtol=0)


@pytest.mark.parametrize("balance", probes.BALANCES)
def test_ridge_solves_the_weighted_regularised_least_squares(balance):
  """Each strength's weights and bias against a direct least-squares solve: the rows and a
  column of ones (the bias, unpenalized) scaled by √(their weight), stacked with √λ·I on the
  weights alone: another route to the same minimiser."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(200, 6)) * rng.uniform(0.5, 3, 6) + rng.normal(size=6)
  y = rng.choice(3, 200, p=[0.7, 0.2, 0.1])
  row_weights = np.array([np.mean(y == label) for label in y]) ** -balance
  root = np.sqrt(row_weights)[:, None]
  centred = (x - np.average(x, 0, row_weights)) * root
  scale = np.linalg.eigvalsh(centred.T @ centred).mean()  # the strengths' unit
  for strength, (weights, bias) in zip(probes.STRENGTHS, probes.ridge(probes.class_moments(x, y, 3), balance)):
    penalty = np.hstack([np.sqrt(strength * scale) * np.eye(6), np.zeros((6, 1))])
    rows = np.vstack([np.hstack([x * root, root]), penalty])
    solved = np.linalg.lstsq(rows, np.vstack([np.eye(3)[y] * root, np.zeros((6, 3))]), rcond=None)[0]
    np.testing.assert_allclose(weights, solved[:6], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(bias, solved[6], rtol=1e-7, atol=1e-9)


def test_the_probe_command_refuses_a_task_named_twice_and_a_task_without_a_probe_naming_the_flags_typed(
  task_folders, tmp_path
):
  """`--config=tlc.py --config.data_dir=A --probes=tlc:B` printed one tlc line, scored on B (A's result
  dropped); `--config=ccpm.py` blamed --config.task, a key not typed. Both are one line naming what was typed."""
  other = tlc_folder(tmp_path / "other_tlc", {"train": 8, "dev": 4})
  commands = {
    "twice": ["--config=tlc.py", f"--config.data_dir={task_folders['tlc']}", f"--probes=tlc:{other}"],
    "no probe": ["--config=ccpm.py", f"--config.data_dir={task_folders['tlc']}"],
  }
  run = lambda arguments: subprocess.run(
    [sys.executable, "-m", "wyjax.probe", f"--model={tmp_path / 'model'}", *arguments],
    cwd=REPO_ROOT,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache")),
    capture_output=True,
    text=True,
    timeout=300,
  )
  error = lambda result: next(line for line in result.stderr.splitlines() if line.startswith("wyjax: error:"))
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = dict(zip(commands, pool.map(run, commands.values())))
  twice = results["twice"]
  assert twice.returncode == 2 and error(twice) == (
    f"wyjax: error: --config.data_dir={task_folders['tlc']} and --probes' tlc:{other} both probe tlc: name it once"
  ), twice.stderr[-3000:]
  no_probe = results["no probe"]
  assert no_probe.returncode == 1 and error(no_probe).startswith(
    "wyjax: error: --config: ccpm has no linear probe: its head (binary_choice) predicts neither one label"
  ), no_probe.stderr[-3000:]

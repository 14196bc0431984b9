"""Fine-tuning end to end on real WYWEB files: learning beats the majority class, early stopping
and best-checkpoint restore, pretrained encoders grafted into every head."""

import collections
import functools
import json
import re
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from tests import checkpoint_files
from tests.train.conftest import REPO_ROOT, pretrain_env, tiny_checkpoint
from wyjax.core import checkpoints, guards, run_config, run_metrics, storage
from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.hf import loading
from wyjax.models import EncoderConfig, unstack_layers
from wyjax.tasks import datasets, wyweb_files
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, suite, task_model


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
  monkeypatch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))


def _slice_tsv(source, out, rows: dict[str, slice]):
  """A task folder whose splits are line ranges of one real TSV file (kept byte for byte)."""
  out.mkdir(parents=True, exist_ok=True)
  lines = source.read_bytes().split(b"\n")
  for split, rng in rows.items():
    (out / f"{split}{source.suffix}").write_bytes(b"\n".join(lines[rng]))
  return out


def _slice_json(source, out, rows: dict[str, slice]):
  """The same for a JSON-array task, written as JSON Lines (a variant the loaders accept)."""
  out.mkdir(parents=True, exist_ok=True)
  records = json.loads(source.read_text(encoding="utf-8"))
  for split, rng in rows.items():
    (out / f"{split}.jsonl").write_text(
      "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records[rng]), encoding="utf-8"
    )
  return out


def test_tiny_model_beats_the_majority_class_on_real_tlc(shared_data, tmp_path):
  workdir = tmp_path / "tlc"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.finetune",
      "--config=tlc.py",
      f"--workdir={workdir}",  # a packaged config's name
      f"--config.data_dir={shared_data / 'wyweb' / 'tlc'}",
      "--config.num_train_steps=200",
      "--config.eval_every=100",
      "--config.learning_rate=1e-3",
      "--config.max_length=64",
    ],
    # Without the suite's CPU_XLA_FLAGS: LLVM's optimised code runs its 200 steps 2.4× as fast as the
    # unoptimised, more than its slower compile costs.
    cwd=tmp_path,
    env=pretrain_env(WYJAX_CACHE=str(tmp_path / "cache"), XLA_FLAGS=""),
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "FRESH, RANDOMLY INITIALISED" in result.stderr  # no --config.init: said loudly
  results = json.loads((workdir / "results.json").read_text())
  majority = results["majority_baseline"]
  # The shared README's majority baselines on this dev split: 0.148 (dynasty), 0.424 (period).
  assert majority["accuracy"] == pytest.approx(0.148, abs=5e-4)
  assert results["dev"]["accuracy"] >= majority["accuracy"] + 0.10, results["dev"]
  assert results["dev"]["period_accuracy"] >= majority["period_accuracy"] + 0.10, results["dev"]
  # Dev predictions in the TLC format, one per dev line, in file order.
  predictions = wyweb_files.read_tlc(workdir / "seed_0" / "dev_predictions.tsv")
  gold = wyweb_files.read_split("tlc", shared_data / "wyweb" / "tlc", "dev")
  assert [p.text for p in predictions] == [g.text for g in gold]
  assert np.mean([p.dynasty == g.dynasty for p, g in zip(predictions, gold)]) == results["dev"]["accuracy"]


# max_length 64 (a third of the lines lose their tail): three length buckets to compile, not six.
# One epoch of the 2,400 lines at batch 32: the first evaluation is the last step.
TRAINED = dict(num_train_steps=75, eval_every=75, learning_rate=1e-3, max_length=64)


@pytest.fixture(scope="module")
def trained(shared_data, tmp_path_factory):
  """75 steps on 2,400 real TLC lines (dev: the next 160, test: 64): (data_dir, workdir, results,
  the programs the run built: jax's fun_name of each, compiled or loaded from the persistent cache)."""
  root = tmp_path_factory.mktemp("trained")
  data_dir = _slice_tsv(
    shared_data / "wyweb" / "tlc" / "train.tsv",
    root / "data",
    {"train": slice(0, 2400), "dev": slice(2400, 2560), "test": slice(2560, 2624)},
  )
  programs = []

  def built(event, seconds, fun_name="", **_):
    if event == "/jax/core/compile/backend_compile_duration":  # jax's event for each executable it builds
      programs.append(fun_name)

  jax.monitoring.register_event_duration_secs_listener(built)
  try:
    with pytest.MonkeyPatch.context() as patch:
      patch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))
      results = finetuning.finetune(suite.task_config("tlc", data_dir=str(data_dir), **TRAINED), root / "run")
  finally:
    jax.monitoring.unregister_event_duration_listener(built)
  return data_dir, root / "run", results, programs


def test_a_run_builds_a_program_per_padded_length_and_a_few_more(trained):
  """What a fine-tuning run compiles (on a GPU each compiles and autotunes, seconds to a minute):
  a train step per padded length its batches take and a predict step per evaluation length (at
  most `buckets(64)`'s three each, on the CPU), the init of the params not grafted, the fresh
  state around the params, the seed's key on the mesh, and one conversion optax.tree_map_params makes. Nothing per
  step (the dropout key is folded in inside the step), nothing per parameter (jnp.asarray compiled
  one program per parameter shape in loading.Model; the fresh state took two), and no eager
  jax.random.key (three programs each)."""
  counts = collections.Counter(trained[3])
  assert 1 <= counts.pop("jit(train_step)") <= 3 and 1 <= counts.pop("jit(predict_step)") <= 3, trained[3]
  assert counts.pop("jit(_fresh_params)") == 1 and counts.pop("jit(fresh_state)") == 1, trained[3]
  # The seed's key: once per process (a test before this one in the same worker may have built it).
  assert counts.pop("jit(key)", 0) <= 1 and counts.pop("jit(convert_element_type)", 1) == 1, trained[3]  # (optax's)
  assert not counts, trained[3]


def test_the_step_loop_moves_nothing_implicitly(trained, tmp_path, monkeypatch):
  """The loop runs each step under jax.transfer_guard("disallow"): the old per-step
  jax.random.fold_in(rng, step), a host integer sent to the device at every step, now stops the run."""
  data_dir, _, _, _ = trained
  take_step = task_model.TaskModel.train_step
  monkeypatch.setattr(
    task_model.TaskModel,
    "train_step",
    lambda self, state, batch, rng: take_step(self, state, batch, jax.random.fold_in(rng, 1)),
  )
  with pytest.raises(jax.errors.JaxRuntimeError, match="Disallowed host-to-device transfer"):
    finetuning.finetune(
      suite.task_config("tlc", data_dir=str(data_dir), **{**TRAINED, "num_train_steps": 2}), tmp_path / "run"
    )


def test_early_stopping_restores_the_best_dev_checkpoint(trained, tmp_path, monkeypatch):
  data_dir, workdir, trained_results, _ = trained
  assert trained_results["dev"]["accuracy"] > trained_results["majority_baseline"]["accuracy"] + 0.05
  # Continue from that run (same head) with a learning rate far too large: the parameters are
  # thrown about, so the first evaluation (step 1, where the schedule's rate is still 0) is the
  # best and every later one worse. The run must stop after `patience` evaluations and restore
  # step 1's parameters. (A negative rate, which climbed the loss, is refused: config_values.)
  config = suite.task_config(
    "tlc",
    data_dir=str(data_dir),
    init=str(workdir / "seed_0"),
    num_train_steps=30,
    eval_every=1,
    patience=3,
    log_every=1,
    learning_rate=0.5,
    warmup_fraction=0.0,
    batch_size=16,
    seeds=2,
    max_length=64,
  )
  evaluated, evaluate = [], task_model.TaskModel.evaluate

  def counted(self, params, examples, *args, **kwargs):  # the real evaluation; its split's size noted
    evaluated.append(len(examples))
    return evaluate(self, params, examples, *args, **kwargs)

  monkeypatch.setattr(task_model.TaskModel, "evaluate", counted)
  clock = lambda: time.perf_counter() + 1000 * len(evaluated)  # each evaluation takes 1,000 s more by the step clock
  monkeypatch.setattr(run_metrics, "StepClock", functools.partial(run_metrics.StepClock, clock=clock))
  results = finetuning.finetune(config, tmp_path / "run")
  # Per seed, dev at steps 1-4 and test once: step 1's dev scores, kept, are not computed again.
  assert evaluated == [160] * 4 + [64] + [160] * 4 + [64]
  for run in results["runs"]:
    records = [
      json.loads(line) for line in (tmp_path / "run" / f"seed_{run['seed']}" / "metrics.jsonl").read_text().splitlines()
    ]
    evaluations = [(r["step"], r["dev_accuracy"]) for r in records if "dev_accuracy" in r]
    assert evaluations[0] == (1, trained_results["dev"]["accuracy"])  # the init, grafted head included
    assert all(accuracy < evaluations[0][1] for _, accuracy in evaluations[1:])
    assert run["stopped_early"] and [s for s, _ in evaluations] == [1, 2, 3, 4]
    assert [r["step_seconds"] < 1000 for r in records if "step_seconds" in r] == [True] * 4  # timed without them
    assert run["best_step"] == 1 and run["dev"]["accuracy"] == evaluations[0][1]  # restored for test
    saved = sorted(p.name for p in (tmp_path / "run" / f"seed_{run['seed']}" / "checkpoints").iterdir())
    assert saved == ["1"]  # only the best checkpoint is kept
  dev = [r["dev"]["accuracy"] for r in results["runs"]]
  assert results["dev_mean"] == pytest.approx(np.mean(dev)) and results["dev_std"] == pytest.approx(np.std(dev))
  best_run = max(results["runs"], key=lambda r: r["dev"]["accuracy"])
  assert results["best_seed"] == best_run["seed"] and results["test"] == best_run["test"]
  submission = wyweb_files.read_tlc(results["submission"])
  assert [s.text for s in submission] == [e.text for e in wyweb_files.read_split("tlc", data_dir, "test")]


def _records(workdir) -> list[dict]:
  return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def test_sigterm_stops_a_seed_and_the_rerun_resumes_it_exactly(trained, tmp_path):
  data_dir, straight, straight_results, _ = trained
  workdir = tmp_path / "run"
  command = [
    sys.executable,
    "-m",
    "wyjax.finetune",
    "--config=tlc",
    f"--workdir={workdir}",
    f"--config.data_dir={data_dir}",
    *(f"--config.{k}={v}" for k, v in TRAINED.items()),
  ]
  env = pretrain_env()  # the cache `trained` filled: its TFDS build and linear baseline
  process = subprocess.Popen(
    [*command, "--config.log_every=10"],
    cwd=tmp_path,
    env=env,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  metrics = workdir / "seed_0" / "metrics.jsonl"
  deadline = time.time() + 300
  while not (metrics.exists() and metrics.read_text()):
    assert process.poll() is None and time.time() < deadline, process.stderr.read()[-3000:]
    time.sleep(0.05)
  process.send_signal(signal.SIGTERM)
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
  (stopped_at,) = [int(p.name) for p in (workdir / "seed_0" / "resume").iterdir()]
  assert 10 <= stopped_at < 75 and not (workdir / "results.json").exists()  # stopped before the first evaluation

  resumed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)  # log_every 50 again
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  results = json.loads((workdir / "results.json").read_text())
  assert (results["dev"], results["test"]) == (straight_results["dev"], straight_results["test"])
  assert not (workdir / "seed_0" / "resume").exists() and (workdir / "seed_0" / "run.json").exists()
  keyed = [(r["step"], k) for r in _records(workdir / "seed_0") for k in r if k != "step"]
  assert len(keyed) == len(set(keyed))  # no step recorded twice
  ours = {(r["step"], k): v for r in _records(workdir / "seed_0") for k, v in r.items() if "seconds" not in k}
  theirs = {(r["step"], k): v for r in _records(straight / "seed_0") for k, v in r.items() if "seconds" not in k}
  assert {key: ours[key] for key in theirs} == theirs  # every loss and dev score of the straight run


def test_a_full_disk_stops_fine_tuning_with_one_line(trained, tmp_path):
  """A full disk is simulated by a file-size limit (`ulimit -f`, RLIMIT_FSIZE): a write beyond it
  fails with EFBIG as one on a full disk fails with ENOSPC (Python ignores SIGXFSZ), at the same
  write every time: the first resume checkpoint (its optimizer state is over 1 MB). Orbax's writer
  threads, tensorstore's callbacks into the event loop orbax had closed, then the error, once
  printed 700-1,100 lines with 66-128 tracebacks."""
  data_dir, _, _, _ = trained
  workdir = tmp_path / "run"
  overrides = {**TRAINED, "num_train_steps": 4, "eval_every": 2}
  command = [
    "bash",
    "-c",
    'ulimit -f 1000 && exec "$@"',
    "bash",
    sys.executable,
    "-m",
    "wyjax.finetune",
    "--config=tlc",
    f"--workdir={workdir}",
    f"--config.data_dir={data_dir}",
    *(f"--config.{k}={v}" for k, v in overrides.items()),
  ]
  result = subprocess.run(command, cwd=REPO_ROOT, env=pretrain_env(), capture_output=True, text=True)
  lines = result.stderr.splitlines()
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
  assert lines[-1].startswith(f"wyjax: error: saving checkpoint [2] in {workdir / 'seed_0' / 'resume'} failed ")
  assert "File too large" in lines[-1] and "tensorstore_spec" not in lines[-1]
  assert not [line for line in lines[:-1] if line.startswith(("error", "wyjax: error"))] and len(lines) < 10, lines
  assert "File too large" in (workdir / "finetune.log").read_text()  # the writers' errors: in the log
  assert not list(workdir.rglob("*.orbax-checkpoint-tmp*"))  # and no partial checkpoint


def test_rerun_keeps_finished_seeds_and_refuses_a_changed_config(trained):
  data_dir, workdir, results, _ = trained
  seed_files = {p: p.stat().st_mtime_ns for p in (workdir / "seed_0").rglob("*") if p.is_file()}
  again = finetuning.finetune(suite.task_config("tlc", data_dir=str(data_dir), **TRAINED), workdir)
  assert again == results
  assert {p: p.stat().st_mtime_ns for p in (workdir / "seed_0").rglob("*") if p.is_file()} == seed_files
  with pytest.raises(run_config.ConfigChanged, match="learning_rate: 0.001 -> 0.002"):
    finetuning.finetune(suite.task_config("tlc", data_dir=str(data_dir), **{**TRAINED, "learning_rate": 2e-3}), workdir)
  assert {p: p.stat().st_mtime_ns for p in (workdir / "seed_0").rglob("*") if p.is_file()} == seed_files


def test_a_damaged_run_json_is_an_error_naming_it(trained, tmp_path):
  """A finished seed's run.json cut short (a full disk at the seed's end left it so; it is now
  written whole): the rerun's error names the file and line, not json's bare "Expecting value"."""
  data_dir, workdir, _, _ = trained
  copy = shutil.copytree(workdir, tmp_path / "run")
  (copy / "seed_0" / "run.json").write_text("")
  with pytest.raises(storage.FormatError, match=re.escape(f"{copy / 'seed_0' / 'run.json'}:1: invalid JSON")):
    finetuning.finetune(suite.task_config("tlc", data_dir=str(data_dir), **TRAINED), copy)


def test_nonfinite_fine_tuning_stops_with_an_error(trained, tmp_path):
  data_dir, _, _, _ = trained
  config = suite.task_config(
    "tlc",
    data_dir=str(data_dir),
    num_train_steps=40,
    eval_every=40,
    learning_rate=1e30,
    warmup_fraction=0.0,
    max_nonfinite_steps=3,
    log_every=1,
  )
  with pytest.raises(guards.NonFiniteError, match="not finite 3 times in a row"):
    finetuning.finetune(config, tmp_path / "run")
  skipped = [r["step"] for r in _records(tmp_path / "run" / "seed_0") if r.get("nonfinite_steps")]
  assert len(skipped) == 3 and skipped == list(range(skipped[0], skipped[0] + 3))
  assert not list((tmp_path / "run" / "seed_0" / "checkpoints").iterdir())  # nothing saved


def _rescore(task: str, predictions_file, gold) -> float:
  """The task's main metric recomputed from its written predictions with plain Python or
  sacrebleu: span F1 (GLNER), BLEU (WYWMT), accuracy (the others)."""
  if task == "wywmt":
    import sacrebleu

    hypotheses = [line.split("\t")[1] for line in predictions_file.read_text(encoding="utf-8").splitlines()]
    return sacrebleu.BLEU(tokenize="zh").corpus_score(hypotheses, [[e.target for e in gold]]).score / 100
  predicted = (
    wyweb_files.READERS[task](predictions_file)
    if task != "fspc"
    else [
      json.loads(line)["sentiments"]["holistic"] for line in predictions_file.read_text(encoding="utf-8").splitlines()
    ]
  )
  if task == "glner":
    p = {(i, *span) for i, e in enumerate(predicted) for span in e.spans}
    g = {(i, *span) for i, e in enumerate(gold) for span in e.spans}
    return 2 * len(p & g) / (len(p) + len(g))
  answer = {"irc": lambda e: e.label, "xuci": lambda e: e.same_usage, "fspc": lambda e: e.holistic}[task]
  return float(np.mean([(p if task == "fspc" else answer(p)) == answer(g) for p, g in zip(predicted, gold)]))


HEAD_TASKS = {  # task → (file, slicer, init kind): one task per head kind, both init kinds
  "glner": ("glner/train.jsonl", _slice_tsv, "hf"),
  "irc": ("irc/train.json", _slice_json, "wyjax"),
  "xuci": ("xuci/train.tsv", _slice_tsv, "wyjax"),
  "fspc": ("fspc/train.json", _slice_json, "hf"),
  "wywmt": ("wywmt/train.tsv", _slice_tsv, "hf"),
}
SCANNED = ("irc", "wywmt")  # fine-tuned with scan_layers: stacked encoders (IRC's unrolled), a scanned decoding cache


@pytest.mark.parametrize("task", sorted(HEAD_TASKS))
def test_pretrained_encoder_is_grafted_into_every_head(shared_data, tmp_path, task):
  file, slicer, init = HEAD_TASKS[task]
  data_dir = slicer(shared_data / "wyweb" / file, tmp_path / task, {"train": slice(0, 16), "dev": slice(16, 24)})
  texts = [
    text
    for split in ("train", "dev")
    for e in wyweb_files.read_split(task, data_dir, split)
    for text in task_model.example_texts(e)
  ]
  params = tiny_checkpoint(tmp_path, texts)
  # Learning rate 0: the run's best checkpoint must hold exactly the pretrained encoder.
  config = suite.task_config(
    task,
    data_dir=str(data_dir),
    init=str(tmp_path / init),
    num_train_steps=2,
    eval_every=2,
    batch_size=8,
    learning_rate=0.0,
    max_length=64,
    scan_layers=task in SCANNED,
    scan_unroll=8 if task == "irc" else 1,
  )
  results = finetuning.finetune(config, tmp_path / "run")
  _, tuned = checkpoints.restore_model(tmp_path / "run" / "seed_0")
  encoder = tuned["scorer"]["encoder"] if task == "irc" else tuned["encoder"]
  if task in SCANNED:
    encoder = unstack_layers(encoder)
  same = lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
  jax.tree_util.tree_map(same, encoder, params["encoder"])
  if task == "wywmt":  # the prefix LM keeps the pretrained MLM head too
    jax.tree_util.tree_map(same, tuned["mlm_head"], params["mlm_head"])
  # The reported main metric is the written dev predictions' against the dev file, counted here.
  gold = wyweb_files.read_split(task, data_dir, "dev")
  written = tmp_path / "run" / "seed_0" / f"dev_predictions.{'tsv' if task in ('xuci', 'wywmt') else 'jsonl'}"
  # (FSPC: the submission has whole poems, scored by poem_accuracy; the main metric adds their lines.)
  metric = "poem_accuracy" if task == "fspc" else results["main_metric"]
  assert results["dev"][metric] == pytest.approx(_rescore(task, written, gold))


def test_the_init_draws_only_the_fresh_head(shared_data, tmp_path):
  """init_params grafts the pretrained encoder and draws the head from the seed, in a program
  that computes nothing of the encoder's: on a CPU its initializers were a second of a cold
  run's compiling."""
  data_dir = _slice_tsv(
    shared_data / "wyweb" / "tlc" / "train.tsv", tmp_path / "data", {"train": slice(0, 16), "dev": slice(16, 24)}
  )
  config = suite.task_config("tlc", data_dir=str(data_dir), init=str(tmp_path / "hf"), batch_size=8)
  task = TASKS["tlc"]
  task, splits = task.prepare(task, datasets.load_splits(task.files, config.data_dir), config)
  pretrained = tiny_checkpoint(tmp_path, [t for e in splits["train"] for t in task_model.example_texts(e)])
  model, _, _ = task_model.setup(task, config, config.init, splits)
  seeds = [model.init_params(pretrained, seed) for seed in (0, 1)]
  for params in seeds:
    jax.tree_util.tree_map(np.testing.assert_array_equal, params["encoder"], pretrained["encoder"])
  assert not np.array_equal(seeds[0]["classifier"]["kernel"], seeds[1]["classifier"]["kernel"])
  fresh = tuple(path[0].key != "encoder" for path, _ in jax.tree_util.tree_leaves_with_path(seeds[0]))
  program = model._init_fresh.lower(model.seed_key(0), fresh).compile().as_text()
  vocab, hidden = pretrained["encoder"]["embeddings"]["word_embeddings"]["embedding"].shape
  assert f"f32[{hidden},{len(task.labels)}]" in program and f"[{vocab},{hidden}]" not in program


def test_compile_only_reports_the_fine_tuning_step(trained):
  data_dir, workdir, _, _ = trained
  report = finetuning.compile_only(suite.task_config("tlc", data_dir=str(data_dir), **TRAINED), "local")
  assert report["chips"] == 1 and report["mesh"] == {"data": 1, "fsdp": 1, "tensor": 1}
  assert report["tokens_per_step"] == 32 * 64  # the config's batch at the longest length bucket
  _, params = checkpoints.restore_model(workdir / "seed_0")  # the same model, trained
  total = sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(params))
  assert report["params_bytes_per_chip"] == total
  assert report["optimizer_bytes_per_chip"] == pytest.approx(2 * total, rel=1e-3)  # Adam's moments (+ counts)
  assert report["hbm_bytes_per_chip"] >= 3 * total
  assert report["flops_per_step_per_chip"] == pytest.approx(report["analytic_flops_per_step_per_chip"], rel=0.15)
  assert "roofline_step_seconds" not in report  # a CPU has no entry in the chip table
  # The same step for an H100 (XLA:GPU without a GPU): the same state, and what the GPU program is.
  gpu = finetuning.compile_only(suite.task_config("tlc", data_dir=str(data_dir), **TRAINED), "h100")
  assert gpu["chip"] == "h100" and gpu["params_bytes_per_chip"] == total
  assert gpu["kernels_per_step"] == sum(gpu["kernels_by_kind"].values()) > 0 and gpu["roofline_step_seconds"] > 0


def test_two_processes_fine_tune_as_one_process_with_two_devices(shared_data, tmp_path):
  """3 steps and the dev evaluation: two processes of one device each (CPU collectives), each
  feeding its half of every batch, against one process with two devices."""
  import portpicker

  data_dir = _slice_tsv(
    shared_data / "wyweb" / "tlc" / "train.tsv", tmp_path / "data", {"train": slice(0, 96), "dev": slice(96, 136)}
  )
  command = lambda workdir: [
    sys.executable,
    "-m",
    "wyjax.finetune",
    "--config=configs/tlc.py",
    f"--workdir={workdir}",
    f"--config.data_dir={data_dir}",
    "--config.num_train_steps=3",
    "--config.log_every=1",
    "--config.batch_size=16",
    "--config.eval_batch_size=16",
    "--config.max_length=32",
  ]
  one = subprocess.run(command(tmp_path / "one"), cwd=REPO_ROOT, env=pretrain_env(2), capture_output=True, text=True)
  assert one.returncode == 0, one.stderr[-3000:]
  port = portpicker.pick_unused_port()
  processes = [
    subprocess.Popen(
      command(tmp_path / "two"),
      cwd=REPO_ROOT,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
      env=pretrain_env(1, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(i)),
    )
    for i in range(2)
  ]
  for p in processes:
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
  losses = {
    name: {r["step"]: r["loss"] for r in _records(tmp_path / name / "seed_0") if "loss" in r} for name in ("one", "two")
  }
  assert sorted(losses["two"]) == [1, 2, 3]
  np.testing.assert_allclose(
    [losses["two"][s] for s in (1, 2, 3)], [losses["one"][s] for s in (1, 2, 3)], atol=1e-5, rtol=0
  )
  one_results, two_results = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("one", "two"))
  assert two_results["dev"] == pytest.approx(one_results["dev"], abs=1e-6)
  assert (tmp_path / "two" / "seed_0" / "dev_predictions.tsv").read_text() == (
    tmp_path / "one" / "seed_0" / "dev_predictions.tsv"
  ).read_text()


def test_random_init_weights_keep_the_init_architecture_and_vocabulary_not_its_weights(shared_data, tmp_path):
  """--config.init_weights=random, the board's "same model, no pretraining": the init's encoder
  (here 1 layer of 64, not the fresh tiny model's) and its tokenizer (with a character the train
  split lacks), every weight drawn afresh; at rate 1e-9 the kept checkpoint is that draw, far from
  the init's. Without an init there is nothing to take the architecture from: an error."""
  data_dir = _slice_tsv(
    shared_data / "wyweb" / "tlc" / "train.tsv", tmp_path / "tlc", {"train": slice(0, 16), "dev": slice(16, 24)}
  )
  texts = [e.text for split in ("train", "dev") for e in wyweb_files.read_split("tlc", data_dir, split)]
  tokenizer = Tokenizer(build_vocab([*texts, "龘"]))
  encoder = EncoderConfig(
    **{**task_model.FRESH_TINY_MODEL, "hidden_size": 64, "num_hidden_layers": 1, "intermediate_size": 128},
    vocab_size=len(tokenizer),
  )
  params = loading.init_params(encoder, jax.random.key(7))
  checkpoint_files.save_params(tmp_path / "init", 0, params, encoder, tokenizer)
  overrides = dict(
    data_dir=str(data_dir),
    init_weights="random",
    num_train_steps=2,
    eval_every=1,
    batch_size=8,
    learning_rate=1e-9,
    max_length=64,
  )
  results = finetuning.finetune(suite.task_config("tlc", init=str(tmp_path / "init"), **overrides), tmp_path / "run")
  assert results["config"]["init_weights"] == "random"
  info, tuned = checkpoints.restore_model(tmp_path / "run" / "seed_0")
  assert info == checkpoints.read_model_info(tmp_path / "init")[0]
  assert loading.load(tmp_path / "run" / "seed_0").tokenizer.vocab == tokenizer.vocab
  differences = jax.tree_util.tree_map(lambda a, b: float(np.max(np.abs(a - b))), tuned["encoder"], params["encoder"])
  drawn = {
    jax.tree_util.keystr(k): v
    for k, v in jax.tree_util.tree_leaves_with_path(differences)
    if k[-1].key in ("kernel", "embedding")
  }  # (biases and layer norms start at zeros and ones)
  assert len(drawn) == 8 and min(drawn.values()) > 1e-2, drawn
  with pytest.raises(ValueError, match="init_weights='random' takes the architecture and vocabulary of"):
    finetuning.finetune(suite.task_config("tlc", **overrides), tmp_path / "fresh")
  with pytest.raises(ValueError, match="config.init_weights is 'none'; allowed: 'pretrained'"):
    finetuning.finetune(suite.task_config("tlc", **{**overrides, "init_weights": "none"}), tmp_path / "none")

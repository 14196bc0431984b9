"""Fine-tuning one task: train, evaluate on dev, keep one checkpoint, then predict dev and test with it.

Dev is evaluated every N steps and at each epoch's end; one checkpoint is kept with orbax
(`keep_checkpoint`: the best-dev parameters, or the last evaluation's); training stops after
`patience` evaluations without improvement (0: never, the fixed number of epochs or steps).

    workdir/
      run_config.json         the config the runs were made with (a rerun must match it)
      data_files.json         size and SHA-256 of each file read: data, --config.init (a rerun must match)
      results.json            per-seed dev/test metrics, mean ± std, the best-dev run
      submission/<task>.<ext> test predictions of the best-dev run (docs/finetuning.md)
      seed_<k>/               one run: model.json, tokenizer/, checkpoints/<kept step>/,
                              metrics.jsonl, dev_predictions.<ext>, test predictions,
                              run.json once finished; resume/<step>/ while unfinished

A rerun keeps finished seeds (run.json) as they are and continues an unfinished one exactly from
its resume/ checkpoint (saved at every evaluation and on SIGTERM/SIGINT, with the batch iterator's
position and the early-stopping counters), removed once the seed has finished.
"""

import dataclasses
import logging
import sys

import grain
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import tqdm
from etils import epath

from wyjax.aot import report, targets
from wyjax.core import checkpoints, distributed, guards, locks, partitioning, run_config, run_metrics, storage
from wyjax.core.host_memory import buffer_bytes
from wyjax.hf import loading
from wyjax.tasks import batching, datasets, linear_baseline
from wyjax.tasks.registry import TASKS, majority_baseline
from wyjax.tasks.task import Task
from wyjax.train import config_values, learning_rates, task_model


def base_config(task: str = "") -> ml_collections.ConfigDict:
  """The WYWEB paper's Table 15 defaults, and the task's own options (Task.options) with their defaults.

  configs/<task>.py set the task and its sizes.
  """
  c = ml_collections.ConfigDict()
  c.task = task
  c.data_dir = ""  # the task folder, as its benchmark publishes it
  c.init = ""  # transformers folder or wyjax workdir; empty: a fresh tiny model (with a warning)
  c.init_weights = "pretrained"  # "random": init's architecture and vocabulary, random weights (its unpretrained twin)
  c.max_length = 0  # 0: the task's max_seq_len from the paper's scripts
  c.batch_size = 32
  c.eval_batch_size = 64  # sequences: an example counts as its most rows of any (options, windows)
  c.sort_window = 1  # > 1: train examples sorted by length in windows of this many batches (faster; docs/finetuning.md)
  c.length_buckets = 0  # padded lengths, each a compiled step; 0: by backend (task_model.bucket_count)
  c.num_epochs = 10
  c.num_train_steps = 0  # > 0: train this many steps instead of num_epochs epochs
  c.learning_rate = ml_collections.config_dict.placeholder(float)  # None: chosen from the model's size
  c.base_learning_rate = 2e-5  # the paper's, for a base-sized model (wyjax.train.learning_rates)
  c.warmup_fraction = 0.1
  c.weight_decay = 0.01
  c.b1, c.b2, c.eps = 0.9, 0.999, 1e-6
  c.max_grad_norm = 1.0
  c.eval_every = 1000  # steps; the dev set is also evaluated at the end of every epoch
  c.patience = 5  # evaluations without improvement before stopping; 0: no early stopping
  c.keep_checkpoint = "best_dev"  # the parameters restored, scored and submitted (config_values.KEEP_CHECKPOINT)
  c.seed = 0
  c.seeds = 1  # runs with seeds seed, seed + 1, ...: mean, std and the best-dev run's test score
  c.dtype = "float32"
  c.remat = "none"  # per layer: "none", "full" or "dots" (wyjax.models.EncoderConfig.remat)
  c.attention = "auto"  # "auto", "xla", "pallas" (fused kernels) or "cudnn_dropout" (wyjax.models.attention)
  c.scan_layers, c.scan_unroll = False, 1  # nn.scan over the layers (params stacked); scan_unroll per loop iteration
  c.log_every = 50
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.logical_axis_rules = partitioning.LOGICAL_AXIS_RULES  # params' and activations' logical axes → mesh
  c.max_nonfinite_steps = 10  # non-finite steps in a row (each skipped) before the run stops
  c.stop_check_every = 10  # steps between the processes' agreement on a stop signal (multi-host)
  if task:
    c.update(_task(task).options)
  return c


def _task(name: str) -> Task:
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; fine-tuning tasks are {sorted(TASKS)}")
  return TASKS[name]


def with_options(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of config with every option its task reads, at their defaults where it has none.

  A config built on base_config() without the task's name still gets them.
  """
  options = _task(config.task).options
  merged = ml_collections.ConfigDict(config.to_dict())
  merged.update({key: value for key, value in options.items() if key not in merged})
  return merged


# Keys a rerun may change: not what a seed trains (more seeds add runs; base_learning_rate acts by learning_rate).
RESUMABLE_CHANGES = (
  "seeds",
  "log_every",
  "eval_batch_size",
  "mesh",
  "logical_axis_rules",
  "max_nonfinite_steps",
  "stop_check_every",
  "remat",
  "scan_unroll",
  "attention",
  "base_learning_rate",
  "length_buckets",
)


@dataclasses.dataclass
class Run:
  seed: int
  workdir: epath.Path
  best_step: int  # the step whose parameters were kept (keep_checkpoint), restored and scored
  dev: dict
  test: dict | None
  stopped_early: bool
  dev_confusion: list  # [gold][predicted] counts over the head's classes


RUN_FILE = "run.json"  # a finished seed's Run
WRITTEN = ("results.json", "submission", "seed_[0-9]*")  # what a workdir holds beside run_config's records
PROGRESS, BATCHES = "progress", "batches"  # items of a resume/ checkpoint beside the state


def train_one(
  task: Task,
  config,
  data: dict,
  model: task_model.TaskModel,
  pretrained: dict,
  seed: int,
  workdir: epath.Path,
  stop: guards.StopRequest,
) -> Run:
  """One seed: train (early stopping unless patience is 0), restore the kept params, predict dev and test.

  A finished seed (its run.json) is returned as it is; an unfinished one continues from its
  resume/ checkpoint. On a stop signal the seed checkpoints and raises guards.Interrupted."""
  if (workdir / RUN_FILE).exists():
    logging.info("seed %d finished earlier: kept as it is (%s)", seed, workdir)
    return Run(**{**storage.read_json(workdir / RUN_FILE), "workdir": workdir})
  train_features = data["train"][1]
  steps_per_epoch = max(1, len(train_features) // config.batch_size)
  last_step = task_model.total_steps(config, data)
  state = model.init_state(pretrained, seed)
  batches = batching.train_batches(
    train_features,
    batch_size=config.batch_size,
    max_length=data["max_length"],
    pad_id=model.pad_id,
    seed=seed,
    sort_window=config.sort_window,
    bucket_count=model.bucket_count,
  )
  best_checkpoints = checkpoints.Writer(checkpoints.manager(workdir, max_to_keep=1))
  resume_checkpoints = checkpoints.Writer(
    checkpoints.manager(
      workdir,
      folder="resume",
      max_to_keep=1,
      extra_handlers={PROGRESS: ocp.JsonCheckpointHandler(), BATCHES: grain.checkpoint.CheckpointHandler()},
    )
  )

  def save_resume(step):  # synchronous, as every fine-tuning save: only at evaluations and stops
    resume_checkpoints.save_now(
      step, state, **{PROGRESS: ocp.args.JsonSave(progress), BATCHES: grain.checkpoint.CheckpointSave(batches)}
    )

  progress = {"best": None, "best_step": 0, "stale": 0, "stopped_early": False}
  kept_evaluation = None  # (dev scores, predictions, confusion) of the kept step, if scored in this process
  restored, start_step = checkpoints.restore_latest(resume_checkpoints.mngr, model.program.abstract_state)
  if restored is not None:
    state = restored
    items = resume_checkpoints.mngr.restore(
      start_step,
      args=ocp.args.Composite(
        **{PROGRESS: ocp.args.JsonRestore(), BATCHES: grain.checkpoint.CheckpointRestore(batches)}
      ),
    )
    progress = items[PROGRESS]
    if progress["best_step"] == start_step and best_checkpoints.mngr.latest_step() != start_step:
      # Stopped between the two saves of a kept evaluation: this state is the one to keep.
      best_checkpoints.save_now(start_step, {"params": state["params"]})
    logging.info("seed %d: resumed from step %d", seed, start_step)
  else:  # best checkpoints of an attempt that never reached a resume point: set aside
    for step in best_checkpoints.mngr.all_steps():
      checkpoints.move_aside(best_checkpoints.mngr, step, "abandoned")
  is_main = jax.process_index() == 0  # every process trains; one writes the files beside the checkpoints
  if is_main:
    checkpoints.write_model_info(
      workdir,
      model.model_config.without_run_choices().to_dict(),
      [k for k in state["params"] if k != "encoder"],
      model.tokenizer,
    )
    run_config.trim_metrics(workdir, start_step)
  writer = run_metrics.MetricWriter(workdir, enabled=is_main)
  nonfinite = guards.NonFiniteSteps(config.max_nonfinite_steps)
  dev_examples, dev_features = data["dev"]
  rng = model.seed_key(seed)
  bar = tqdm.tqdm(total=last_step, initial=start_step, disable=not sys.stderr.isatty(), file=sys.stderr, unit="step")
  loss_watch = learning_rates.LossWatch(last_step, config.learning_rate, model.model_config)  # warns on a flat loss
  clock, last_logged = run_metrics.StepClock(), start_step
  try:
    for step in range(start_step + 1, last_step + 1):
      if progress["stopped_early"]:
        break
      with jax.transfer_guard("disallow"):  # a step moves its batch in, explicitly, and nothing else
        state, step_metrics = model.train_step(state, next(batches), rng)
        nonfinite.push(step, step_metrics.pop("finite"))
      bar.update()
      if step % config.log_every == 0:
        nonfinite.flush()
        step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
        step_metrics["step_seconds"] = clock.lap() / (step - last_logged)
        step_metrics["nonfinite_steps"] = nonfinite.take_skipped()
        writer.write(step, step_metrics)
        loss_watch.push(step, step_metrics["loss"])
        bar.set_postfix(loss=f"{step_metrics['loss']:.3f}")
        last_logged = step
      nonfinite.check()
      evaluation = step % config.eval_every == 0 or step % steps_per_epoch == 0 or step == last_step
      if evaluation:
        with clock.set_apart():
          scores, predictions, confusion = model.evaluate(state["params"], dev_examples, dev_features)
        writer.write(step, {f"dev_{k}": v for k, v in scores.items()} | {"epoch": step / steps_per_epoch})
        logging.info("seed %d step %d: dev %s", seed, step, run_metrics.brief(scores))
        improved = progress["best"] is None or scores[task.main_metric] > progress["best"]
        kept = improved or config.keep_checkpoint == "last"
        if improved:
          progress.update(best=scores[task.main_metric], stale=0)
        else:
          progress["stale"] += 1
          if config.patience and progress["stale"] >= config.patience:
            logging.info("seed %d: no improvement in %d evaluations, stops at step %d", seed, progress["stale"], step)
            progress["stopped_early"] = True
        if kept:
          progress["best_step"], kept_evaluation = step, (scores, predictions, confusion)  # run.json's best_step
        save_resume(step)  # first: a kept step's resume point can re-save its checkpoint (above)
        if kept:
          best_checkpoints.save_now(step, {"params": state["params"]})
      if signum := stop.signal_at(step):
        if not evaluation:
          save_resume(step)
        raise guards.Interrupted(signum, step)
  except guards.Interrupted as e:  # in step's dev evaluation (guards.honour_stop): the rerun trains again
    if e.step is not None:
      raise
    last = resume_checkpoints.mngr.latest_step()
    rerun = f"resume from its checkpoint of step {last}" if last else f"start {workdir.name} again"
    where = f"in {workdir.name}'s dev evaluation at step {step}" + ("" if last else ", before its first checkpoint")
    raise guards.Interrupted(e.signum, where=f"{where}; rerun the same command to {rerun}") from None
  finally:
    for opened in (bar, writer, best_checkpoints, resume_checkpoints):
      opened.close()

  _, params = checkpoints.restore_model(workdir)
  params = jax.device_put(params, model.program.params_sharding)
  # Checkpoints are chosen on greedy translations; the final ones use the configured beam. Dev
  # scored with the kept parameters already (greedy) is not scored again.
  beam_size = config.decoding.beam_size if model.head.generates else 1
  try:
    dev, predictions, confusion = (
      kept_evaluation
      if kept_evaluation and beam_size == 1
      else model.evaluate(params, dev_examples, dev_features, beam_size=beam_size)
    )
    if is_main:
      task.write_predictions(workdir / f"dev_predictions.{task.submission_format}", dev_examples, predictions)
    test = None
    if "test" in data:
      test_examples, test_features = data["test"]
      test, predictions, _ = model.evaluate(params, test_examples, test_features, beam_size=beam_size)
      if is_main:
        task.write_predictions(workdir / f"test_predictions.{task.submission_format}", test_examples, predictions)
  except guards.Interrupted as e:  # (guards.honour_stop: between prediction batches)
    where = f"in {workdir.name}'s final predictions, its training done and checkpointed"
    raise guards.Interrupted(e.signum, where=f"{where}; rerun the same command to predict again") from None
  run = Run(seed, workdir, progress["best_step"], dev, test, progress["stopped_early"], confusion.tolist())
  if is_main:
    storage.write_json(workdir / RUN_FILE, {**dataclasses.asdict(run), "workdir": str(workdir)})
    checkpoints.remove_steps(workdir / "resume")  # the seed is finished: its resume point is no longer needed
  return run


def _prepare(config, devices=None, *, with_test: bool = True):
  """(task, splits, featurized data, model, pretrained params) of config.task.

  The test split is left out unless with_test (a compile needs none, and C-CLUE's triples take it
  from another run).
  """
  if not config.data_dir:
    raise ValueError("set --config.data_dir to the task folder (its benchmark's files as released)")
  task = _task(config.task)
  splits = datasets.load_splits(task.files, config.data_dir)
  if not with_test:
    splits.pop("test", None)
  if "dev" not in splits:
    raise FileNotFoundError(f"{config.data_dir}: no dev file; the best checkpoint is chosen on dev")
  task, splits = task.prepare(task, splits, config)
  model, pretrained, data = task_model.setup(task, config, config.init, splits, devices)
  return task, splits, data, model, pretrained


def compile_only(config: ml_collections.ConfigDict, topology: str) -> dict:
  """Compiles the task's train step for `topology` (targets.devices) without running it: report.report's figures.

  The step takes config.batch_size examples of the most rows (options, windows) any train example
  has, at max_length. For "local" the figures add the buffers of the evaluation step at
  config.eval_batch_size sequences of that length (evaluation_bytes_per_chip).
  """
  config = with_options(config)
  config_values.check(config, config_values.FINETUNING)
  devices = targets.devices(topology)
  _, _, data, model, _ = _prepare(config, devices, with_test=False)
  prog = model.program
  features = data["train"][1]
  lengths = (data["max_length"],)
  batch = batching.largest_batch(features, batch_size=config.batch_size, lengths=lengths, pad_id=model.pad_id)
  abstract = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=prog.data_sharding)
  inputs = jax.tree_util.tree_map(abstract, task_model.model_inputs(batch))
  labels = abstract(np.asarray(task_model.labels_of(batch)))
  rng = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=prog.replicated)
  step = report.compile_step(model.jit_train, prog.abstract_state, inputs, labels, rng, topology=topology)
  tokens = int(np.prod(batch["input_ids"].shape))
  lm_fraction = 1.0 if model.head.generates else 0.0  # other heads are small beside the encoder
  flops = 3 * model.model_config.forward_flops_per_token(data["max_length"], lm_fraction) * tokens
  result = report.report(
    step,
    topology=topology,
    devs=devices,
    mesh=prog.mesh,
    abstract_state=prog.abstract_state,
    analytic_flops_per_step=flops,
    tokens_per_step=tokens,
  )
  if topology == "local":  # the run's other program (other hardware: the train step alone)
    eval_batch = batching.largest_batch(
      features, batch_size=model.eval_batch_size(features), lengths=lengths, pad_id=model.pad_id
    )
    evaluation = model.jit_eval.lower(
      prog.abstract_state["params"], jax.tree_util.tree_map(abstract, task_model.model_inputs(eval_batch))
    ).compile()
    result["evaluation_bytes_per_chip"] = buffer_bytes(evaluation.memory_analysis())
  report.check_fits(result)
  return result


def check_workdir(config: ml_collections.ConfigDict, workdir) -> None:
  """Refuses a workdir that is, holds or lies inside what fine-tuning `config` (with_options) reads."""
  reads = ("data_dir", "init", *_task(config.task).path_options)
  run_config.check_reads(workdir, WRITTEN, {f"--config.{k}": config[k] for k in reads}, "fine-tuning")


def finetune(config: ml_collections.ConfigDict, workdir, *, accept_config_change=False, fresh_start=False) -> dict:
  """Fine-tunes config.task for config.seeds seeds; returns (and writes) results.json.

  AC-EVAL's by its own protocol (Task.run). A rerun keeps finished seeds and continues the others;
  a changed config is refused unless accept_config_change, changed data or init files unless
  fresh_start (run_config.set_aside).
  """
  config = with_options(config)
  config_values.check(config, config_values.FINETUNING)
  check_workdir(config, workdir)
  distributed.initialize()
  with locks.held(workdir, "fine-tuning", enabled=jax.process_index() == 0):  # one command writes a workdir
    return _finetune(config, epath.Path(workdir), accept_config_change, fresh_start)


def _finetune(config: ml_collections.ConfigDict, workdir, accept_config_change: bool, fresh_start: bool) -> dict:
  task = _task(config.task)
  if task.run:
    if not config.data_dir:
      raise ValueError("set --config.data_dir to the task folder (its benchmark's files as released)")
    return task.run(config, workdir, lambda init, splits: task_model.setup(task, config, init, splits))
  task, splits, data, model, pretrained = _prepare(config)
  config = model.config  # learning_rate resolved (learning_rates): compared, stored and reported so
  files = {split: task.files.split_files(config.data_dir, split) for split in datasets.SPLITS if split in data}
  data_files = run_config.data_fingerprint(config.data_dir, files)
  if config.init:  # its weights and tokenizer by content: another model under the same path is another start
    data_files |= run_config.data_fingerprint(config.init, {"init": loading.files(config.init)})
  run_config.check_unclaimed(workdir, WRITTEN)  # (before a fresh start: what it would take for its own)
  if fresh_start:
    run_config.set_aside(workdir, WRITTEN)
  changes = (
    run_config.check_config(
      workdir,
      config,
      ignore=RESUMABLE_CHANGES,
      defaults=base_config(config.task),
      accept=accept_config_change,
      places=dict.fromkeys(("data_dir", "init"), storage.place),
    )
    if any(workdir.glob("seed_*"))
    else {}
  )
  run_config.check_data(workdir, data_files)  # a finished seed is kept as it is: its scores must be these files'
  if jax.process_index() == 0:
    run_config.store_config(workdir, config, changes, data_files)
  with guards.stop_signals(config.stop_check_every) as stop:
    runs = [
      train_one(task, config, data, model, pretrained, config.seed + k, workdir / f"seed_{config.seed + k}", stop)
      for k in range(config.seeds)
    ]
  best_run = max(runs, key=lambda r: r.dev[task.main_metric])
  dev_scores = np.array([r.dev[task.main_metric] for r in runs])
  results = {
    "task": task.name,
    "main_metric": task.main_metric,
    "init": config.init or "fresh tiny model",
    "learning_rate": config.learning_rate,
    "dev_mean": float(dev_scores.mean()),
    "dev_std": float(dev_scores.std()),
    "best_seed": best_run.seed,
    "best_run": str(best_run.workdir),
    "dev": best_run.dev,
    "test": best_run.test,
    "labels": list(task.labels),
    "dev_confusion": best_run.dev_confusion,
    "majority_baseline": majority_baseline(task, splits["train"], splits["dev"]),
    "linear_baseline": linear_baseline.scores(task, data),  # {"dev": metrics, "test": metrics or None}
    "truncated_characters": data["truncated"],
    "files": {split: [str(path) for path in paths] for split, paths in files.items()},
    "notes": {split: notes for split in datasets.SPLITS if split in data and (notes := task.notes(data[split][0]))},
    "runs": [
      {"seed": r.seed, "best_step": r.best_step, "stopped_early": r.stopped_early, "dev": r.dev, "test": r.test}
      for r in runs
    ],
    "config": config.to_dict(),
  }
  submission = workdir / "submission" / task.submission_file
  if "test" in data:
    results["submission"] = str(submission)
  if jax.process_index() == 0:
    if "test" in data:
      submission.parent.mkdir(parents=True, exist_ok=True)
      (best_run.workdir / f"test_predictions.{task.submission_format}").copy(submission, overwrite=True)
    storage.write_json(workdir / "results.json", results)
  return results

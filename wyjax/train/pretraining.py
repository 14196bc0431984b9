"""Pretraining, by MLM or replaced-token detection: one jitted, donated step over a (data, fsdp, tensor) mesh.

`train_and_evaluate(config, workdir)` is the whole run: prepare (or find) the corpus, build
the sharded state, resume from the workdir's latest readable checkpoint, train, evaluate,
checkpoint every N steps, at the end and on SIGTERM/SIGINT.
"""

import concurrent.futures
import dataclasses
import logging
import sys
import time
from collections.abc import Callable

import grain
import jax
import jax.numpy as jnp
import ml_collections
import orbax.checkpoint as ocp
import tqdm
from etils import epath

from wyjax.aot.accelerators import peak_flops_per_device
from wyjax.core import checkpoints, distributed, guards, host_memory, locks, run_config, run_metrics
from wyjax.data import pipeline, prepare
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.models import EncoderConfig
from wyjax.train import config_values, continuing, pretraining_evaluation, pretraining_steps, probes, program
from wyjax.train.pretraining_config import PLACES, RESUMABLE_CHANGES, base_config
from wyjax.train.pretraining_corpus import corpus_fingerprint, prepared_data_dir
from wyjax.train.program import Program

DATA_ITER = "data_iter"


def _restore_data_iterator(mngr, step: int, train_iter) -> None:
  try:
    mngr.restore(step, args=ocp.args.Composite(**{DATA_ITER: grain.checkpoint.CheckpointRestore(train_iter)}))
  except Exception as e:  # e.g. saved with another number of processes
    logging.warning("data iterator state of step %d not restored (%s); repositioning by step", step, e)
    train_iter.set_state({"next_index": step})


@dataclasses.dataclass(frozen=True)
class Pretraining:
  """What a pretraining run compiles: the program and its jitted steps.

  The run and pretraining_compile.compile_only build it the same way, so the step compiled ahead
  of time is the step the run executes.
  """

  program: Program
  model_config: EncoderConfig
  train_step: Callable  # jitted (state, batch) → (state, metrics); the state is donated
  eval_step: Callable  # jitted (params, batch, index) → loss sums
  length: int
  train_flops_per_step: float  # 3 × the objective's forward FLOPs
  objective: pretraining_steps.Objective  # its encoder, start from a checkpoint, validation metrics and head


def build(
  config: ml_collections.ConfigDict, tokenizer, length: int, devices=None, architecture: dict | None = None
) -> Pretraining:
  """The model, mesh and jitted steps of `config` over `devices` (default: all of them).

  architecture: the encoder's fields, config.model's by default (a continued run's are its
  checkpoint's: continuing.architecture); the vocabulary, and with it the pad id, is `tokenizer`'s.
  """
  model_config = EncoderConfig(
    **{
      **(architecture or config.model.to_dict()),
      "vocab_size": len(tokenizer),
      "pad_token_id": tokenizer.pad_id,
      "dtype": config.dtype,
      "remat": config.remat,
      "scan_layers": config.scan_layers,
      "scan_unroll": config.scan_unroll,
      "attention": config.attention,
    }
  )
  if model_config.absolute_positions and length > model_config.max_tokens:
    where = f"--config.init {config.init}'s " if config.init else "config.model."
    raise guards.RunError(
      f"the corpus's sequences are {length} tokens but {where}max_position_embeddings is "
      f"{model_config.max_position_embeddings} (positions for {model_config.max_tokens} tokens): positions past them "
      f"have no embedding (the loss would be NaN); prepare a corpus of at most {model_config.max_tokens} tokens a "
      "sequence" + ("" if config.init else f", or set --config.model.max_position_embeddings={length}")
    )
  objective = pretraining_steps.OBJECTIVES[config.objective](config, model_config, tokenizer, length)
  prog = program.build(
    objective.init,
    config,
    warmup_steps=config.warmup_steps,
    total_steps=config.num_train_steps,
    devices=devices,
    frozen_steps=config.freeze_encoder_steps,
    trainable=continuing.trains_first,
  )
  train_step, eval_step = objective.steps(prog)
  return Pretraining(
    program=prog,
    model_config=model_config,
    length=length,
    train_step=prog.jit_train(train_step, prog.data_sharding),
    eval_step=prog.jit_eval(eval_step, prog.data_sharding, None),
    train_flops_per_step=3 * config.batch_size * length * objective.forward_flops_per_token,
    objective=objective,
  )


def compile_steps(run: Pretraining, config) -> tuple[jax.stages.Compiled, jax.stages.Compiled]:
  """The run's train and evaluation steps compiled for this machine, admitted by its memory.

  host_memory.admit refuses a step that cannot fit, in one line.
  """
  prog = run.program
  batch = jax.ShapeDtypeStruct((config.batch_size, run.length), jnp.int32, sharding=prog.data_sharding)
  train_step = run.train_step.lower(prog.abstract_state, batch).compile()
  eval_step = run.eval_step.lower(prog.abstract_state["params"], batch, 0).compile()
  shape = f"{config.batch_size} × {run.length} tokens"

  def advice(fits):
    smaller = int(config.batch_size * fits)
    return (
      (f"set --config.batch_size={smaller} or lower (now {config.batch_size}), " if smaller else "")
      + f"split the batch with --config.grad_accum_steps (now {config.grad_accum_steps}), or recompute "
      f"activations with --config.remat=full"
    )

  host_memory.admit(
    [
      host_memory.Program(f"the training step at {shape}", train_step, advice),
      host_memory.Program(f"the evaluation step at {shape}", eval_step, advice),
    ]
  )
  return train_step, eval_step


def data_fingerprint(data_dir, manifest: dict, init: str) -> dict:
  """What the run is made from, by content (data_files.json): its corpus, and its init's files."""
  return {**corpus_fingerprint(data_dir, manifest), **(continuing.fingerprint(init) if init else {})}


def check_resume(
  config, workdir, data_dir, manifest: dict, init: str = "", *, accept_config_change: bool = False
) -> dict:
  """The config changes that continuing `workdir`'s checkpoints with `config` brings.

  They are refused (run_config.ConfigChanged) unless accepted. First the corpus in `data_dir` and
  the `init` (config.init's local folder) must be the ones the checkpoints were made from (their
  data iterator points into the corpus): their record (data_files.json), and the shards' bytes
  against their manifest.
  """
  changes = run_config.check_config(
    workdir, config, ignore=RESUMABLE_CHANGES, defaults=base_config(), accept=accept_config_change, places=PLACES
  )
  remedy = (
    f"Resume with the corpus {'and the --config.init ' if init else ''}the run was made from (its "
    "checkpoints' data iterator points into the corpus), or use another --workdir."
  )
  run_config.check_data(workdir, data_fingerprint(data_dir, manifest, init), remedy=remedy)
  changed = lambda: ", ".join(pipeline.changed_shards(data_dir, manifest)) or None
  if shards := checkpoints.agreed_problem(changed, "its shards (found by process 0)"):
    raise run_config.DataChanged(
      f"{data_dir}: {shards} no longer match the SHA-256 its {prepare.MANIFEST} records: "
      f"the corpus changed after it was built. {remedy}"
    )
  return changes


def train_and_evaluate(
  config: ml_collections.ConfigDict,
  workdir,
  *,
  accept_config_change: bool = False,
  prepare_corpus: bool = False,
  typed=(),
) -> dict:
  """Runs (or resumes) pretraining in workdir; returns the last evaluation metrics.

  Raises guards.Interrupted after checkpointing on SIGTERM/SIGINT, and a guards.RunError when
  the run cannot go on (a changed config, an incompatible checkpoint, a failed save, too many
  non-finite steps, another command writing the workdir); nothing in the workdir is overwritten
  before the restore succeeded. prepare_corpus: see prepared_data_dir. typed: the config keys
  given on the command line, refused where the corpus decides them otherwise (the vocabulary; with
  config.init, its architecture: continuing.architecture).
  """
  config_values.check(config, config_values.PRETRAINING)
  probes.parse(config.probes)
  distributed.initialize()
  with locks.held(workdir, "pretraining", enabled=jax.process_index() == 0):  # one command writes a workdir
    return _train_and_evaluate(config, epath.Path(workdir), accept_config_change, prepare_corpus, typed)


def _train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: epath.Path, accept_config_change: bool, prepare_corpus: bool, typed
) -> dict:
  is_main = jax.process_index() == 0
  init = continuing.local_init(config.init) if config.init else ""
  architecture = continuing.architecture(init, config, typed) if init else None
  data_dir = prepared_data_dir(config, prepare_corpus=prepare_corpus)
  tokenizer = tokenizer_lib.Tokenizer.load(data_dir / "tokenizer")
  config_values.check_decided(config, {"model.vocab_size": len(tokenizer)}, f"the corpus {data_dir}", typed)
  manifest = prepare.read_manifest(data_dir)
  run = build(config, tokenizer, manifest["sequence_length"], architecture=architecture)
  model_config, length = run.model_config, run.length
  reading = concurrent.futures.ThreadPoolExecutor(1)  # the probes' tasks, read while the steps compile
  task_probes = reading.submit(probes.read, config, tokenizer, model_config)
  reading.shutdown(wait=False)
  compile_start = time.perf_counter()
  train_step, _ = compile_steps(run, config)  # refused here, before the workdir is touched, if they cannot fit
  compile_seconds = time.perf_counter() - compile_start
  run_probes = probes.for_pretraining(run, task_probes.result(), tokenizer.pad_id)  # a bad task is refused here

  # --- data and checkpoints ------------------------------------------------------------------------
  mngr = checkpoints.manager(
    workdir,
    max_to_keep=config.keep_checkpoints,
    extra_handlers={DATA_ITER: grain.checkpoint.CheckpointHandler()},
    save_decision_policy=ocp.checkpoint_managers.FixedIntervalPolicy(config.checkpoint_every),
    enable_async_checkpointing=config.async_checkpointing,
  )
  changes = (
    check_resume(config, workdir, data_dir, manifest, init, accept_config_change=accept_config_change)
    if mngr.all_steps()
    else {}
  )
  train_iter = iter(
    pipeline.train_dataset(
      data_dir,
      global_batch_size=config.batch_size,
      seed=config.seed,
      process_index=jax.process_index(),
      process_count=jax.process_count(),
    )
  )
  eval_batches = pipeline.eval_batches(
    data_dir,
    global_batch_size=config.batch_size,
    num_batches=config.eval_batches,
    process_index=jax.process_index(),
    process_count=jax.process_count(),
  )
  state, start_step = checkpoints.restore_latest(mngr, run.program.abstract_state)
  restored = state is not None
  if state is None and init:
    params, rows = continuing.initial_params(init, model_config, tokenizer.vocab, config.seed)
    if is_main:
      print(f"continuing {config.init}: {rows}", flush=True)
    state = run.program.place(run.objective.from_checkpoint(params, run.program))
  elif state is None:
    state = run.program.init_state(jax.random.key(config.seed))
  else:
    _restore_data_iterator(mngr, start_step, train_iter)
    logging.info("resumed from step %d", start_step)
  if is_main:  # only now: a refused resume leaves the workdir as it was
    run_config.store_config(workdir, config, changes, data_fingerprint(data_dir, manifest, init))
    checkpoints.write_model_info(
      workdir,
      model_config.without_run_choices().replace(dtype="float32").to_dict(),
      [run.objective.head],
      tokenizer,
    )
    run_config.trim_metrics(workdir, start_step if restored else -1)  # a fresh start records step 0 again

  # --- steps ------------------------------------------------------------------------------------
  def global_batch(local):
    return jax.make_array_from_process_local_data(run.program.data_sharding, local)

  # run.eval_step: jit's cache holds its program, compiled with the train step; the batches go on the devices once.
  evaluate = pretraining_evaluation.Evaluation(run, eval_batches, tokenizer, global_batch, run_probes)

  # --- loop ---------------------------------------------------------------------------------------
  writer = run_metrics.MetricWriter(workdir, enabled=is_main)
  saves = checkpoints.Writer(mngr)
  nonfinite = guards.NonFiniteSteps(config.max_nonfinite_steps)
  tokens_per_step = config.batch_size * length
  peak = peak_flops_per_device(config.peak_flops_per_device or None)
  train_flops_per_step = run.train_flops_per_step
  batch = global_batch(next(train_iter)) if start_step < config.num_train_steps else None
  if batch is not None:
    writer.write(start_step, {"compile_seconds": compile_seconds})
  bar = tqdm.tqdm(
    total=config.num_train_steps,
    initial=start_step,
    disable=not (is_main and sys.stderr.isatty()),
    file=sys.stderr,
    unit="step",
  )
  last_eval, clock, last_step = {}, run_metrics.StepClock(), start_step
  step = start_step
  try:
    with guards.stop_signals(config.stop_check_every) as stop:
      # Step 0 (a checkpoint continued, or random weights), or a resumed step whose evaluation a stop cut short.
      if pretraining_evaluation.due(step, config) and not pretraining_evaluation.recorded(workdir, step):
        with clock.set_apart():
          last_eval, signum = evaluate(state["params"], stop)
        if signum:
          raise guards.Interrupted(signum, step)  # (a resumed step's checkpoint was written before)
        writer.write(step, last_eval)
      while step < config.num_train_steps:
        state, step_metrics = train_step(state, batch)
        step += 1
        nonfinite.push(step, step_metrics.pop("finite"))
        saves.poll()
        bar.update()
        if step % config.log_every == 0 or step == config.num_train_steps:
          nonfinite.flush()
          step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
          elapsed = clock.lap()
          steps = step - last_step
          step_metrics.update(
            step_seconds=elapsed / steps,
            tokens_per_second=steps * tokens_per_step / elapsed,
            nonfinite_steps=nonfinite.take_skipped(),
          )
          if peak:
            step_metrics["mfu"] = steps * train_flops_per_step / elapsed / (peak * jax.device_count())
          writer.write(step, step_metrics)
          bar.set_postfix(loss=f"{step_metrics['loss']:.3f}")
          last_step = step
        nonfinite.check()
        evaluation, signum = None, 0
        if pretraining_evaluation.due(step, config):
          with clock.set_apart():
            evaluation, signum = evaluate(state["params"], stop)
        if evaluation:
          last_eval = evaluation
          writer.write(step, last_eval)
          logging.info("step %d: %s", step, run_metrics.brief(last_eval))
        # A stop agreed inside the evaluation is acted on here, whether or not this step syncs.
        signum = signum or stop.signal_at(step)
        saves.save(
          step,
          ocp.args.Composite(
            state=ocp.args.PyTreeSave(state), **{DATA_ITER: grain.checkpoint.CheckpointSave(train_iter)}
          ),
          force=bool(signum) or step == config.num_train_steps,
        )
        if signum:
          raise guards.Interrupted(signum, step)
        if step < config.num_train_steps:
          # After the save, so a checkpoint's iterator state points at the next step's batch.
          batch = global_batch(next(train_iter))
  finally:  # also on Interrupted: the forced save finishes before the process ends
    bar.close()
    writer.close()
    saves.close()
  return last_eval

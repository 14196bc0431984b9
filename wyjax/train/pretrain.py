"""MLM pretraining: one jitted, donated step over a (data, fsdp, tensor) mesh.

`train_and_evaluate(config, workdir)` is the whole run: prepare (or find) the corpus, build
the sharded state, resume from the workdir's latest readable checkpoint, train, evaluate,
checkpoint every N steps, at the end and on SIGTERM/SIGINT.
"""
import logging
import pathlib
import signal
import sys
import time

import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
import tqdm
from jax.experimental import multihost_utils

from wyjax.data import pipeline, prepare
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.data.corpus import cache_dir
from wyjax.models import EncoderConfig, MaskedLM
from wyjax.train import checkpoints, distributed, metrics, mlm, optimizer, partitioning

DATA_ITER = "data_iter"


def base_config() -> ml_collections.ConfigDict:
  """Training defaults shared by configs/pretrain/*.py (which set model, corpus and sizes)."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.model = ml_collections.ConfigDict()  # EncoderConfig fields; vocab_size comes from the corpus
  c.corpus = ml_collections.ConfigDict(dict(
      source="poetry", sequence_length=128, valid_fraction=0.01, t2s=True, char_filter="none",
      min_count=1, max_vocab=0, vocab="", workers=0))
  # Prepared corpus folder; empty: <cache>/corpora/<source>-<sequence_length>.
  c.data_dir = ""
  c.masking = ml_collections.ConfigDict(dict(
      rate=0.15, max_ngram=3, ngram_distribution="harmonic", mask_prob=0.8, random_prob=0.1))
  c.batch_size = 64  # global, in sequences
  c.grad_accum_steps = 1
  c.num_train_steps = 1000
  c.warmup_steps = 100
  c.learning_rate = 1e-4
  c.weight_decay = 0.01
  c.b1, c.b2, c.eps = 0.9, 0.999, 1e-6
  c.max_grad_norm = 1.0
  c.dtype = "float32"  # activations; "bfloat16" on accelerators
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.logical_axis_rules = [("vocab", "tensor"), ("embed", "fsdp"), ("heads", "tensor"), ("kv", None),
                          ("mlp", "tensor")]
  c.log_every = 50
  c.eval_every = 500
  c.eval_batches = 20
  c.checkpoint_every = 1000
  c.keep_checkpoints = 3
  c.async_checkpointing = True
  c.peak_flops_per_device = 0.0  # 0: from the device kind (none on CPU: no MFU)
  return c


def prepared_data_dir(config) -> pathlib.Path:
  """config.data_dir when it holds a prepared corpus (used as is); otherwise config.corpus is
  prepared into it, or into <cache>/corpora/<source>-<length> (idempotent), by process 0."""
  corpus = config.corpus
  if config.data_dir and (pathlib.Path(config.data_dir) / prepare.MANIFEST).exists():
    return pathlib.Path(config.data_dir)
  name = f"{corpus.source.replace(':', '-').replace('/', '_')}-{corpus.sequence_length}"
  data_dir = pathlib.Path(config.data_dir or cache_dir() / "corpora" / name)
  if jax.process_index() == 0:
    options = prepare.Options(
        source=corpus.source, sequence_length=corpus.sequence_length, valid_fraction=corpus.valid_fraction,
        t2s=corpus.t2s, char_filter=corpus.char_filter, min_count=corpus.min_count,
        max_vocab=corpus.max_vocab or None)
    prepare.prepare_corpus(data_dir, options, vocab_dir=corpus.vocab or None,
                           workers=corpus.workers or None, log=logging.info)
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("corpus prepared")
  return data_dir


def make_train_step(model, tx, schedule, config, tokenizer, length: int):
  mask_kwargs = dict(
      mask_id=tokenizer.mask_id, vocab_size=len(tokenizer),
      special_ids=(tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.unk_id),
      rate=config.masking.rate, max_ngram=config.masking.max_ngram,
      ngram_distribution=config.masking.ngram_distribution, mask_prob=config.masking.mask_prob,
      random_prob=config.masking.random_prob)

  k = mlm.max_predictions(length, config.masking.rate)

  def predict(params, inputs, targets, weights, attention_mask, **kwargs):
    positions, weights = mlm.prediction_positions(weights, k)
    logits = model.apply({"params": params}, inputs, attention_mask, predict_positions=positions, **kwargs)
    return mlm.loss_sums(logits, jnp.take_along_axis(targets, positions, axis=-1), weights)

  def loss_fn(params, inputs, targets, weights, attention_mask, rng):
    sums = predict(params, inputs, targets, weights, attention_mask, deterministic=False, rngs={"dropout": rng})
    return sums["loss_sum"], sums

  def train_step(state, batch):
    step = state["step"]
    mask_rng, dropout_rng = jax.random.split(jax.random.fold_in(jax.random.key(config.seed), step))
    inputs, targets, weights = mlm.mask_tokens(mask_rng, batch, **mask_kwargs)
    attention_mask = (batch != tokenizer.pad_id).astype(jnp.int32)
    grad_fn = jax.grad(loss_fn, has_aux=True)
    accum = config.grad_accum_steps
    if accum == 1:
      grads, sums = grad_fn(state["params"], inputs, targets, weights, attention_mask, dropout_rng)
    else:
      micro = jax.tree_util.tree_map(
          lambda x: x.reshape(accum, x.shape[0] // accum, *x.shape[1:]),
          (inputs, targets, weights, attention_mask))

      def accumulate(carry, xs):
        i, micro_batch = xs
        g, s = grad_fn(state["params"], *micro_batch, jax.random.fold_in(dropout_rng, i))
        return jax.tree_util.tree_map(jnp.add, carry, (g, s)), None

      zeros = jax.tree_util.tree_map(jnp.zeros_like, state["params"])
      zero_sums = {"loss_sum": 0.0, "correct": 0.0, "weight": 0.0}
      (grads, sums), _ = jax.lax.scan(accumulate, (zeros, zero_sums), (jnp.arange(accum), micro))
    weight = jnp.maximum(sums["weight"], 1.0)
    grads = jax.tree_util.tree_map(lambda g: g / weight, grads)
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    new_state = {"step": step + 1, "params": optax.apply_updates(state["params"], updates),
                 "opt_state": opt_state}
    return new_state, {"loss": sums["loss_sum"] / weight, "mlm_accuracy": sums["correct"] / weight,
                       "grad_norm": optax.global_norm(grads), "learning_rate": schedule(step),
                       "masked_fraction": jnp.sum(weights) / jnp.sum(attention_mask)}

  def eval_step(params, batch, index):
    inputs, targets, weights = mlm.mask_tokens(
        jax.random.fold_in(jax.random.key(config.seed + 1), index), batch, **mask_kwargs)
    return predict(params, inputs, targets, weights, (batch != tokenizer.pad_id).astype(jnp.int32))

  return train_step, eval_step


def unigram_entropy(batches, tokenizer) -> float:
  """Entropy (nats) of the token distribution of the evaluation batches themselves: the loss
  of the best predictor that ignores context, the floor a useful MLM must beat."""
  ids = np.concatenate([b.ravel() for b in batches])
  ids = ids[~np.isin(ids, [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id])]
  p = np.bincount(ids) / len(ids)
  p = p[p > 0]
  return float(-(p * np.log(p)).sum())


class _StopSignal:
  """SIGTERM/SIGINT set a flag; the loop checkpoints and returns at the next step."""

  def __init__(self):
    self.received = None
    for sig in (signal.SIGTERM, signal.SIGINT):
      signal.signal(sig, self._handle)

  def _handle(self, signum, frame):
    logging.warning("received signal %d: checkpointing and stopping", signum)
    self.received = signum

  def should_stop(self) -> bool:
    flag = np.array(self.received is not None)
    if jax.process_count() > 1:  # every process stops at the same step
      flag = multihost_utils.process_allgather(flag).any()
    return bool(flag)


def _restore(mngr, abstract_state, train_iter):
  """Latest readable checkpoint → (state, step); an unreadable one is moved aside, never
  deleted, and the previous one is tried."""
  for step in sorted(mngr.all_steps(), reverse=True):
    try:
      restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
          abstract_state, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract_state))))
    except Exception as e:  # orbax raises many types for truncated or corrupted files
      logging.warning("checkpoint %d is unreadable (%s: %s); falling back to the previous one",
                      step, type(e).__name__, str(e)[:300])
      if jax.process_index() == 0:
        step_dir = pathlib.Path(mngr.directory) / str(step)
        step_dir.rename(step_dir.with_name(f"unreadable-{step}-{int(time.time())}"))
      if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"moved aside {step}")
      mngr.reload()
      continue
    try:
      mngr.restore(step, args=ocp.args.Composite(**{DATA_ITER: grain.checkpoint.CheckpointRestore(train_iter)}))
    except Exception as e:  # e.g. saved with another number of processes
      logging.warning("data iterator state of step %d not restored (%s); repositioning by step", step, e)
      train_iter.set_state({"next_index": step})
    return restored[checkpoints.STATE], step
  return None, 0


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Runs (or resumes) pretraining in workdir; returns the last evaluation metrics."""
  distributed.initialize()
  workdir = pathlib.Path(workdir)
  is_main = jax.process_index() == 0
  data_dir = prepared_data_dir(config)
  tokenizer = tokenizer_lib.Tokenizer.load(data_dir / "tokenizer")
  model_config = EncoderConfig(**{**config.model.to_dict(), "vocab_size": len(tokenizer), "dtype": config.dtype})
  model = MaskedLM(model_config)
  length = prepare.read_manifest(data_dir)["sequence_length"]

  # --- mesh and sharded state ------------------------------------------------------------------
  mesh = partitioning.make_mesh(config.mesh.to_dict())
  logical_rules = partitioning.rules(config.logical_axis_rules)
  tx, schedule = optimizer.adamw(
      learning_rate=config.learning_rate, warmup_steps=config.warmup_steps, total_steps=config.num_train_steps,
      b1=config.b1, b2=config.b2, eps=config.eps, weight_decay=config.weight_decay,
      max_grad_norm=config.max_grad_norm)
  dummy = jnp.zeros((1, length), jnp.int32)

  def init_state(rng):
    params = nn.unbox(model.init(rng, dummy)["params"])
    return {"step": jnp.zeros((), jnp.int32), "params": params, "opt_state": tx.init(params)}

  boxed_params = jax.eval_shape(lambda: model.init(jax.random.key(0), dummy)["params"])
  abstract = jax.eval_shape(init_state, jax.random.key(0))
  params_sharding = partitioning.param_shardings(boxed_params, mesh, logical_rules)
  state_sharding = partitioning.state_shardings(abstract, params_sharding, tx, mesh)
  abstract_state = jax.tree_util.tree_map(
      lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, state_sharding)

  # --- data and checkpoints ------------------------------------------------------------------------
  train_iter = iter(pipeline.train_dataset(
      data_dir, global_batch_size=config.batch_size, seed=config.seed,
      process_index=jax.process_index(), process_count=jax.process_count()))
  eval_batches = pipeline.eval_batches(
      data_dir, global_batch_size=config.batch_size, num_batches=config.eval_batches,
      process_index=jax.process_index(), process_count=jax.process_count())
  if is_main:
    checkpoints.write_model_info(workdir, model_config.replace(dtype="float32"), ["mlm_head"], tokenizer)
  mngr = checkpoints.manager(
      workdir, max_to_keep=config.keep_checkpoints, extra_handlers={DATA_ITER: grain.checkpoint.CheckpointHandler()},
      save_decision_policy=ocp.checkpoint_managers.FixedIntervalPolicy(config.checkpoint_every),
      enable_async_checkpointing=config.async_checkpointing)
  state, start_step = _restore(mngr, abstract_state, train_iter)
  if state is None:
    state = jax.jit(init_state, out_shardings=state_sharding)(jax.random.key(config.seed))
  else:
    logging.info("resumed from step %d", start_step)

  # --- steps ------------------------------------------------------------------------------------
  train_step, eval_step = make_train_step(model, tx, schedule, config, tokenizer, length)
  data_sharding = partitioning.batch_sharding(mesh)
  replicated = partitioning.replicated(mesh)
  jit_train = jax.jit(train_step, in_shardings=(state_sharding, data_sharding),
                      out_shardings=(state_sharding, replicated), donate_argnums=(0,))
  jit_eval = jax.jit(eval_step, in_shardings=(params_sharding, data_sharding, None), out_shardings=replicated)

  def global_batch(local):
    return jax.make_array_from_process_local_data(data_sharding, local)

  entropy = unigram_entropy(eval_batches, tokenizer)
  eval_arrays = [global_batch(b) for b in eval_batches]  # on device once, reused at every evaluation

  def evaluate(params) -> dict:
    totals = {"loss_sum": 0.0, "correct": 0.0, "weight": 0.0}
    for i, batch in enumerate(eval_arrays):
      sums = jax.device_get(jit_eval(params, batch, i))
      totals = {k: totals[k] + float(sums[k]) for k in totals}
    loss = totals["loss_sum"] / max(totals["weight"], 1.0)
    return {"valid_loss": loss, "valid_accuracy": totals["correct"] / max(totals["weight"], 1.0),
            "valid_perplexity": float(np.exp(loss)), "valid_unigram_entropy": entropy}

  # --- loop ---------------------------------------------------------------------------------------
  writer = metrics.MetricWriter(workdir, enabled=is_main)
  tokens_per_step = config.batch_size * length
  peak = metrics.peak_flops_per_device(config.peak_flops_per_device or None)
  predicted_fraction = mlm.max_predictions(length, config.masking.rate) / length
  train_flops_per_step = 3 * metrics.forward_flops_per_token(model_config, length, predicted_fraction) * tokens_per_step
  stop = _StopSignal()
  batch = global_batch(next(train_iter)) if start_step < config.num_train_steps else None
  compile_start = time.perf_counter()
  if batch is not None:
    jit_train = jit_train.lower(state, batch).compile()
    writer.write(start_step, {"compile_seconds": time.perf_counter() - compile_start})
  bar = tqdm.tqdm(total=config.num_train_steps, initial=start_step, disable=not (is_main and sys.stderr.isatty()),
                  file=sys.stderr, unit="step")
  last_eval, last_time, last_step = {}, time.perf_counter(), start_step
  step = start_step
  while step < config.num_train_steps:
    state, step_metrics = jit_train(state, batch)
    step += 1
    bar.update()
    if step % config.log_every == 0 or step == config.num_train_steps:
      step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
      elapsed = time.perf_counter() - last_time
      steps = step - last_step
      step_metrics.update(step_seconds=elapsed / steps, tokens_per_second=steps * tokens_per_step / elapsed)
      if peak:
        step_metrics["mfu"] = steps * train_flops_per_step / elapsed / (peak * jax.device_count())
      writer.write(step, step_metrics)
      bar.set_postfix(loss=f"{step_metrics['loss']:.3f}")
      last_time, last_step = time.perf_counter(), step
    if step % config.eval_every == 0 or step == config.num_train_steps:
      last_eval = evaluate(state["params"])
      writer.write(step, last_eval)
      logging.info("step %d: %s", step, last_eval)
    stopping = stop.should_stop()
    mngr.save(step, args=ocp.args.Composite(
        state=ocp.args.PyTreeSave(state), **{DATA_ITER: grain.checkpoint.CheckpointSave(train_iter)}),
        force=stopping or step == config.num_train_steps)
    if stopping:
      break
    if step < config.num_train_steps:
      # After the save, so a checkpoint's iterator state points at the next step's batch.
      batch = global_batch(next(train_iter))
  bar.close()
  mngr.wait_until_finished()
  mngr.close()
  writer.close()
  return last_eval

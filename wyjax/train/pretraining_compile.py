"""A pretraining run's train step compiled for a topology without running it: the compile-only report."""

import jax
import jax.numpy as jnp
import ml_collections

from wyjax.aot import report, targets
from wyjax.core import guards
from wyjax.core.host_memory import buffer_bytes
from wyjax.data import prepare
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.train import config_values, continuing
from wyjax.train.pretraining import build
from wyjax.train.pretraining_corpus import corpus_dir


def compile_only(config: ml_collections.ConfigDict, topology: str, typed=()) -> dict:
  """Compiles the run's train step for `topology` (targets.devices) without running it; returns report.report's figures.

  For "local" the figures add the evaluation step's buffers (evaluation_bytes_per_chip). The
  vocabulary is the prepared corpus's tokenizer when there is one, else config.model.vocab_size
  tokens (config.init's size) at config.corpus's length. typed: see pretraining.train_and_evaluate.

  Raises:
    DoesNotFit: the step needs more memory than the chips have.
  """
  config_values.check(config, config_values.PRETRAINING)
  devices = targets.devices(topology)
  data_dir = corpus_dir(config)
  architecture = continuing.architecture(continuing.local_init(config.init), config, typed) if config.init else None
  if (data_dir / prepare.MANIFEST).exists():
    tokenizer = tokenizer_lib.Tokenizer.load(data_dir / "tokenizer")
    length = prepare.read_manifest(data_dir)["sequence_length"]
    config_values.check_decided(config, {"model.vocab_size": len(tokenizer)}, f"the corpus {data_dir}", typed)
  elif architecture:  # the checkpoint's own vocabulary
    tokenizer, length = tokenizer_lib.placeholder(architecture["vocab_size"]), config.corpus.sequence_length
  else:
    if not config.model.get("vocab_size"):
      raise guards.RunError("no prepared corpus: set --config.model.vocab_size (or --config.data_dir) to compile")
    if not len(tokenizer_lib.SPECIAL_TOKENS) <= config.model.vocab_size <= tokenizer_lib.MAX_VOCAB_SIZE:
      raise guards.RunError(
        f"--config.model.vocab_size={config.model.vocab_size}: a character-level vocabulary "
        f"holds {len(tokenizer_lib.SPECIAL_TOKENS)} to {tokenizer_lib.MAX_VOCAB_SIZE:,} tokens"
      )
    tokenizer, length = tokenizer_lib.placeholder(config.model.vocab_size), config.corpus.sequence_length
  run = build(config, tokenizer, length, devices, architecture)
  batch = jax.ShapeDtypeStruct((config.batch_size, length), jnp.int32, sharding=run.program.data_sharding)
  step = report.compile_step(run.train_step, run.program.abstract_state, batch, topology=topology)
  result = report.report(
    step,
    topology=topology,
    devs=devices,
    mesh=run.program.mesh,
    abstract_state=run.program.abstract_state,
    analytic_flops_per_step=run.train_flops_per_step,
    tokens_per_step=config.batch_size * length,
  )
  if topology == "local":  # the run's other program (other hardware: the train step alone)
    evaluation = run.eval_step.lower(run.program.abstract_state["params"], batch, 0).compile()
    result["evaluation_bytes_per_chip"] = buffer_bytes(evaluation.memory_analysis())
  report.check_fits(result)
  return result

"""MLM pretraining from a config.

    python -m wyjax.pretrain --config=pretrain/deberta_tiny.py --workdir=DIR [--config.x=y]
    python -m wyjax.pretrain --config=pretrain/deberta_base.py --compile_only=v5p:2x2x1
    python -m wyjax.pretrain --config=pretrain/deberta_base.py --config.batch_size=32 --compile_only=h100

--compile_only compiles the run's exact train step for a TPU topology (through libtpu, no TPU
needed), for GPUs of one host (XLA:GPU without a GPU: the 'gpu-compile' extra) or for this
machine ("local"), prints per-chip memory, FLOPs, HBM traffic and the roofline prediction (for
a GPU also its kernels per step, custom calls and largest buffers), the last line as JSON, and
exits 1 if the step does not fit (docs/scaling.md).

--config.init=PATH continues a checkpoint instead of starting from random weights: a transformers
folder (BERT, RoBERTa, DeBERTa-v2), a wyjax pretraining workdir or export, or a Hub id. Its
architecture replaces the config's model; the prepared corpus's vocabulary is the checkpoint's own
(prepare-corpus --vocab=PATH), extended (--vocab=PATH --extend_vocab) or the corpus's own (rows
transplanted); --config.freeze_encoder_steps=N trains the embeddings and MLM head alone first
(docs/pretraining.md, "Continue from a checkpoint").

Rerunning the same command resumes from the workdir's latest checkpoint; a rerun with a
changed training config is refused unless --accept_config_change. SIGTERM/SIGINT checkpoint
and exit with 128 + the signal number; a run that cannot go on exits 1 with the reason.

The corpus is --config.data_dir's, prepared beforehand (`python -m wyjax.data prepare-corpus`),
or config.corpus prepared by the run: into wyjax's cache without a data_dir, into data_dir with
--prepare_corpus (a data_dir holding no corpus is otherwise an error: a mistyped path is never filled).
The --workdir never lies inside what the run reads (its data_dir, corpus source, vocabulary or
probes' task folders), nor is it the data_dir. A --config.model.vocab_size other than the
corpus's is refused: the corpus decides the vocabulary.
"""

from absl import app, flags

from wyjax.aot import report
from wyjax.core import cli, config_files, logs, run_config
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.train import pretraining, pretraining_compile, probes

_CONFIG = config_files.DEFINE_config(
  "config", None, "Pretraining config: a name (pretrain/deberta_base.py) or a file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run folder: checkpoints, metrics.jsonl, TensorBoard.")
_ACCEPT = flags.DEFINE_bool(
  "accept_config_change", False, "Resume a workdir whose run was made with another config (the changes are logged)."
)
_PREPARE_CORPUS = flags.DEFINE_bool(
  "prepare_corpus",
  False,
  "Prepare config.corpus into --config.data_dir when that folder holds no prepared "
  "corpus (without it, that is an error: a mistyped path is never filled).",
)
_COMPILE_ONLY = flags.DEFINE_string(
  "compile_only",
  None,
  "Only compile the train step for this TPU topology (v5p:2x2x1, v4:2x2x4, "
  "v5e:16x16, ...), these GPUs of one host (h100, h200, a100; h100:8) or 'local', "
  "and report its cost; runs nothing.",
)
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  config = _CONFIG.value
  if _WORKDIR.value:  # before its log goes there (with --compile_only too): a refused workdir gets no file
    read = {
      "--config.data_dir": config.data_dir,
      "--config.corpus.source": config.corpus.source.partition(":")[2],
      "--config.corpus.vocab": config.corpus.vocab,
      "--config.init": config.init,
      **{f"--config.probes' {task}": folder for task, folder in probes.parse(config.probes)},
    }
    run_config.check_reads(_WORKDIR.value, (), read, "pretraining")
  with cli.nothing_left_if_refused(_WORKDIR.value, "pretrain.log"):
    _run(config)


def _run(config):
  logs.to_file(_WORKDIR.value, "pretrain")
  use_compilation_cache(_COMPILE_ONLY.value)
  typed = config_files.typed(_CONFIG)
  if _COMPILE_ONLY.value:
    report.print_report(pretraining_compile.compile_only(config, _COMPILE_ONLY.value, typed))
    return
  if not _WORKDIR.value:
    raise app.UsageError("--workdir is required (except with --compile_only)")
  result = pretraining.train_and_evaluate(
    config, _WORKDIR.value, accept_config_change=_ACCEPT.value, prepare_corpus=_PREPARE_CORPUS.value, typed=typed
  )
  if result:
    print("final evaluation: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))


if __name__ == "__main__":
  cli.run(main)

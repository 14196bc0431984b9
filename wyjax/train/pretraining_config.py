"""A pretraining run's config: its defaults, the keys a resumed run may change, the keys that name places."""

import ml_collections

from wyjax.core import partitioning
from wyjax.core.storage import hub_id, place
from wyjax.data.corpus import source_place
from wyjax.train import replaced_tokens


def base_config() -> ml_collections.ConfigDict:
  """Training defaults shared by configs/pretrain/*.py (which set model, corpus and sizes)."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.model = ml_collections.ConfigDict()  # EncoderConfig fields; vocab_size comes from the corpus
  # A checkpoint to continue (wyjax.train.continuing): a transformers folder, a wyjax pretraining
  # workdir or export, or a Hub id. Its architecture replaces `model`; "": random weights.
  c.init = ""
  c.freeze_encoder_steps = 0  # steps that train only the embeddings and the heads, before all
  # "mlm": masked-language modelling; "rtd": replaced-token detection (ELECTRA, DeBERTa-v3): a generator
  # trained by MLM replaces masked tokens, the encoder kept learns to tell which (wyjax.train.replaced_tokens).
  c.objective = "mlm"
  c.rtd = replaced_tokens.defaults()  # the generator's size and start, λ, the embedding sharing
  c.corpus = ml_collections.ConfigDict(
    dict(
      source="poetry",
      sequence_length=128,
      valid_fraction=0.01,
      t2s=True,
      char_filter="none",
      min_count=1,
      max_vocab=0,
      vocab="",
      extend_vocab=False,
      workers=0,
    )
  )
  # Prepared corpus folder; empty: <cache>/corpora/<source>-<sequence_length>.
  c.data_dir = ""
  c.masking = ml_collections.ConfigDict(
    dict(rate=0.15, max_ngram=3, ngram_distribution="harmonic", mask_prob=0.8, random_prob=0.1)
  )
  c.batch_size = 64  # global, in sequences
  c.grad_accum_steps = 1
  c.num_train_steps = 1000
  c.warmup_steps = 100
  c.learning_rate = 1e-4
  c.weight_decay = 0.01
  c.b1, c.b2, c.eps = 0.9, 0.999, 1e-6
  c.max_grad_norm = 1.0
  c.dtype = "float32"  # activations; "bfloat16" on accelerators
  c.remat = "none"  # per layer: "none", "full" (recompute it in the backward pass), "dots" (keep matmul outputs)
  c.scan_layers = False  # nn.scan over the layers: one compiled layer, params stacked (model.json records it)
  c.scan_unroll = 1  # scanned layers per loop iteration; ≥ the layers: no loop, params still stacked
  c.attention = "auto"  # "auto", "xla", "pallas" (fused kernels) or "cudnn_dropout" (wyjax.models.attention)
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.logical_axis_rules = partitioning.LOGICAL_AXIS_RULES  # params' and activations' logical axes → mesh
  c.log_every = 50
  c.eval_every = 500
  c.eval_batches = 20
  c.probes = ""  # "TASK:FOLDER,…": linear probes of those tasks at step 0 and each evaluation (wyjax.train.probes)
  c.probe_examples = 1024  # training examples each probe fits
  c.checkpoint_every = 1000
  c.keep_checkpoints = 3
  c.async_checkpointing = True
  c.peak_flops_per_device = 0.0  # 0: from the device kind (none on CPU: no MFU)
  c.max_nonfinite_steps = 10  # non-finite steps in a row (each skipped) before the run stops
  c.stop_check_every = 10  # steps between the processes' agreement on a stop signal (multi-host)
  return c


# Keys that change how a run executes or is observed, not what it trains: a resumed run may
# change them freely (wyjax.core.run_config).
RESUMABLE_CHANGES = (
  "mesh",
  "logical_axis_rules",
  "log_every",
  "eval_every",
  "eval_batches",
  "checkpoint_every",
  "keep_checkpoints",
  "async_checkpointing",
  "peak_flops_per_device",
  "corpus.workers",
  "stop_check_every",
  "max_nonfinite_steps",
  "remat",
  "scan_unroll",
  "attention",
  "probes",
  "probe_examples",
)

# Keys that name files or folders: one place, however spelled, is no change (run_config.check_config).
PLACES = {
  "data_dir": place,
  "corpus.vocab": place,
  "corpus.source": source_place,
  "init": lambda init: init if hub_id(init) else place(init),
}

"""DeBERTa-base as WYWEB pretrained it on Daizhige (bozhou/DeBERTa-base's architecture).

A real run (the released checkpoint was saved at step 500,000):

    python -m wyjax.data prepare-corpus --source=daizhige:/data/daizhigev20 --out=/data/daizhige-512
    python -m wyjax.pretrain --config=pretrain/deberta_base.py --workdir=/ckpt/deberta-base \\
        --config.data_dir=/data/daizhige-512

Global batch 256 × 512 tokens, 500k steps (65.5 B tokens, about 20 epochs of Daizhige's 3.3 B
characters), peak lr 1e-4 after 10k warm-up steps, bf16: budget several days on one H100
(docs/benchmarks.md); on a v4-32 use data parallelism (docs/distributed.md). No attention dropout, as
configs/pretrain/bert_base.py: a GPU trains through cuDNN's fused attention, the relative terms reaching
it as a bf16 bias (docs/models.md).

Expected, compiled on a CPU (predictions, not measurements; docs/scaling.md): for one H100 at 32 × 512,
9.3 GiB of buffers and 1,153 kernels; for a v5p-8, predicted with attention dropout 0.1, 7.1 GiB HBM per
chip and 31 ms per step (compute-bound), 2.09 M tokens/s, an MFU ceiling of 75% (with
--config.attention=xla: 14.4 GiB and 2.3 s per step):

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/deberta_base.py \\
        --compile_only=v5p:2x2x1 --config.batch_size=128

The same file describes the architecture for a randomly initialised export:

    python -m wyjax.export --random_init=pretrain/deberta_base.py --out=/tmp/deberta-base --verify
"""

from wyjax.train.pretraining_config import base_config


def get_config():
  config = base_config()
  config.model = dict(
    model_type="deberta-v2",
    vocab_size=22669,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    hidden_act="gelu",
    max_position_embeddings=512,
    type_vocab_size=0,
    layer_norm_eps=1e-7,
    relative_attention=True,
    max_relative_positions=-1,
    position_buckets=128,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    attention_probs_dropout_prob=0.0,
  )
  config.corpus.source = "daizhige:/data/daizhigev20"
  config.corpus.sequence_length = 512
  config.corpus.max_vocab = 22669
  config.masking.max_ngram = 3
  config.batch_size = 256
  config.num_train_steps = 500_000
  config.warmup_steps = 10_000
  config.learning_rate = 1e-4
  config.dtype = "bfloat16"
  config.scan_layers, config.scan_unroll = True, 12  # stacked params, no loop: one update kernel per parameter
  config.log_every = 100
  config.eval_every = 5000
  config.checkpoint_every = 5000
  return config

"""DeBERTa-large on Daizhige: 24 layers, 1024 hidden, 16 heads, 4096 FFN, otherwise WYWEB's DeBERTa-base recipe.

    python -m wyjax.pretrain --config=pretrain/deberta_large.py --workdir=/ckpt/deberta-large \\
        --config.data_dir=/data/daizhige-512

Global batch 512 × 512, 300k steps, peak lr 5e-5. The mesh shards parameters and moments over `fsdp`
(docs/distributed.md).

Expected, compiled on a CPU (predictions, not measurements; docs/scaling.md), as --config.attention=xla
(before the fused TPU attention kernels; recompile to see the default's figures): 17.3 GiB HBM per chip
of 88.5, 3.1 s per step, memory-bound on the relative-attention gathers (170 k tokens/s, MFU ceiling
1.3%); on v5e-256 (`v5e:16x16`, batch 4096) 14.2 of 14.9 GiB.

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/deberta_large.py \\
        --compile_only=v5p:4x4x4 --config.batch_size=1024
"""

from wyjax.train.pretraining_config import base_config


def get_config():
  config = base_config()
  config.model = dict(
    model_type="deberta-v2",
    vocab_size=22669,
    hidden_size=1024,
    num_hidden_layers=24,
    num_attention_heads=16,
    intermediate_size=4096,
    max_position_embeddings=512,
    type_vocab_size=0,
    relative_attention=True,
    position_buckets=128,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
  )
  config.corpus.source = "daizhige:/data/daizhigev20"
  config.corpus.sequence_length = 512
  config.corpus.max_vocab = 22669
  config.batch_size = 512
  config.num_train_steps = 300_000
  config.warmup_steps = 10_000
  config.learning_rate = 5e-5
  config.dtype = "bfloat16"
  # ~7 GB of fp32 state fits one accelerator; FSDP over 8+ devices leaves room for larger per-device batches.
  config.mesh.data = 1
  config.mesh.fsdp = -1
  config.log_every = 100
  config.eval_every = 5000
  config.checkpoint_every = 5000
  return config

"""BERT-base on Daizhige (absolute positions, token types, per-character masking), as SIKU-BERT and guwenbert.

    python -m wyjax.pretrain --config=pretrain/bert_base.py --workdir=/ckpt/bert-base \\
        --config.data_dir=/data/daizhige-512

Global batch 256 × 512, 500k steps, peak lr 1e-4, bf16. No attention dropout (hidden dropout stays 0.1),
as MosaicBERT and ModernBERT pretrain: a GPU then trains through cuDNN's flash attention with wyjax's own
dropout masks, drawn from (seed, step): exact resume, different masks per device (docs/models.md). Models
fine-tuned from this one inherit the 0.

Expected, compiled on a CPU (predictions, not measurements; docs/scaling.md): for one H100 at 32 × 512,
794 kernels per step and 9.0 GiB of buffers; for a v5p-8, predicted with attention dropout 0.1, 6.9 GiB
HBM per chip, 26 ms per step (memory-bound), 2.49 M tokens/s and an MFU ceiling of 80% (with
--config.attention=xla: 12.6 GiB, 38 ms, 56%):

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/bert_base.py \\
        --compile_only=v5p:2x2x1 --config.batch_size=128
"""

from wyjax.train.pretraining_config import base_config


def get_config():
  config = base_config()
  config.model = dict(
    model_type="bert",
    vocab_size=22669,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
    attention_probs_dropout_prob=0.0,
  )
  config.corpus.source = "daizhige:/data/daizhigev20"
  config.corpus.sequence_length = 512
  config.corpus.max_vocab = 22669
  config.masking.max_ngram = 1
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

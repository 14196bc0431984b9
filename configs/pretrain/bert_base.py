"""BERT-base (absolute positions, token types, per-character masking) on Daizhige, the
architecture of SIKU-BERT and guwenbert, for comparison with DeBERTa-base.

    python -m wyjax.pretrain --config=pretrain/bert_base.py --workdir=/ckpt/bert-base \\
        --config.data_dir=/data/daizhige-512

Global batch 256 × 512, 500k steps, peak lr 1e-4, bf16.

Checked for a v5p-8 before renting it (docs/scaling.md; predictions, not measurements):

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/bert_base.py \
        --compile_only=v5p:2x2x1 --config.batch_size=128

predicts, with flash attention (the fused kernel attention="auto" picks on TPU), 6.9 GiB HBM
per chip, 26 ms per step (memory-bound), 2.49 M tokens/s and an MFU ceiling of 80%; with
--config.attention=xla 12.6 GiB, 38 ms and 56%.
"""
from wyjax.train.pretraining import base_config


def get_config():
  config = base_config()
  config.model = dict(
      model_type="bert", vocab_size=22669, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
      intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12)
  config.corpus.source = "daizhige:/data/daizhigev20"
  config.corpus.sequence_length = 512
  config.corpus.max_vocab = 22669
  config.masking.max_ngram = 1
  config.batch_size = 256
  config.num_train_steps = 500_000
  config.warmup_steps = 10_000
  config.learning_rate = 1e-4
  config.dtype = "bfloat16"
  config.log_every = 100
  config.eval_every = 5000
  config.checkpoint_every = 5000
  return config

"""A tiny DeBERTa-v2 pretrained on the chinese-poetry corpus: the embedded default.

    python -m wyjax.pretrain --config=pretrain/deberta_tiny.py --workdir=/tmp/tiny

On a fresh 2-core CPU machine: fetches chinese-poetry 2.0.1 with npm (85 MB), prepares it
(25 M characters, about a minute), then trains; expected validation MLM loss and the
unigram-entropy baseline are in docs/benchmarks.md.

On a pod, checked before renting it (the real step compiled by libtpu on a CPU host,
docs/scaling.md; predictions, not measurements):

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/deberta_tiny.py \
        --compile_only=v5p:2x2x1 --config.batch_size=256

predicts 0.33 GiB HBM per chip and 80 ms per step (memory-bound: 206 GiB of HBM traffic per
chip, nearly all the relative-attention gathers), 0.41 M tokens/s, an MFU ceiling of 0.1%.
"""
from wyjax.train.pretraining import base_config


def get_config():
  config = base_config()
  config.model = dict(
      model_type="deberta-v2", vocab_size=13763, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=256, max_position_embeddings=128, type_vocab_size=0, relative_attention=True,
      position_buckets=32, pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
      position_biased_input=False, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
  config.corpus.source = "poetry"
  config.corpus.sequence_length = 128
  config.batch_size = 16
  config.num_train_steps = 1500
  config.warmup_steps = 150
  config.learning_rate = 2e-3
  config.log_every = 50
  config.eval_every = 250
  config.eval_batches = 40
  config.checkpoint_every = 500
  return config

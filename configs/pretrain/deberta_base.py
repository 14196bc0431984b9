"""The WYWEB DeBERTa-base architecture (bozhou/DeBERTa-base): 12 layers, 768 hidden, 12 heads,
3072 FFN, relative attention with 128 log buckets, shared keys, LayerNorm'ed relative
embeddings, p2c|c2p, no absolute positions, no token types, a char vocabulary of 22,669.

Export it randomly initialised and check transformers reproduces its logits:

    python -m wyjax.export --random_init=configs/pretrain/deberta_base.py --out=/tmp/deberta-base --verify
"""
import ml_collections


def get_config():
  config = ml_collections.ConfigDict()
  config.seed = 0
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
  )
  return config

"""A tiny pretraining config for the tests (fast to compile, fp32, logs every step)."""

from wyjax.train.pretraining_config import base_config


def get_config():
  config = base_config()
  config.model = dict(
    model_type="deberta-v2",
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    relative_attention=True,
    position_buckets=16,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
  )
  config.batch_size = 8
  config.num_train_steps = 6
  config.warmup_steps = 2
  config.learning_rate = 1e-3
  config.log_every = 1
  config.eval_every = 1000
  config.eval_batches = 2
  config.checkpoint_every = 2
  config.async_checkpointing = False
  return config

"""A tiny DeBERTa-v2 pretrained on the chinese-poetry corpus: the embedded default.

    python -m wyjax.pretrain --config=pretrain/deberta_tiny.py --workdir=/tmp/tiny

It fetches chinese-poetry 2.0.1 with npm (85 MB), prepares it (25 M characters into sequences of 64, a
vocabulary of its 6,000 most frequent characters, 99.7% of the text), then trains 1,500 steps of 32 × 64
tokens with 30% of them masked (n-grams); the demo's sweep chose this recipe (docs/history/demo_recipe.md).

Expected on a 2-core CPU machine: validation MLM loss 5.64 at step 1,500; fine-tuned by
`python -m wyjax.demo` (lr 1e-3, PUNC 300 steps, TLC 750), PUNC F1 80.72 dev / 77.16 test and TLC
dynasty accuracy 80.09 / 80.72, against 42.08 / 41.82 and 76.67 / 79.37 for the linear baseline and
0.00 / 0.00 and 77.76 / 77.28 for this architecture from random weights.

On a pod, compiled on a CPU (predictions, not measurements; docs/scaling.md): 0.26 GiB HBM per chip and
1.3 ms per step (memory-bound: 3.3 GiB of HBM traffic per chip), 12.8 M tokens/s, an MFU ceiling of 3.1%:

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/deberta_tiny.py \\
        --compile_only=v5p:2x2x1 --config.batch_size=256
"""

from wyjax.train.pretraining_config import base_config


def get_config():
  config = base_config()
  config.model = dict(
    model_type="deberta-v2",
    vocab_size=6000,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=128,
    type_vocab_size=0,
    relative_attention=True,
    position_buckets=32,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
  )
  config.corpus.source = "poetry"
  config.corpus.sequence_length = 64  # poems are short (62 characters on average in the demo's tasks)
  config.corpus.max_vocab = 6000
  config.masking.rate = 0.3
  config.batch_size = 32
  config.num_train_steps = 1500
  config.warmup_steps = 150
  config.learning_rate = 2e-3
  config.log_every = 50
  config.eval_every = 500
  config.eval_batches = 20
  config.checkpoint_every = 500
  return config

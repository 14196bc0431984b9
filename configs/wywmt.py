"""WYWMT: classical → modern Chinese translation with the encoder as a prefix LM (UniLM mask).

    python -m wyjax.finetune --config=wywmt.py --workdir=/tmp/wywmt \\
        --config.data_dir=WYWEB/wywmt --config.init=MODEL [--config.decoding.beam_size=4]

Input [CLS] source [SEP] target [SEP], next-token loss on the target (docs/finetuning.md). Checkpoints
are chosen on the BLEU of greedy translations of dev; the final dev and test translations use `decoding`
(beam 4, GNMT length penalty 0.6, at most 2 × source + 32 tokens).
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("wywmt")
  # The WYWEB script's batch size and learning rate.
  config.batch_size = 64
  config.num_epochs = 10
  config.base_learning_rate = 2e-04
  config.eval_every = 3000
  return config

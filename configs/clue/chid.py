"""ChID (CLUE): the idiom, among 7 (FewCLUE) or 10 (CLUE) candidates, that fills a blank; accuracy.

    python -m wyjax.finetune --config=clue/chid.py --workdir=/tmp/chid \\
        --config.data_dir=CLUE/chid --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json (and test1.1.json or test.json) in either released layout:
FewCLUE's ({"id", "candidates", "content" with one #idiom#, "answer"}) or CLUE's (content with several
#idiomNNNNNN# blanks, the answers in <split>_answer.json). One row per candidate: [CLS] the text with
the blank filled [SEP], 64 tokens in all. The blanks of a record take distinct idioms, as CLUE's
baseline decodes them (--config.joint_blanks=False: each on its own); the submission is submission/chid11_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("chid")
  # CLUE README's BERT-base row; fixed epochs and the best dev checkpoint, as CLUE's reading-comprehension scripts.
  config.batch_size = 24
  config.num_epochs = 3
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.06
  config.max_length = 64
  config.patience = 0
  config.keep_checkpoint = "best_dev"
  return config

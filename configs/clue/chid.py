"""ChID (CLUE): the idiom, among 7 (FewCLUE) or 10 (CLUE) candidates, that fills a blank; accuracy.

    python -m wyjax.finetune --config=clue/chid.py --workdir=/tmp/chid \\
        --config.data_dir=CLUE/chid --config.init=MODEL [--config.seeds=3]

The folder holds train.json, dev.json (and test.json) in either released layout: FewCLUE's
({"id", "candidates", "content" with one #idiom#, "answer"}) or CLUE's (content with several
#idiomNNNNNN# blanks, the answers in <split>_answer.json). One row per candidate: the blank
filled with it, 64 characters each side. Batch 24, 3 epochs, learning rate 2e-5 (CLUE's
baselines sweep 1e-5 to 3e-5); the submission is submission/chid11_predict.json. Sizes are for a
base model; for the tiny model use --config.learning_rate=1e-3."""
from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("chid")
  config.batch_size = 24
  config.num_epochs = 3
  config.learning_rate = 2e-05
  return config

"""C3 (CLUE): multiple-choice reading comprehension of dialogues (d-) and mixed-genre texts (m-),
2 to 4 choices; accuracy.

    python -m wyjax.finetune --config=clue/c3.py --workdir=/tmp/c3 \\
        --config.data_dir=CLUE/c3 --config.init=MODEL [--config.seeds=3]

The folder holds d-train.json and m-train.json, d-dev.json and m-dev.json (c3-d-train.json ...
also), JSON arrays as released; both kinds of a split are read together; the test also as
CLUE's one file of both, test1.1.json (or test.json), its questions with ids. One row per choice:
[CLS] document [SEP] question [SEP] choice [SEP], max length 512, the document cut; the
submission is submission/c311_predict.json.

Settings, CLUE's README (its per-task tables, the BERT-base row): batch 24, max length 512, 8
epochs, learning rate 2e-5; warm-up 0.1 (the README's; CLUE's run_mrc_c3.sh passes 0.05); a
fixed number of epochs (patience 0), the best dev checkpoint kept (keep_checkpoint "best_dev"),
as CLUE's reading-comprehension scripts (run_c3.py). The learning rate is the one for a
base-sized model (base_learning_rate); a smaller model gets a larger one, chosen from its size
(docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("c3")
  config.batch_size = 24
  config.num_epochs = 8
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "best_dev"
  return config

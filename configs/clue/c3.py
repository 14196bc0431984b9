"""C3 (CLUE): multiple-choice reading comprehension of dialogues (d-) and mixed-genre texts (m-); accuracy.

    python -m wyjax.finetune --config=clue/c3.py --workdir=/tmp/c3 \\
        --config.data_dir=CLUE/c3 --config.init=MODEL [--config.seeds=3]

The folder holds d-train.json and m-train.json, d-dev.json and m-dev.json (c3-d-train.json ... also),
JSON arrays as released, both kinds of a split read together; the test also as CLUE's one file of both,
test1.1.json (or test.json). One row per choice (2 to 4): [CLS] document [SEP] question [SEP] choice
[SEP], the document cut to fit 512 tokens; the submission is submission/c311_predict.json.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("c3")
  # CLUE README's BERT-base row (CLUE's run_mrc_c3.sh warms up 0.05); fixed epochs, the best dev checkpoint.
  config.batch_size = 24
  config.num_epochs = 8
  config.base_learning_rate = 2e-05
  config.warmup_fraction = 0.1
  config.patience = 0
  config.keep_checkpoint = "best_dev"
  return config

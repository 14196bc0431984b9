"""C-CLUE NER: persons, places, organisations, offices, books and wars in the dynastic histories.

    python -m wyjax.finetune --config=cclue_ner.py --workdir=/tmp/cclue_ner \\
        --config.data_dir=C-CLUE/data_ner --config.init=MODEL [--config.seeds=3]

Main score: C-CLUE's own (run_NER.py), token-level macro F1 over B/I-LOC, ORG and PER; entity-level
micro F1 over all types and per type beside it (entity_*). data_dir is C-CLUE's data_ner/ as released
(source.txt / target.txt, dev.txt / dev-lable.txt, test1.txt / test_tgt.txt) or uses train.txt /
train-label.txt, dev-label.txt, test.txt; the submission is a label file for the test sentences.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("cclue_ner")
  config.batch_size = 32
  config.num_epochs = 10
  config.base_learning_rate = 5e-05
  return config

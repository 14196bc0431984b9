"""C-CLUE relations: predicate classification, triple extraction, or the predicate between given entities.

    python -m wyjax.finetune --config=cclue_re.py --workdir=/tmp/cclue_re \\
        --config.data_dir=C-CLUE/raw_data_guwen --config.init=MODEL [--config.seeds=3]
    python -m wyjax.finetune --config=cclue_re.py:spo --workdir=/tmp/cclue_spo \\
        --config.data_dir=C-CLUE/raw_data_guwen --config.init=MODEL --config.predicates_from=/tmp/cclue_re
    python -m wyjax.finetune --config=cclue_re.py:given_entities ...

data_dir holds train_data.json, dev_data.json and test_data.json.
- The default reads the text alone and predicts one of C-CLUE's 25 predicates; accuracy is C-CLUE's
  exact predicate-set match per line; the submission is predicate_predict.txt.
- spo, the second stage of C-CLUE's pipeline, tags the subject and object in [CLS] text [SEP] predicate
  [SEP] for each record's predicate (predicted by the run in predicates_from; without it, the gold one,
  not end to end); triple F1 by evaluate_labeling.py's rules; its submission is C-CLUE's triple file.
- given_entities (not C-CLUE's task) encodes the text with its subject in 「」 and its object in 『』,
  and writes its predictions as C-CLUE triples too.
"""

from wyjax.train.finetuning import base_config

TASKS = {"text": "cclue_re", "spo": "cclue_spo", "given_entities": "cclue_re_given_entities"}


def get_config(inputs: str = "text"):
  config = base_config(TASKS[inputs])
  config.batch_size = 32
  config.num_epochs = 5
  config.base_learning_rate = 2e-05
  return config

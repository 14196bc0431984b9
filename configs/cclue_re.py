"""C-CLUE relations: C-CLUE's predicate classification (accuracy = its exact predicate-set match
per line), its end-to-end triple extraction (triple F1, evaluate_labeling.py's rules), or the
predicate between a given subject and object (not C-CLUE's task).

    python -m wyjax.finetune --config=cclue_re.py --workdir=/tmp/cclue_re \\
        --config.data_dir=C-CLUE/raw_data_guwen --config.init=MODEL [--config.seeds=3]
    python -m wyjax.finetune --config=cclue_re.py:spo --workdir=/tmp/cclue_spo \\
        --config.data_dir=C-CLUE/raw_data_guwen --config.init=MODEL --config.predicates_from=/tmp/cclue_re
    python -m wyjax.finetune --config=cclue_re.py:given_entities ...

data_dir holds train_data.json, dev_data.json and test_data.json. The default reads the text
alone and predicts one of C-CLUE's 25 predicates; the submission is predicate_predict.txt.
spo is the second stage of C-CLUE's pipeline: for each record's predicate (predicted by the
cclue_re run in predicates_from for dev and test; without it, the gold one, and the scores
are then not end to end) it tags the subject and object in [CLS] text [SEP] predicate [SEP];
its submission is C-CLUE's triple file. given_entities encodes the text with its subject in
「」 and its object in 『』 and writes its predictions as C-CLUE triples too.
The learning rate is the one for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config

TASKS = {"text": "cclue_re", "spo": "cclue_spo", "given_entities": "cclue_re_given_entities"}


def get_config(inputs: str = "text"):
  config = base_config(TASKS[inputs])
  config.batch_size = 32
  config.num_epochs = 5
  config.base_learning_rate = 2e-05
  return config

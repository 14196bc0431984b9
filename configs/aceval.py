"""AC-EVAL: four-option questions on ancient Chinese, 13 subjects in 3 categories; accuracy per
subject and category, the average of the categories.

    python -m wyjax.finetune --config=configs/aceval.py --workdir=/tmp/aceval \\
        --config.data_dir=AC-EVAL/data --config.init=MODEL \\
        [--config.zero_shot_init=A_CCPM_OR_WYWRC_RUN]

data_dir holds dev/<subject>.csv and test/<subject>.csv. Few-shot: fine-tunes config.init on
the dev questions, scored by 5-fold cross-validation (wyjax/train/aceval.py). Zero-shot: the
given multiple-choice run answers untrained. Inputs over max_length keep the options and the
question's beginning and end (tasks._aceval_featurize)."""
from wyjax.train.finetune import base_config


def get_config():
  config = base_config()
  config.task = "aceval"
  config.few_shot = True
  config.zero_shot_init = ""  # a model fine-tuned on IRC, WYWRC or CCPM: evaluated untrained
  config.folds = 5  # dev questions per subject
  config.batch_size = 8
  config.eval_batch_size = 32
  config.num_train_steps = 30  # per fold, about 4.6 passes over the 52 training questions
  config.learning_rate = 2e-05
  return config

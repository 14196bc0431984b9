"""AC-EVAL: four-option questions on ancient Chinese, 13 subjects in 3 categories; accuracy per subject and category.

    python -m wyjax.finetune --config=aceval.py --workdir=/tmp/aceval \\
        --config.data_dir=AC-EVAL/data --config.init=MODEL \\
        [--config.transfer_init=A_MULTIPLE_CHOICE_RUN]

The main score is the average of the categories. data_dir holds dev/<subject>.csv and test/<subject>.csv.
Two protocols for encoders, neither comparable with the paper's in-context prompting of LLMs
(wyjax/tasks/aceval.py):
- dev_finetune fine-tunes config.init on the 65 dev questions, scored by 5-fold cross-validation;
- transfer answers with a multiple-choice model fine-tuned on another task (IRC, WYWRC, CCPM softmax).
The test answers are not public: submission/aceval*.json is the test result, to send to AC-EVAL's authors.
"""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("aceval")  # with its options: dev_finetune, transfer_init, folds
  config.batch_size = 8
  config.eval_batch_size = 32
  config.num_train_steps = 30  # per fold, about 4.6 passes over the 52 training questions
  config.base_learning_rate = 2e-05  # Table 15's, for a base-sized model
  return config

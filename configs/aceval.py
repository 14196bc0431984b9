"""AC-EVAL: four-option questions on ancient Chinese, 13 subjects in 3 categories; accuracy per
subject and category, the average of the categories.

    python -m wyjax.finetune --config=aceval.py --workdir=/tmp/aceval \
        --config.data_dir=AC-EVAL/data --config.init=MODEL \
        [--config.transfer_init=A_MULTIPLE_CHOICE_RUN]

data_dir holds dev/<subject>.csv and test/<subject>.csv. Two protocols for encoders, neither
the paper's in-context prompting of LLMs, so neither is comparable with its numbers
(wyjax/tasks/aceval.py): dev_finetune fine-tunes config.init on the 65 dev questions, its dev
accuracy by 5-fold cross-validation; transfer answers with a multiple-choice model fine-tuned
on another task (IRC, WYWRC, CCPM softmax), untrained on AC-EVAL. The test answers are not
public: submission/aceval*.json is the test result, to send to AC-EVAL's authors. Inputs over
max_length keep the options and the question's beginning and end (wyjax/tasks/aceval.py). The
learning rate is Table 15's for a base-sized model (base_learning_rate); a smaller model gets a
larger one, chosen from its size (docs/finetuning.md)."""

from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("aceval")  # with its options: dev_finetune, transfer_init, folds
  config.batch_size = 8
  config.eval_batch_size = 32
  config.num_train_steps = 30  # per fold, about 4.6 passes over the 52 training questions
  config.base_learning_rate = 2e-05
  return config

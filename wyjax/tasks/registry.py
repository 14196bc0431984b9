"""Every fine-tuning task by name (`--config.task`, `wyjax.benchmark --tasks`)."""
from wyjax.tasks import aceval, cclue, ccpm, clue, wyweb
from wyjax.tasks.task import Task

TASKS = {t.name: t for t in (*wyweb.TASKS, *ccpm.TASKS, *cclue.TASKS, aceval.TASK, *clue.TASKS)}


def majority_baseline(task: Task, train, dev) -> dict:
  """The dev metrics of the task's majority baseline: the train split's most frequent label
  (PUNC and GLNER: every character 'O', F1 0; C-CLUE NER: each character's most frequent
  training tag; WYWMT: copying the source)."""
  return task.score(dev, task.baseline(train, dev))

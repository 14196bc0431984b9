"""Every fine-tuning task by name (`--config.task`, `wyjax.benchmark --tasks`), in the leaderboard's order.

WYWEB, the other classical benchmarks, then CLUE. A task defined elsewhere joins with `register`.
"""

from wyjax.tasks import aceval, cclue, ccpm, clue, clue_reading, wyweb
from wyjax.tasks.task import Task

TASKS = {t.name: t for t in (*wyweb.TASKS, *ccpm.TASKS, *cclue.TASKS, aceval.TASK, *clue.TASKS, *clue_reading.TASKS)}


def register(task: Task) -> Task:
  """Adds a task (a new benchmark's, a user's own) to TASKS; a name already taken is an error."""
  if task.name in TASKS:
    raise ValueError(f"a task named {task.name!r} exists already")
  TASKS[task.name] = task
  return task


def boards() -> dict[str, list[str]]:
  """{board: its tasks' names}, in the leaderboard's order: the --tasks groups."""
  out = {}
  for task in TASKS.values():
    out.setdefault(task.board, []).append(task.name)
  return out


def majority_baseline(task: Task, train, dev) -> dict:
  """The dev metrics of the task's majority baseline: the train split's most frequent label.

  PUNC and GLNER: every character 'O', F1 0; C-CLUE NER: each character's most frequent training tag; WYWMT:
  copying the source.
  """
  return task.score(dev, task.baseline(train, dev))

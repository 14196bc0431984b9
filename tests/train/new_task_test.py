"""Adding a task is one module plus one config: a toy task defined here, registered, is
fine-tuned by wyjax.benchmark's suite, shows on the leaderboard under its own board and heading,
and goes into the model card with its Hub fields, with no edit to wyjax."""

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from wyjax.hf import card
from wyjax.tasks import registry
from wyjax.tasks.files import FormatError
from wyjax.tasks.task import Files, Task, argmax, constant_baseline, per_example, single
from wyjax.train import suite

LABELS = ("no", "yes")


@dataclasses.dataclass(frozen=True)
class ToyExample:
  line: int
  text: str
  label: str


def _split_files(data_dir, split: str) -> list[pathlib.Path]:
  path = pathlib.Path(data_dir) / f"{split}.tsv"
  return [path] if path.exists() else []


def _read_split(data_dir, split: str) -> list[ToyExample] | None:
  paths = _split_files(data_dir, split)
  if not paths:
    return None
  out = []
  for line, row in enumerate(paths[0].read_text(encoding="utf-8").splitlines(), 1):
    text, label = row.split("\t")
    if label not in LABELS:
      raise FormatError(paths[0], line, f"label {label!r} is not one of {LABELS}")
    out.append(ToyExample(line, text, label))
  return out


def _featurize(example: ToyExample, tokenizer, max_length: int):
  features, cut = single(tokenizer, example.text, max_length)
  return {**features, "label": np.int32(LABELS.index(example.label))}, cut


def _prepare(task: Task, splits: dict, config) -> tuple[Task, dict]:
  """The toy's option at work: train on the first `train_examples` examples only."""
  return task, {**splits, "train": splits["train"][: config.train_examples]}


def toy_task(config_file: pathlib.Path) -> Task:
  return Task(
    name="toy_zhi",
    files=Files(
      name="toy", example_type=ToyExample, split_files=_split_files, read_split=_read_split, train_files="train.tsv"
    ),
    head="sequence",
    labels=LABELS,
    max_length=32,
    featurize=_featurize,
    decode=lambda e, f, logits: LABELS[argmax(logits)],
    score=lambda examples, predictions: {
      "accuracy": float(np.mean([p == e.label for e, p in zip(examples, predictions)]))
    },
    main_metric="accuracy",
    baseline=constant_baseline(lambda e: e.label),
    submission_format="tsv",
    submission=per_example(lambda e, p: f"{e.text}\t{p}"),
    options={"train_examples": 48},
    prepare=_prepare,
    config=str(config_file),
    board="toy benchmark",
    heading="Toy 之",
    hub_task_type="text-classification",
    benchmark="Toy",
    hub_dataset=("Toy 之", "toy-zhi"),
  )


CONFIG = '''from wyjax.train.finetuning import base_config


def get_config():
  config = base_config("toy_zhi")
  config.batch_size = 8
  config.eval_batch_size = 16
  config.num_train_steps = 6
  config.eval_every = 3
  config.log_every = 3
  config.learning_rate = 1e-3
  return config
'''


@pytest.fixture
def toy(tmp_path):
  config_file = tmp_path / "toy_config.py"
  config_file.write_text(CONFIG)
  rng = np.random.default_rng(0)
  root = tmp_path / "data"
  (root / "toy").mkdir(parents=True)
  for split, count in (("train", 64), ("dev", 16)):
    lines = []
    for _ in range(count):
      text = "".join(rng.choice(list("天地玄黄宇宙洪荒之"), size=8))
      lines.append(f"{text}\t{'yes' if '之' in text else 'no'}")
    (root / "toy" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  task = registry.register(toy_task(config_file))
  yield task, root
  del registry.TASKS[task.name]


def test_a_task_defined_outside_wyjax_runs_through_the_suite_and_the_card(toy, tmp_path):
  task, root = toy
  with pytest.raises(ValueError, match="exists already"):
    registry.register(task)
  assert suite.task_names(["toy benchmark"]) == ["toy_zhi"]
  board = suite.run(init="", data_root=root, out=tmp_path / "out", tasks=["toy_zhi"], name="tiny")
  results = json.loads((tmp_path / "out" / "toy_zhi" / "results.json").read_text())
  assert results["config"]["train_examples"] == 48  # the task's option, at its default
  assert 0.0 <= results["dev"]["accuracy"] <= 1.0 and results["labels"] == list(LABELS)
  dev_lines = (pathlib.Path(results["best_run"]) / "dev_predictions.tsv").read_text(encoding="utf-8").splitlines()
  assert len(dev_lines) == 16 and all(line.split("\t")[1] in LABELS for line in dev_lines)
  markdown = (tmp_path / "out" / "leaderboard.md").read_text(encoding="utf-8")
  assert "## toy benchmark" in markdown and "| Model | Toy 之 |" in markdown
  assert board["tasks"]["toy_zhi"] == results["dev"] and board["average"] is None
  (evaluation,) = card.eval_results(board)
  assert (evaluation.task_type, evaluation.dataset_name, evaluation.dataset_type, evaluation.task_name) == (
    "text-classification",
    "Toy 之",
    "toy-zhi",
    "TOY_ZHI",
  )
  assert card.card_data(
    {"model_type": "deberta-v2"}, name="m", license="mit", results=board, training=None, base_model=None, task_data=None
  ).datasets == ["Toy"]

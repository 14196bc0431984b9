"""The layers of docs/architecture.md hold: lower layers never import higher ones, task facts
stay in tasks/ (and head kinds in models/), module names are unique and modules small; every
exception wyjax defines pickles whole (worker processes raise them across process boundaries)."""

import ast
import collections
import importlib
import inspect
import pathlib
import pickle

import pytest

from wyjax.core import config_files
from wyjax.models.task_heads import HEADS
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "wyjax"
# Lower numbers may not import higher ones; equal numbers may import each other.
LAYERS = {"kernels": 0, "core": 0, "aot": 1, "models": 1, "data": 1, "tasks": 2, "train": 3, "hf": 3}
ENTRY_POINTS = 4  # wyjax/<command>.py and the packages' __main__.py


def _modules():
  return sorted(p for p in PACKAGE.rglob("*.py") if "configs" not in p.relative_to(PACKAGE).parts)


def _layer(path: pathlib.Path) -> int:
  parts = path.relative_to(PACKAGE).parts
  if len(parts) == 1 or path.name == "__main__.py":
    return ENTRY_POINTS if path.name != "__init__.py" else 0
  return LAYERS[parts[0]]


def _imported_layers(path: pathlib.Path):
  """(imported module, its layer) for every `wyjax.…` import, those inside functions included."""
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      names = (
        [node.module] + [f"{node.module}.{a.name}" for a in node.names] if node.module == "wyjax" else [node.module]
      )
    for name in names:
      parts = name.split(".")
      if parts[0] == "wyjax" and len(parts) > 1 and parts[1] in LAYERS:
        yield name, LAYERS[parts[1]]
      elif parts[0] == "wyjax" and len(parts) > 1:
        yield name, ENTRY_POINTS


def test_no_module_imports_a_higher_layer():
  upward = [
    f"{p.relative_to(PACKAGE)} imports {name}"
    for p in _modules()
    for name, layer in _imported_layers(p)
    if layer > _layer(p)
  ]
  assert not upward, "\n".join(upward)


def _string_constants(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      yield node.lineno, node.value


def test_no_task_name_or_head_kind_outside_tasks_and_models():
  """train/, hf/, core/ and the entry points read a Task's fields; they never name a task or a
  head kind (a new task needs no edit there)."""
  names = set(TASKS) | set(HEADS)
  outside = [p for p in _modules() if p.relative_to(PACKAGE).parts[0] not in ("tasks", "models", "kernels", "data")]
  hits = [
    f"{p.relative_to(PACKAGE)}:{line}: {value!r}"
    for p in outside
    for line, value in _string_constants(p)
    if value in names
  ]
  assert not hits, "\n".join(hits)


def test_module_names_are_unique_and_modules_small():
  modules = [p for p in _modules() if p.name not in ("__init__.py", "__main__.py")]
  by_name = collections.defaultdict(list)
  for p in modules:
    by_name[p.name].append(str(p.relative_to(PACKAGE)))
  assert not {name: paths for name, paths in by_name.items() if len(paths) > 1}
  lines = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
  assert not {p: n for p, n in lines.items() if n > 450}


def _exception_classes():
  """Every exception class defined in wyjax (modules are imported only where a class is defined:
  the entry points define flags, which two of them cannot both do in one process)."""
  for path in _modules():
    if not any(isinstance(node, ast.ClassDef) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))):
      continue
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    module = importlib.import_module(name)
    yield from (
      value
      for value in vars(module).values()
      if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name
    )


def test_every_exception_survives_pickling():
  """A worker's error is pickled to the main process; one that cannot be rebuilt there (a custom
  __init__ fed its message back) hung prepare-corpus's pool."""
  classes = list(_exception_classes())
  assert {"FormatError", "Interrupted", "RunError"} <= {c.__name__ for c in classes}
  for cls in classes:
    try:  # one argument per parameter of a custom __init__: ints are 2 (a line, a step, SIGINT)
      parameters = inspect.signature(cls).parameters.values()
      arguments = [2 if p.annotation is int else f"<{p.name}>" for p in parameters]
    except ValueError:  # the builtin __init__: a message
      arguments = ["message"]
    error = cls(*arguments)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.args, str(copy)) == (cls, error.args, str(error)), cls


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_declares_its_place(name):
  """Each task has a head kind, a board, a Hub task type, and a packaged config of its own task."""
  task = TASKS[name]
  assert task.head in HEADS and task.board and task.hub_task_type != "other" and task.benchmark
  assert config_files.load(task.config_name).task == name


def test_a_config_without_the_tasks_options_gets_their_defaults():
  """A user's FSPC config built on base_config() (no task options) still has every key FSPC reads."""
  config = finetuning.base_config()
  config.task = "fspc"
  assert "train_on_lines" not in config
  assert finetuning.with_options(config).train_on_lines is True
  assert finetuning.base_config("wywmt").decoding.beam_size == 4
  explicit = finetuning.base_config("fspc")
  explicit.train_on_lines = False
  assert finetuning.with_options(explicit).train_on_lines is False

"""Linear probes of any encoder on fine-tuning tasks: a cheap comparison of encoders and checkpoints.

No fine-tuning: wyjax/train/probes.py says what a probe is.

    python -m wyjax.probe --model=MODEL [--model=OTHER ...] --config=tlc.py --config.data_dir=WYWEB/tlc
    python -m wyjax.probe --model=MODEL --probes=tlc:WYWEB/tlc,punc:WYWEB/punc

MODEL: a wyjax pretraining workdir (its latest checkpoint) or one of its checkpoints
(WORKDIR/checkpoints/STEP), a wyjax export, or a transformers folder of a BERT, RoBERTa or
DeBERTa-v2 encoder. Prints one line per model and task, the task's dev metrics, and for several
models a table of each task's main metric (×100); standard output never goes into a model or
task folder it reads (wyjax.core.io_paths). It is the probe a pretraining run's
--config.probes runs: a checkpoint scores here what its run recorded at its step.
"""

from absl import app, flags

from wyjax.core import cli, config_files, io_paths, logs
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.core.ranges import INT32
from wyjax.core.run_metrics import brief
from wyjax.tasks.registry import TASKS
from wyjax.tasks.task import percent
from wyjax.train import config_values, finetuning, probes, suite

_MODEL = flags.DEFINE_multi_string("model", None, "A model to probe (repeat the flag to compare several).")
_CONFIG = config_files.DEFINE_config(
  "config", None, "A task config (tlc.py) with its --config.data_dir.", lock_config=True
)
_PROBES = flags.DEFINE_string(
  "probes", "", "TASK:FOLDER pairs joined by commas, each at its packaged config, as pretraining's --config.probes."
)
_EXAMPLES = flags.DEFINE_integer(
  "probe_examples", 1024, "Training examples each probe fits.", lower_bound=2, upper_bound=INT32
)
flags.mark_flags_as_required(["model"])


def task_configs() -> list:
  """The tasks' configs: --config's and each of --probes' at its packaged config, checked."""
  if _CONFIG.value is not None and not _CONFIG.value.get("task"):
    raise app.UsageError("--config names no task: give a task config such as tlc.py")
  configs = [] if _CONFIG.value is None else [finetuning.with_options(_CONFIG.value)]
  if configs and not configs[0].data_dir:
    raise app.UsageError("--config needs its task folder: --config.data_dir=DIR")
  if configs:
    probes.check_probed(TASKS[configs[0].task], "--config")
  named = probes.parse(_PROBES.value, "--probes")
  if configs and (folder := dict(named).get(configs[0].task)) is not None:
    raise app.UsageError(
      f"--config.data_dir={configs[0].data_dir} and --probes' {configs[0].task}:{folder} both probe "
      f"{configs[0].task}: name it once"
    )
  configs += [suite.task_config(name, data_dir=folder) for name, folder in named]
  if not configs:
    raise app.UsageError("name the tasks to probe: --config=TASK.py --config.data_dir=DIR, or --probes=TASK:DIR,…")
  for config in configs:
    config_values.check(config, config_values.FINETUNING)
  return configs


def main(argv):
  del argv
  logs.to_file(None, "probe")
  use_compilation_cache()
  configs = task_configs()
  reads = {
    ("--config.data_dir" if i == 0 and _CONFIG.value is not None else f"--probes' {c.task}"): c.data_dir
    for i, c in enumerate(configs)
  }
  for model in _MODEL.value:  # the table goes to standard output: never into what it reads
    io_paths.check_apart({"standard output": io_paths.STDOUT}, {"--model": model, **reads}, "probe")
  results = {}
  for model in _MODEL.value:
    results[model] = probes.probe_model(model, configs, _EXAMPLES.value)
    for task, scores in results[model].items():
      print(f"{model}  {task}: {brief(scores)}", flush=True)
  if len(results) > 1:
    tasks = [(c.task, TASKS[c.task]) for c in configs]
    print("\n| Model | " + " | ".join(f"{t.column} {t.main_metric}" for _, t in tasks) + " |")
    print("|---|" + "---|" * len(tasks))
    for model, scores in results.items():
      print(f"| {model} | " + " | ".join(percent(scores[name][t.main_metric]) for name, t in tasks) + " |")


if __name__ == "__main__":
  cli.run(main)

"""The embedded default, end to end on one machine with no user data.

    python -m wyjax.demo [--workdir=DIR] [--seeds=5]

1. derives two real tasks from the chinese-poetry corpus (fetched with npm, checked against its
   published hash) in WYWEB formats (wyjax/tasks/builders/poetry.py): the dynasty of a poem (TLC
   format, from its collection's era) and punctuation (PUNC format);
2. pretrains the tiny DeBERTa on that corpus (configs/pretrain/deberta_tiny.py), probing both
   tasks at step 0 and at each evaluation (wyjax.train.probes), or reuses the finished run in DIR
   once it is checked against the config as `wyjax.pretrain` checks a rerun (another config is
   refused, unless --accept_config_change; the check comes first);
3. fine-tunes and evaluates the pretrained model on both (dev for checkpoint choice, test
   predictions written as submissions; --seeds=N: N seeds each, their mean ± std on the board),
   and the same architecture from random weights with the same recipe (the unpretrained twin);
4. exports the pretrained model as a transformers folder (DIR/hf: files of the demo's earlier
   export, recorded by content in DIR/hf_files.json, are replaced; anything else there is refused
   before any work);
5. prints the leaderboard, dev and test, with the twin, majority-class and linear (character
   n-grams + logistic regression) baselines beside the scores; plots the probes' dev scores
   against pretraining steps beside the validation MLM loss (results/plots/pretraining.png);
6. uses the fine-tuned punctuation model (as `wyjax.predict` does) on a passage from outside
   the corpus, and prints it before and after.

11 minutes on 2 CPU cores from a fresh cache, about 7 when the pretraining is cached
(docs/benchmarks.md).
"""

import pathlib
import time

from absl import flags

from wyjax.core import checkpoints, cli, config_files, guards, io_paths, logs, storage
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.core.ranges import INT32
from wyjax.data import corpus, prepare
from wyjax.hf import export_folder, loading, task_models
from wyjax.tasks import leaderboard
from wyjax.tasks.builders import poetry
from wyjax.tasks.registry import TASKS
from wyjax.train import continuing, inference, pretraining, pretraining_corpus, probes, suite

_PRETRAIN = config_files.DEFINE_config(
  "pretrain_config", "pretrain/deberta_tiny.py", "Pretraining config: a name or a file."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (default: <cache>/demo).")
# Ranges declared here, checked as the flags are parsed: before the pretraining, not 500 steps into it
# (a step count of 0 would mean whole epochs to fine-tuning).
_STEPS = {
  poetry.PUNCTUATION: flags.DEFINE_integer(
    "punc_steps", 300, "Fine-tuning steps of the punctuation task.", lower_bound=1, upper_bound=INT32
  ),
  poetry.DYNASTY: flags.DEFINE_integer(
    "tlc_steps", 750, "Fine-tuning steps of the dynasty task.", lower_bound=1, upper_bound=INT32
  ),
}
_SEEDS = flags.DEFINE_integer(
  "seeds",
  1,
  "Fine-tuning seeds per task; more than one adds their mean ± std to the leaderboard (README's table: 5).",
  lower_bound=1,
  upper_bound=INT32,
)
_LR = flags.DEFINE_float(
  "learning_rate",
  None,
  "Fine-tuning learning rate (default: chosen from the model's size, "
  "1e-3 for the tiny model; wyjax/train/learning_rates.py).",
  lower_bound=0,
)
_PER_DYNASTY = flags.DEFINE_integer("per_dynasty", 1200, "Poems per dynasty in the dynasty task.", lower_bound=1)
_PUNC_EXAMPLES = flags.DEFINE_integer("punc_examples", 5000, "Poems in the punctuation task.", lower_bound=1)
_PACKAGE = flags.DEFINE_string(
  "poetry_package", None, "An unpacked chinese-poetry package/ folder (default: fetched with npm)."
)
# What the demo writes in its --workdir.
WRITTEN = ("demo.log", "pretrain", "tasks", "results", "hf", "hf_files.json")

_ACCEPT = flags.DEFINE_bool(
  "accept_config_change", False, "Continue the runs in --workdir although they were made with other settings."
)


def pretrained(config, workdir: pathlib.Path, accept_config_change: bool, derive_tasks, typed=()) -> pathlib.Path:
  """The finished pretraining run in workdir, running (or resuming) it when needed.

  A finished run is checked as wyjax.pretrain checks a rerun (pretraining.check_resume): made with
  another config, or from another corpus, it is refused, not reused; an accepted change goes
  through wyjax.pretrain's own path, which logs it. derive_tasks() runs after that check, before
  any training: the run probes the tasks.
  """
  done = changes = False
  if (workdir / "checkpoints").is_dir():
    with checkpoints.manager(workdir, read_only=True) as mngr:
      done = mngr.latest_step() == config.num_train_steps
  if done:
    data_dir = pretraining_corpus.prepared_data_dir(config)
    init = continuing.local_init(config.init) if config.init else ""
    changes = pretraining.check_resume(
      config, workdir, data_dir, prepare.read_manifest(data_dir), init, accept_config_change=accept_config_change
    )
  derive_tasks()
  if done and not changes:
    print(f"reusing the pretrained model in {workdir}", flush=True)
  else:
    print(f"pretraining the tiny model into {workdir} ...", flush=True)
    pretraining.train_and_evaluate(config, workdir, accept_config_change=accept_config_change, typed=typed)
  return workdir


def main(argv):
  del argv
  use_compilation_cache()
  run_demo()


def run_demo():
  start = time.perf_counter()
  workdir = pathlib.Path(_WORKDIR.value or storage.cache_dir() / "demo")
  config = _PRETRAIN.value
  reads = {
    "--poetry_package": _PACKAGE.value,
    "--pretrain_config.init": config.init,
    "--pretrain_config.corpus.vocab": config.corpus.vocab,
  }
  io_paths.check_folder("--workdir", workdir)
  io_paths.check_apart({"--workdir": workdir}, reads, "the demo")
  io_paths.check_not_written("--workdir", workdir, WRITTEN, reads, "the demo")
  workdir.mkdir(parents=True, exist_ok=True)  # a file there is refused now, not after a minute of deriving tasks
  logs.to_file(workdir, "demo")
  if _PACKAGE.value:
    config.corpus.source = f"poetry:{pathlib.Path(_PACKAGE.value).resolve()}"
  hf_dir, exported = workdir / "hf", workdir / "hf_files.json"  # the export's files, recorded by content
  replace_hf = export_folder.replaces_own(hf_dir, exported, "--workdir")  # before any work: only the demo's own
  tasks_dir = workdir / "tasks"

  def derive_tasks():
    if not (tasks_dir / "summary.json").exists():
      print("deriving the dynasty (TLC format) and punctuation (PUNC format) tasks from the poems ...", flush=True)
      reader = corpus.PoetryReader(_PACKAGE.value)
      poetry.build_poetry_tasks(
        tasks_dir, reader=reader, per_dynasty=_PER_DYNASTY.value, punc_examples=_PUNC_EXAMPLES.value
      )

  config.probes = config.probes or ",".join(f"{task}:{tasks_dir / task}" for task in poetry.TASKS)
  model_dir = pretrained(config, workdir / "pretrain", _ACCEPT.value, derive_tasks, typed=config_files.typed(_PRETRAIN))
  name = "wyjax tiny DeBERTa (poetry)"
  steps = {task: dict(num_train_steps=flag.value, eval_every=max(1, flag.value // 4)) for task, flag in _STEPS.items()}
  board = suite.run(
    init=str(model_dir),
    data_root=tasks_dir,
    out=workdir / "results",
    tasks=list(poetry.TASKS),
    name=name,
    accept_config_change=_ACCEPT.value,
    learning_rate=_LR.value,
    batch_size=32,
    seeds=_SEEDS.value,
    no_pretraining=True,
    per_task=steps,
  )
  if board["failed"]:
    raise guards.RunError(f"demo tasks failed: {board['failed']}")
  leaderboard.plot_pretraining(
    workdir / "results" / "plots" / "pretraining.png",
    model_dir / "metrics.jsonl",
    [probes.metric_key(task, TASKS[task].main_metric) for task in poetry.TASKS],
    name,
  )
  training, _ = export_folder.run_info(model_dir)  # its run_config.json and step
  export_folder.export(
    loading.load(model_dir),
    hf_dir,
    name="wyjax-tiny-poetry",
    results=board,
    training=training,
    task_data="chinese-poetry",
    overwrite=replace_hf,
  )
  export_folder.record_files(hf_dir, exported)
  print(f"\nexported the pretrained model to {hf_dir} (loads with transformers.AutoModelForMaskedLM)")
  print(
    "\nTasks derived from chinese-poetry: TLC = dynasty of a poem (period accuracy in the notes), "
    "PUNC = punctuation F1; dev split, then test.\n"
  )
  print((workdir / "results" / "leaderboard.md").read_text(encoding="utf-8"))
  print(f"plots: {workdir / 'results' / 'plots'}; submissions: {workdir / 'results'}/<task>/submission/")
  punc_run = workdir / "results" / poetry.PUNCTUATION
  (punctuated,) = inference.Predictor(task_models.load(punc_run)).outputs([poetry.UNSEEN_PASSAGE])
  print("\nA passage from outside the corpus (沈括《梦溪笔谈·活板》), punctuated by the fine-tuned model:")
  print(f"  before: {poetry.UNSEEN_PASSAGE}\n  after:  {punctuated}")
  print(f"  (the same: python -m wyjax.predict --model={punc_run} --input=your_text.txt)")
  print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
  cli.run(main)

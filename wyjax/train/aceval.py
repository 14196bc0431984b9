"""AC-EVAL with encoders: two protocols, named for what they are. AC-EVAL's paper prompts LLMs
in context (zero-shot, and few-shot with k = 5, or 3 for sentence_pauses, translation and
poetry_appreciation, 1 for summarization_and_analysis; unmatched answers count wrong); an
encoder cannot be prompted, so neither protocol is comparable with the paper's numbers.

`transfer`: `config.transfer_init`, a model fine-tuned on another multiple-choice task (the
workdir of an IRC, WYWRC or CCPM softmax run: encoder, pooler and one-score classifier),
answers every dev and test question without training on AC-EVAL.

`dev_finetune`: the 5 dev questions per subject are the only labelled ones, so their accuracy
comes from cross-validation: fold k holds out the k-th question of every subject and a model
fine-tuned from `config.init` for `num_train_steps` on the other folds answers it (no early
stopping: nothing is left to choose on). The test answers come from a model fine-tuned on all
dev questions.

The test answers are not public: the submission files are the test results, scored by
AC-EVAL's authors.

    workdir/
      results.json                      transfer and dev_finetune scores; `dev` is dev_finetune's
      aceval.md                         the AC-EVAL paper's tables: categories, subjects
      dev_predictions_{transfer,dev_finetune}.jsonl  each protocol's dev answers (held-out ones)
      submission/aceval.json            dev_finetune's test answers {subject: {row id: letter}}
      submission/aceval_transfer.json   the transfer model's
"""
import json
import logging
import pathlib

import jax
import numpy as np

from wyjax.tasks import aceval as aceval_files
from wyjax.tasks import batching, datasets, leaderboard
from wyjax.train import finetuning

ACEVAL = aceval_files.TASK
SUBMISSIONS = {"dev_finetune": "aceval.json", "transfer": "aceval_transfer.json"}


def _fit(trainer: finetuning.Trainer, config, pretrained: dict, features: list[dict], seed: int) -> dict:
  """Params after num_train_steps on features, from the pretrained ones."""
  state = trainer.init_state(pretrained, seed)
  batches = batching.train_batches(features, batch_size=config.batch_size, max_length=trainer.max_length,
                                   pad_id=trainer.pad_id, seed=seed)
  rng = jax.random.key(seed)
  for step in range(1, config.num_train_steps + 1):
    state, _ = trainer.train_step(state, next(batches), jax.random.fold_in(rng, step))
  return state["params"]


def folds(questions, count: int) -> list[int]:
  """The fold of each question: its position among its subject's questions, modulo count."""
  seen, out = {}, []
  for q in questions:
    out.append(seen.get(q.subject, 0) % count)
    seen[q.subject] = seen.get(q.subject, 0) + 1
  return out


def _setup(config, init: str, splits: dict):
  """(trainer, pretrained params, {split: (examples, features)}) of one model."""
  model_config, pretrained, tokenizer = finetuning.load_init(init, splits["train"])
  model_config = model_config.replace(dtype=config.dtype)
  # The train split is the dev questions again: featurized once, as dev.
  data = finetuning.load_task_data(ACEVAL, config, tokenizer, model_config,
                                 {split: examples for split, examples in splits.items() if split != "train"})
  steps = max(config.num_train_steps, 1)
  trainer = finetuning.Trainer(ACEVAL, model_config, tokenizer, config, steps, data["max_length"], data["dev"][1][0])
  return trainer, pretrained, data


def transfer(config, splits: dict) -> tuple[dict, list, list | None]:
  """(dev scores, dev answers, test answers) of config.transfer_init, untrained."""
  trainer, pretrained, data = _setup(config, config.transfer_init, splits)
  classifier = pretrained.get("classifier", {}).get("kernel")
  if classifier is None or "pooler" not in pretrained or np.shape(classifier)[-1] != 1:
    raise ValueError(f"{config.transfer_init}: transfer needs a model fine-tuned on a multiple-choice task "
                     "(IRC, WYWRC or CCPM softmax: its one-score classifier)")
  params = trainer.init_state(pretrained, config.seed)["params"]
  scores, answers, _ = finetuning.evaluate(ACEVAL, trainer, params, *data["dev"])
  test = finetuning.evaluate(ACEVAL, trainer, params, *data["test"])[1] if "test" in data else None
  return scores, answers, test


def dev_finetune(config, splits: dict) -> tuple[dict, list, list | None]:
  """(cross-validated dev scores, dev answers, test answers) of config.init."""
  trainer, pretrained, data = _setup(config, config.init, splits)
  examples, features = data["dev"]
  fold_of = folds(examples, config.folds)
  answers = [None] * len(examples)
  for fold in range(config.folds):
    held = [i for i, f in enumerate(fold_of) if f == fold]
    train = [features[i] for i, f in enumerate(fold_of) if f != fold]
    params = _fit(trainer, config, pretrained, train, config.seed + fold)
    _, predicted, _ = finetuning.evaluate(ACEVAL, trainer, params, [examples[i] for i in held],
                                        [features[i] for i in held])
    for i, answer in zip(held, predicted):
      answers[i] = answer
    logging.info("AC-EVAL fold %d: %d held-out questions", fold, len(held))
  test = None
  if "test" in data:
    params = _fit(trainer, config, pretrained, features, config.seed)
    test = finetuning.evaluate(ACEVAL, trainer, params, *data["test"])[1]
  return ACEVAL.score(examples, answers), answers, test


def submission(questions, answers) -> dict:
  """{subject: {row id: letter}}, subjects in AC-EVAL's order."""
  out = {}
  for q, a in zip(questions, answers, strict=True):
    out.setdefault(q.subject, {})[q.row_id] = a
  return out


def run(config, workdir) -> dict:
  """Transfer (when config.transfer_init is set) and dev fine-tuning (when config.dev_finetune)
  on AC-EVAL; writes and returns results.json, shaped like wyjax.train.finetuning's."""
  if not config.data_dir:
    raise ValueError("set --config.data_dir to the AC-EVAL data folder (dev/ and test/ subject CSVs)")
  if not (config.dev_finetune or config.transfer_init):
    raise ValueError("nothing to evaluate: set config.dev_finetune or config.transfer_init")
  workdir = pathlib.Path(workdir)
  (workdir / "submission").mkdir(parents=True, exist_ok=True)
  splits = datasets.load_splits(ACEVAL.data, config.data_dir)
  protocols = {}
  for name, protocol, enabled in (("transfer", transfer, bool(config.transfer_init)),
                                  ("dev_finetune", dev_finetune, config.dev_finetune)):
    if not enabled:
      continue
    protocols[name], answers, test = protocol(config, splits)
    finetuning.write_predictions(ACEVAL, workdir / f"dev_predictions_{name}.jsonl", splits["dev"], answers)
    if test is not None:
      _write_json(workdir / "submission" / SUBMISSIONS[name], submission(splits["test"], test))
  confusion = np.zeros((4, 4), np.int64)  # of the last protocol: dev_finetune's when both ran
  for q, a in zip(splits["dev"], answers):
    confusion[aceval_files.LETTERS.index(q.answer), aceval_files.LETTERS.index(a)] += 1
  chance = aceval_files.chance(splits["dev"])
  (workdir / "aceval.md").write_text(leaderboard.aceval_tables({**protocols, "chance": chance}), encoding="utf-8")
  main = protocols.get("dev_finetune", protocols.get("transfer"))
  results = {
      "task": "aceval", "main_metric": ACEVAL.main_metric, "init": config.init or "fresh tiny model",
      "transfer_init": config.transfer_init, "dev": main, "transfer": protocols.get("transfer"),
      "dev_finetune": protocols.get("dev_finetune"), "dev_mean": main[ACEVAL.main_metric], "dev_std": 0.0,
      "best_seed": config.seed, "best_run": str(workdir), "test": None, "labels": list(aceval_files.LETTERS),
      "dev_confusion": confusion.tolist(), "majority_baseline": chance, "config": config.to_dict(),
  }
  if "test" in splits:
    submitted = "dev_finetune" if config.dev_finetune else "transfer"
    results["submission"] = str(workdir / "submission" / SUBMISSIONS[submitted])
  _write_json(workdir / "results.json", results)
  return results


def _write_json(path: pathlib.Path, value) -> None:
  path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")

"""AC-EVAL with encoders: zero-shot transfer from a multiple-choice model and few-shot
fine-tuning on the dev questions.

Zero-shot: `config.zero_shot_init`, a model fine-tuned on the other multiple-choice tasks (the
workdir of an IRC, WYWRC or CCPM run: encoder, pooler and classifier), answers every dev and
test question without training.

Few-shot: the 5 dev questions per subject are the only labelled ones, so their accuracy comes
from cross-validation: fold k holds out the k-th question of every subject and a model
fine-tuned from `config.init` for `num_train_steps` on the other folds answers it (no early
stopping: nothing is left to choose on). The test answers come from a model fine-tuned on all
dev questions.

    workdir/
      results.json                      zero_shot and few_shot scores; `dev` is few-shot's
      aceval.md                         the AC-EVAL paper's tables: categories, subjects
      dev_predictions_{zero,few}_shot.jsonl  each protocol's dev answers (few-shot: held-out ones)
      submission/aceval.json            few-shot test answers {subject: {row id: letter}}
      submission/aceval_zero_shot.json  the zero-shot model's
"""
import json
import logging
import pathlib

import jax
import numpy as np

from wyjax.tasks import aceval as aceval_files
from wyjax.tasks import batching, datasets, leaderboard
from wyjax.tasks.tasks import ACEVAL, majority_baseline
from wyjax.train import finetune

SUBMISSIONS = {"few_shot": "aceval.json", "zero_shot": "aceval_zero_shot.json"}


def _fit(trainer: finetune.Trainer, config, pretrained: dict, features: list[dict], seed: int) -> dict:
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
  model_config, pretrained, tokenizer = finetune.load_init(init, splits["train"])
  model_config = model_config.replace(dtype=config.dtype)
  # The train split is the dev questions again: featurized once, as dev.
  data = finetune.load_task_data(ACEVAL, config, tokenizer, model_config,
                                 {split: examples for split, examples in splits.items() if split != "train"})
  steps = max(config.num_train_steps, 1)
  trainer = finetune.Trainer(ACEVAL, model_config, tokenizer, config, steps, data["max_length"], data["dev"][1][0])
  return trainer, pretrained, data


def zero_shot(config, splits: dict) -> tuple[dict, list, list | None]:
  """(dev scores, dev answers, test answers) of config.zero_shot_init, untrained."""
  trainer, pretrained, data = _setup(config, config.zero_shot_init, splits)
  classifier = pretrained.get("classifier", {}).get("kernel")
  if classifier is None or "pooler" not in pretrained or np.shape(classifier)[-1] != 1:
    raise ValueError(f"{config.zero_shot_init}: zero-shot needs a model fine-tuned on a multiple-choice task "
                     "(IRC, WYWRC or CCPM: its one-score classifier)")
  params = trainer.init_state(pretrained, config.seed)["params"]
  scores, answers, _ = finetune.evaluate(ACEVAL, trainer, params, *data["dev"])
  test = finetune.evaluate(ACEVAL, trainer, params, *data["test"])[1] if "test" in data else None
  return scores, answers, test


def few_shot(config, splits: dict) -> tuple[dict, list, list | None]:
  """(cross-validated dev scores, dev answers, test answers) of config.init."""
  trainer, pretrained, data = _setup(config, config.init, splits)
  examples, features = data["dev"]
  fold_of = folds(examples, config.folds)
  answers = [None] * len(examples)
  for fold in range(config.folds):
    held = [i for i, f in enumerate(fold_of) if f == fold]
    train = [features[i] for i, f in enumerate(fold_of) if f != fold]
    params = _fit(trainer, config, pretrained, train, config.seed + fold)
    _, predicted, _ = finetune.evaluate(ACEVAL, trainer, params, [examples[i] for i in held],
                                        [features[i] for i in held])
    for i, answer in zip(held, predicted):
      answers[i] = answer
    logging.info("AC-EVAL fold %d: %d held-out questions", fold, len(held))
  test = None
  if "test" in data:
    params = _fit(trainer, config, pretrained, features, config.seed)
    test = finetune.evaluate(ACEVAL, trainer, params, *data["test"])[1]
  return ACEVAL.score(examples, answers), answers, test


def submission(questions, answers) -> dict:
  """{subject: {row id: letter}}, subjects in AC-EVAL's order."""
  out = {}
  for q, a in zip(questions, answers, strict=True):
    out.setdefault(q.subject, {})[q.row_id] = a
  return out


def run(config, workdir) -> dict:
  """Zero-shot (when config.zero_shot_init is set) and few-shot (when config.few_shot) AC-EVAL;
  writes and returns results.json, shaped like wyjax.train.finetune's."""
  if not config.data_dir:
    raise ValueError("set --config.data_dir to the AC-EVAL data folder (dev/ and test/ subject CSVs)")
  if not (config.few_shot or config.zero_shot_init):
    raise ValueError("nothing to evaluate: set config.few_shot or config.zero_shot_init")
  workdir = pathlib.Path(workdir)
  (workdir / "submission").mkdir(parents=True, exist_ok=True)
  splits = datasets.load_splits(ACEVAL.data, config.data_dir)
  protocols = {}
  for name, protocol, enabled in (("zero_shot", zero_shot, bool(config.zero_shot_init)),
                                  ("few_shot", few_shot, config.few_shot)):
    if not enabled:
      continue
    protocols[name], answers, test = protocol(config, splits)
    finetune.write_predictions(ACEVAL, workdir / f"dev_predictions_{name}.jsonl", splits["dev"], answers)
    if test is not None:
      _write_json(workdir / "submission" / SUBMISSIONS[name], submission(splits["test"], test))
  confusion = np.zeros((4, 4), np.int64)  # of the last protocol: few-shot's when both ran
  for q, a in zip(splits["dev"], answers):
    confusion[aceval_files.LETTERS.index(q.answer), aceval_files.LETTERS.index(a)] += 1
  chance = majority_baseline(ACEVAL, splits["train"], splits["dev"])
  rows = {name.replace("_", "-"): scores for name, scores in protocols.items()}
  (workdir / "aceval.md").write_text(leaderboard.aceval_tables({**rows, "chance": chance}), encoding="utf-8")
  main = protocols.get("few_shot", protocols.get("zero_shot"))
  results = {
      "task": "aceval", "main_metric": ACEVAL.main_metric, "init": config.init or "fresh tiny model",
      "zero_shot_init": config.zero_shot_init, "dev": main, "zero_shot": protocols.get("zero_shot"),
      "few_shot": protocols.get("few_shot"), "dev_mean": main[ACEVAL.main_metric], "dev_std": 0.0,
      "best_seed": config.seed, "best_run": str(workdir), "test": None, "labels": list(aceval_files.LETTERS),
      "dev_confusion": confusion.tolist(), "majority_baseline": chance, "config": config.to_dict(),
  }
  if "test" in splits:
    results["submission"] = str(workdir / "submission" / SUBMISSIONS["few_shot" if config.few_shot else "zero_shot"])
  _write_json(workdir / "results.json", results)
  return results


def _write_json(path: pathlib.Path, value) -> None:
  path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")

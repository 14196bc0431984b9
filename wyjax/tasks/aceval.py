"""AC-EVAL (yuting-wei/AC-EVAL): four-option questions on ancient Chinese in 13 subjects, scored by accuracy.

- Data: dev/<subject>.csv (5 questions each, `,Question,A,B,C,D,Answer,Explanation`) and test/<subject>.csv
  (`,Question,A,B,C,D`), the first column the row id. The test answers are not public: the submission
  ({subject: {row id: letter}}) is scored by AC-EVAL's authors. `train` and `dev` are both the dev folder.
- Two protocols, not comparable with the paper's in-context prompting of LLMs: `transfer` answers with a model
  fine-tuned on another multiple-choice task (`config.transfer_init`: an IRC, WYWRC or CCPM softmax run);
  `dev_finetune` scores the dev questions by cross-validation (fold k holds out each subject's k-th question) and
  answers test with a model fine-tuned on all of them.

    workdir/
      results.json                      transfer and dev_finetune scores; `dev` is dev_finetune's
      aceval.md                         the AC-EVAL paper's tables: categories, subjects
      dev_predictions_{transfer,dev_finetune}.jsonl  each protocol's dev answers (held-out ones)
      submission/aceval.json            dev_finetune's test answers {subject: {row id: letter}}
      submission/aceval_transfer.json   the transfer model's
"""

import csv
import dataclasses
import io
import json
import logging
import pathlib

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks import datasets, files, metrics
from wyjax.tasks.files import FormatError
from wyjax.tasks.task import (
  Files,
  Task,
  argmax,
  as_json,
  label_or_ignore,
  most_common,
  per_example,
  percent,
  rows,
  with_specials,
)

CATEGORIES = {
  "General Historical Knowledge": (
    "historical_facts",
    "geography",
    "social_customs",
    "art_and_cultural_heritage",
    "philosophy_and_religion",
  ),
  "Short Text Understanding": (
    "lexical_pragmatics_analysis",
    "allusions_and_idioms",
    "word_sense_disambiguation",
    "translation",
    "event_extraction",
  ),
  "Long Text Understanding": ("sentence_pauses", "summarization_and_analysis", "poetry_appreciation"),
}
SUBJECTS = tuple(s for subjects in CATEGORIES.values() for s in subjects)
CATEGORY_OF = {s: category for category, subjects in CATEGORIES.items() for s in subjects}
LETTERS = ("A", "B", "C", "D")
_QUESTION_HEADER = ["", "Question", *LETTERS]
_FOLDERS = {"train": "dev", "dev": "dev", "test": "test"}


@dataclasses.dataclass(frozen=True)
class Question:
  line: int  # where the row starts in its subject's file
  subject: str
  row_id: str
  question: str
  options: tuple[str, ...]
  answer: str  # "A".."D"; "" in a file without answers (the test split)
  explanation: str


def read_subject(path, subject: str) -> list[Question]:
  """Every row of one subject's file; the header says whether it has answers.

  Fields may be quoted and as long as the file; a literal backslash-n in a question is kept as it is.
  Raises FormatError, with the line reached, on what csv rejects.
  """
  csv.field_size_limit(2**31 - 1)
  reader = csv.reader(io.StringIO(files.task_text(path), newline=""), strict=True)
  try:
    return _questions(path, subject, reader)
  except csv.Error as e:
    raise FormatError(path, reader.line_num, f"malformed CSV ({e})") from e


def _questions(path, subject: str, reader) -> list[Question]:
  header = next(reader, None)
  if header not in (_QUESTION_HEADER, _QUESTION_HEADER + ["Answer", "Explanation"]):
    raise FormatError(path, 1, f"header {header!r} is not ',Question,A,B,C,D[,Answer,Explanation]'")
  out, ids, start = [], set(), reader.line_num + 1
  for row in reader:
    if len(row) != len(header):
      raise FormatError(path, start, f"expected {len(header)} comma-separated fields, found {len(row)}")
    row_id, question, *options = row[:6]
    answer, explanation = row[6:] if len(header) == 8 else ("", "")
    if not row_id.strip() or row_id in ids:
      raise FormatError(path, start, f"row id {row_id!r} is empty or repeated")
    if not question.strip() or not all(o.strip() for o in options):
      raise FormatError(path, start, "empty question or option")
    if len(header) == 8 and answer not in LETTERS:
      raise FormatError(path, start, f"answer {answer!r} is not one of {LETTERS}")
    ids.add(row_id)
    out.append(Question(start, subject, row_id, question, tuple(options), answer, explanation))
    start = reader.line_num + 1
  if not out:
    raise FormatError(path, 1, f"no questions after the header: subject {subject} is empty")
  return out


def split_files(data_dir, split: str) -> list[pathlib.Path]:
  """The split's 13 subject files, in the order of SUBJECTS; none when the split is absent.

  A missing subject, or another .csv there, is an error.
  """
  folder = pathlib.Path(data_dir) / _FOLDERS[split]
  found = sorted(folder.glob("*.csv")) if files.present(folder, folder=True) else []
  unknown = [p.name for p in found if p.stem not in SUBJECTS]
  if unknown:
    raise FileNotFoundError(f"{folder}: {unknown} are not AC-EVAL subjects ({', '.join(SUBJECTS)})")
  paths = [folder / f"{s}.csv" for s in SUBJECTS]
  missing = [p.name for p in paths if not files.present(p)]
  if found and missing:
    raise FileNotFoundError(
      f"{folder}: no {', '.join(missing)}; AC-EVAL's {folder.name}/ has a file for each of its 13 subjects"
    )
  return paths if found else []


def read_split(data_dir, split: str) -> list[Question] | None:
  paths = split_files(data_dir, split)
  if not paths:
    return None
  questions = [q for path in paths for q in read_subject(path, path.stem)]
  if split != "test" and any(not q.answer for q in questions):
    first = next(q for q in questions if not q.answer)
    raise FormatError(
      pathlib.Path(data_dir) / _FOLDERS[split] / f"{first.subject}.csv",
      first.line,
      "dev questions need the Answer column",
    )
  return questions


QUESTION_TAIL = 64  # tokens a cut question keeps from its end, where the question proper stands


def _featurize(example: Question, tokenizer: Tokenizer, max_length: int):
  """One row per option: [CLS] question [SEP] option [SEP] (token types 0 | 1).

  An option keeps at most half of the max_length − 3 content tokens (its end is cut); the question gets the room
  the longest option leaves and, when longer, keeps its start and its last QUESTION_TAIL tokens (the question proper
  follows the passage it quotes).
  """
  whole_question = question = tokenizer.encode_chars(example.question)[0]
  full = [tokenizer.encode_chars(o)[0] for o in example.options]
  options = [o[: (max_length - 3) // 2] for o in full]
  room = max_length - 3 - max(len(o) for o in options)
  if len(question) > room:
    tail = min(QUESTION_TAIL, room // 2)
    question = np.concatenate([question[: room - tail], question[len(question) - tail :]])
  first = with_specials(tokenizer, question)
  sequences = [np.concatenate([first, o, [tokenizer.sep_id]]) for o in options]
  cut = len(whole_question) - len(question) + sum(len(f) - len(o) for f, o in zip(full, options))
  label = LETTERS.index(example.answer) if example.answer else None
  return {**rows(sequences, tokenizer.pad_id, len(first)), "label": label_or_ignore(label)}, cut


def scores(examples, predictions) -> dict:
  """Accuracy per subject, per category, their `average` (the paper's Average) and over all questions.

  A category's accuracy is the mean of its subjects present; `average` the mean of the categories.
  """
  correct = {}
  for e, p in zip(examples, predictions, strict=True):
    correct.setdefault(e.subject, []).append(e.answer == p)
  subjects = {s: float(np.mean(c)) for s, c in correct.items()}
  categories = {}
  for category, members in CATEGORIES.items():
    present = [subjects[s] for s in members if s in subjects]
    if present:
      categories[category] = float(np.mean(present))
  accuracy = metrics.accuracy([LETTERS.index(p) for p in predictions], [LETTERS.index(e.answer) for e in examples])
  return {
    "accuracy": accuracy,
    "average": float(np.mean(list(categories.values()))),
    **{f"category/{c}": v for c, v in categories.items()},
    **{f"subject/{s}": v for s, v in subjects.items()},
  }


def chance(dev) -> dict:
  """The scores of answering at random, in expectation: 1/4 everywhere."""
  return {k: 0.25 for k in scores(dev, [e.answer for e in dev])}


def tables(rows: dict[str, dict]) -> str:
  """Markdown in the shape of the AC-EVAL paper's tables, from rows {name: scores of `scores`}.

  Accuracy (×100) per category and their average, then per subject.
  """
  categories = list(CATEGORIES)
  lines = ["| Model | " + " | ".join(categories) + " | Average |", "|---" * (len(categories) + 2) + "|"]
  for name, row in rows.items():
    lines.append(
      f"| {name} | "
      + " | ".join(percent(row.get(f"category/{c}")) for c in categories)
      + f" | {percent(row.get('average'))} |"
    )
  lines += ["", "| Model | " + " | ".join(SUBJECTS) + " |", "|---" * (len(SUBJECTS) + 1) + "|"]
  for name, row in rows.items():
    lines.append(f"| {name} | " + " | ".join(percent(row.get(f"subject/{s}")) for s in SUBJECTS) + " |")
  return "\n".join(lines) + "\n"


def _board_tables(results: dict) -> str:
  protocols = {name: results[name] for name in ("transfer", "dev_finetune") if results.get(name)}
  return "## AC-EVAL (accuracy ×100; encoders, not the paper's prompting: not comparable)\n\n" + tables(
    {**protocols, "chance": results["majority_baseline"]}
  )


def folds(questions, count: int) -> list[int]:
  """The fold of each question: its position among its subject's questions, modulo count."""
  seen, out = {}, []
  for q in questions:
    out.append(seen.get(q.subject, 0) % count)
    seen[q.subject] = seen.get(q.subject, 0) + 1
  return out


def _transfer(config, splits: dict, setup) -> tuple[dict, list, list | None]:
  """(dev scores, dev answers, test answers) of config.transfer_init, untrained."""
  model, pretrained, data = setup(config.transfer_init, splits)
  classifier = pretrained.get("classifier", {}).get("kernel")
  if classifier is None or "pooler" not in pretrained or np.shape(classifier)[-1] != 1:
    raise ValueError(
      f"{config.transfer_init}: transfer needs a model fine-tuned on a multiple-choice task "
      "(IRC, WYWRC or CCPM softmax: its one-score classifier)"
    )
  params = model.init_params(pretrained, config.seed)
  scores, answers, _ = model.evaluate(params, *data["dev"])
  test = model.evaluate(params, *data["test"])[1] if "test" in data else None
  return scores, answers, test


def _dev_finetune(config, splits: dict, setup) -> tuple[dict, list, list | None]:
  """(cross-validated dev scores, dev answers, test answers) of config.init."""
  model, pretrained, data = setup(config.init, splits)
  examples, features = data["dev"]
  fold_of = folds(examples, config.folds)
  answers = [None] * len(examples)
  for fold in range(config.folds):
    held = [i for i, f in enumerate(fold_of) if f == fold]
    train = [features[i] for i, f in enumerate(fold_of) if f != fold]
    params = model.fit(pretrained, train, steps=config.num_train_steps, seed=config.seed + fold)
    _, predicted, _ = model.evaluate(params, [examples[i] for i in held], [features[i] for i in held])
    for i, answer in zip(held, predicted):
      answers[i] = answer
    logging.info("AC-EVAL fold %d: %d held-out questions", fold, len(held))
  test = None
  if "test" in data:
    params = model.fit(pretrained, features, steps=config.num_train_steps, seed=config.seed)
    test = model.evaluate(params, *data["test"])[1]
  return scores(examples, answers), answers, test


def _submission(questions, answers) -> dict:
  """{subject: {row id: letter}}, subjects in AC-EVAL's order."""
  out = {}
  for q, a in zip(questions, answers, strict=True):
    out.setdefault(q.subject, {})[q.row_id] = a
  return out


def run(config, workdir, setup) -> dict:
  """Runs transfer (config.transfer_init) and dev fine-tuning (config.dev_finetune) on AC-EVAL.

  Args:
    config: the fine-tuning config.
    workdir: where results.json, aceval.md, the dev predictions and the submissions are written.
    setup: setup(init, splits) → (model, pretrained params, {split: (examples, features)}), the model a
      wyjax.train.task_model.TaskModel (`init_params`, `fit`, `evaluate`).

  Returns:
    results.json's content, shaped like wyjax.train.finetuning's.
  """
  if not (config.dev_finetune or config.transfer_init):
    raise ValueError("nothing to evaluate: set config.dev_finetune or config.transfer_init")
  workdir = pathlib.Path(workdir)
  (workdir / "submission").mkdir(parents=True, exist_ok=True)
  splits = datasets.load_splits(TASK.files, config.data_dir)
  protocols = {}
  for name, protocol, enabled in (
    ("transfer", _transfer, bool(config.transfer_init)),
    ("dev_finetune", _dev_finetune, config.dev_finetune),
  ):
    if not enabled:
      continue
    protocols[name], answers, test = protocol(config, splits, setup)
    TASK.write_predictions(workdir / f"dev_predictions_{name}.jsonl", splits["dev"], answers)
    if test is not None:
      _write_json(workdir / "submission" / SUBMISSIONS[name], _submission(splits["test"], test))
  confusion = np.zeros((4, 4), np.int64)  # of the last protocol: dev_finetune's when both ran
  for q, a in zip(splits["dev"], answers):
    confusion[LETTERS.index(q.answer), LETTERS.index(a)] += 1
  (workdir / "aceval.md").write_text(tables({**protocols, "chance": chance(splits["dev"])}), encoding="utf-8")
  main = protocols.get("dev_finetune", protocols.get("transfer"))
  results = {
    "task": TASK.name,
    "main_metric": TASK.main_metric,
    "init": config.init or "fresh tiny model",
    "transfer_init": config.transfer_init,
    "dev": main,
    "transfer": protocols.get("transfer"),
    "dev_finetune": protocols.get("dev_finetune"),
    "dev_mean": main[TASK.main_metric],
    "dev_std": 0.0,
    "best_seed": config.seed,
    "best_run": str(workdir),
    "test": None,
    "labels": list(LETTERS),
    "dev_confusion": confusion.tolist(),
    "majority_baseline": chance(splits["dev"]),
    "config": config.to_dict(),
  }
  if "test" in splits:
    submitted = "dev_finetune" if config.dev_finetune else "transfer"
    results["submission"] = str(workdir / "submission" / SUBMISSIONS[submitted])
  _write_json(workdir / "results.json", results)
  return results


def _write_json(path: pathlib.Path, value) -> None:
  path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def _transfer_run(runs, out) -> dict:
  """In a suite, transfer comes from its last multiple-choice run (CCPM softmax, WYWRC, IRC)."""
  choice_runs = [results["best_run"] for task, results in runs if task.head == "choice"]
  return {"transfer_init": choice_runs[-1] if choice_runs else ""}


SUBMISSIONS = {"dev_finetune": "aceval.json", "transfer": "aceval_transfer.json"}
TASK = Task(
  name="aceval",
  head="choice",
  labels=LETTERS,
  max_length=512,
  featurize=_featurize,
  decode=lambda e, f, logits: LETTERS[argmax(logits)],
  score=scores,
  main_metric="average",
  baseline=lambda train, dev: [most_common(e.answer for e in train)] * len(dev),
  submission_format="jsonl",
  submission=per_example(lambda e, p: as_json({"subject": e.subject, "id": e.row_id, "answer": p})),
  files=Files(
    name="aceval",
    example_type=Question,
    split_files=split_files,
    read_split=read_split,
    train_files="dev/<subject>.csv",
  ),
  # transfer_init: a model fine-tuned on IRC, WYWRC or CCPM softmax, evaluated untrained;
  # folds: dev questions per subject
  options={"dev_finetune": True, "transfer_init": "", "folds": 5},
  path_options=("transfer_init",),
  run=run,
  from_other_runs=_transfer_run,
  board="classical",
  heading="AC-EVAL",
  board_tables=_board_tables,
  benchmark="AC-EVAL",
  hub_task_type="multiple-choice",
  hub_dataset=("AC-EVAL", "ac-eval"),
)

"""leaderboard.md / leaderboard.json in the shape of the WYWEB README table, and the plots.

- One table per board (a Task's `board`), scores ×100 on dev: a row per model (with several seeds, their
  mean ± std below it), its unpretrained twin where that ran, the majority-class baseline and, where it applies,
  the linear baseline ("–" where a row has no score). Where test has gold labels, a second table shows test.
- WYWEB leads with its average (its tasks but WYWMT); CLUE with the scores CLUE publishes (CLUE_SCORES), marked
  partial where not all their tasks ran. A task that failed is listed with its error.
- leaderboard.json also works as `python -m wyjax.export --results=…` (its `tasks` go into the model card).
"""

import dataclasses
import pathlib

import numpy as np

from wyjax.core import storage
from wyjax.tasks import files, linear_baseline
from wyjax.tasks.registry import TASKS
from wyjax.tasks.task import percent


@dataclasses.dataclass(frozen=True)
class Board:
  title: str
  average: str | None = None  # the heading of the mean of its averaged tasks; None: no average
  note: str = ""  # what the average is, under the tables


BOARDS = {
  "wyweb": Board(
    "WYWEB",
    "Avg. (WYWMT apart)",
    "the mean of the WYWEB tasks shown other than WYWMT (WYWEB averages its 8 non-MT tasks)",
  ),
  "classical": Board("Other classical benchmarks"),
  "clue": Board("CLUE (modern Chinese)"),  # its scores: CLUE_SCORES
}

# The scores CLUE publishes (CLUEbenchmark/CLUE README.md), each the mean of its tasks' test scores.
# Classification: "Score总分是通过计算6个数据集得分平均值获得", CMNLI on CLUE 1.0, OCNLI in its place on 1.1.
# Reading comprehension: CMRC 2018 by EM ("F1和EM共存的情况下，取EM为最终指标", its main metric here), ChID, C³.
CLUE_SCORES = {
  "CLUE 1.0 classification": ("afqmc", "tnews", "iflytek", "cmnli", "cluewsc2020", "csl"),
  "CLUE 1.1 classification": ("afqmc", "tnews", "iflytek", "ocnli", "cluewsc2020", "csl"),
  "CLUE reading comprehension": ("cmrc2018", "chid", "c3"),
}


LINEAR = "character n-grams + logistic regression"  # the linear baseline's row (tasks/linear_baseline.py)
TWIN = "same model, no pretraining"  # the model fine-tuned from random weights (config.init_weights="random")

# The plots' fonts may lack CJK glyphs: class names in ASCII.
ASCII_LABELS = {
  "先秦": "pre-Qin",
  "两汉": "Han",
  "魏晋南北朝": "Wei-Jin-N&S",
  "唐": "Tang",
  "宋": "Song",
  "元明": "Yuan-Ming",
  "清": "Qing",
  "儒藏": "Ru",
  "诗藏": "Shi",
  "佛藏": "Fo",
  "易藏": "Yi",
  "医藏": "Yi (med.)",
  "艺藏": "Yi (arts)",
  "子藏": "Zi",
  "集藏": "Ji",
  "道藏": "Dao",
  "史藏": "Shi (hist.)",
  "S-。": "S-period",
  "S-？": "S-question",
  "S-！": "S-exclaim",
  "S-，": "S-comma",
  "S-、": "S-enum",
  "S-；": "S-semicolon",
  "S-：": "S-colon",
}


def board_of(name: str) -> Board:
  return BOARDS.get(name, Board(name))


def average(scores: dict[str, float], board: str) -> float | None:
  """The board's average: the mean of its averaged tasks present.

  None when none is present, when one's score is None, or when the board has no average.
  """
  present = [v for t, v in scores.items() if t in TASKS and TASKS[t].board == board and TASKS[t].averaged]
  return sum(present) / len(present) if present and None not in present and board_of(board).average else None


def clue_scores(scores: dict[str, float]) -> dict[str, dict]:
  """CLUE's scores over the tasks in `scores`: {name: {"score", "tasks", "of", "complete"}}.

  - "score": the mean over "tasks", those of its tasks there (None when one's score is None); "of": all its tasks.
  - A score is shown when one of its tasks is there. 1.0's classification needs CMNLI; 1.1's is left out where
    CMNLI ran without OCNLI (the two would be equal).
  """
  shown = {}
  for name, of in CLUE_SCORES.items():
    ran = [t for t in of if t in scores]
    if ran:
      values = [scores[t] for t in ran]  # None: a task the row has no score for (the linear baseline's)
      shown[name] = {
        "score": None if None in values else sum(values) / len(values),
        "tasks": ran,
        "of": list(of),
        "complete": len(ran) == len(of),
      }
  if "cmnli" not in scores:
    shown.pop("CLUE 1.0 classification", None)
  elif "ocnli" not in scores:
    shown.pop("CLUE 1.1 classification", None)
  return shown


def _heading(name: str, score: dict) -> str:
  return name if score["complete"] else f"{name} (partial: {len(score['tasks'])} of {len(score['of'])})"


def summaries(scores: dict[str, float], board: str) -> dict[str, float | None]:
  """The columns before a board's tasks, {heading: score}: WYWEB's average, CLUE's scores."""
  if board == "clue":
    return {_heading(name, score): score["score"] for name, score in clue_scores(scores).items()}
  heading = board_of(board).average
  return {heading: average(scores, board)} if heading else {}


def _cell(values: list) -> str:
  """One run's score, or the mean ± std (population, as results.json's dev_std) of several."""
  if len(values) == 1 or None in values:
    return percent(values[0]) if len(values) == 1 else "–"
  return f"{percent(float(np.mean(values)))} ± {100 * float(np.std(values)):.2f}"


def table(rows: dict[str, dict | list[dict]], board: str) -> str:
  """Markdown table of a board: its summaries (average, scores), then its tasks present.

  rows: {model: {task: score in [0, 1]}}, or a list of such (one per seed: cells of mean ± std). A row without a
  task has "–" there and in the summaries over it.
  """
  draws = {model: scores if isinstance(scores, list) else [scores] for model, scores in rows.items()}
  columns = [t for t in TASKS if TASKS[t].board == board and any(t in s for runs in draws.values() for s in runs)]
  headings = list(summaries({t: 0.0 for runs in draws.values() for s in runs for t in s}, board))
  lines = [
    "| " + " | ".join(["Model", *headings, *(TASKS[c].column for c in columns)]) + " |",
    "|---" * (len(columns) + 1 + len(headings)) + "|",
  ]
  for model, runs in draws.items():
    runs = [{c: scores.get(c) for c in columns} for scores in runs]
    cells = [_cell([summaries(scores, board).get(h) for scores in runs]) for h in headings]
    cells += [_cell([scores[c] for scores in runs]) for c in columns]
    lines.append("| " + " | ".join([model, *cells]) + " |")
  return "\n".join(lines) + "\n"


def per_seed(results: dict[str, dict], split: str = "dev") -> list[dict[str, float | None]]:
  """{task: main metric on split} for each seed index all the tasks ran; None where a seed has no score.

  Seeds are results.json's runs (a result without runs is one run).
  """
  runs = {t: r.get("runs") or [r] for t, r in results.items()}
  count = min(len(r) for r in runs.values())
  return [{t: _main(runs[t][k][split], r) for t, r in results.items()} for k in range(count)]


def _main(metrics: dict | None, result: dict) -> float | None:
  return None if metrics is None else metrics[result["main_metric"]]


def model_rows(name: str, results: dict[str, dict], split: str) -> dict[str, dict | list[dict]]:
  """A model's rows on split: its best-dev seed's scores and, with several seeds, their mean ± std.

  The tasks without a score on split are left out.
  """
  scored = {t: r for t, r in results.items() if r[split] is not None}
  if not scored:
    return {}
  rows = {name: {t: _main(r[split], r) for t, r in scored.items()}}
  seeds = per_seed(scored, split)
  if len(seeds) > 1:
    rows[f"{name}: mean ± std of {len(seeds)} seeds"] = seeds
  return rows


def write(
  out,
  model_name: str,
  results: dict[str, dict],
  failed: dict[str, str] | None = None,
  no_pretraining: dict[str, dict] | None = None,
) -> dict:
  """Writes leaderboard.md and leaderboard.json.

  Args:
    out: the folder written.
    model_name: the model's row name.
    results: {task: results.json of wyjax.finetune}.
    failed: {task: error} of the tasks that failed.
    no_pretraining: {task: results.json} of the same model fine-tuned from random weights, where that ran.
  """
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  failed = failed or {}
  ordered = {t: results[t] for t in TASKS if t in results}
  twin = {t: no_pretraining[t] for t in TASKS if t in (no_pretraining or {})}
  main = {t: r["dev"][r["main_metric"]] for t, r in ordered.items()}
  majority = {t: r["majority_baseline"][r["main_metric"]] for t, r in ordered.items()}
  linear = {t: r["linear_baseline"] for t, r in ordered.items() if r.get("linear_baseline")}
  seeds = per_seed(ordered) if ordered else []
  boards = list(dict.fromkeys(TASKS[t].board for t in ordered))
  board = {
    "model": model_name,
    "split": "dev",
    "average": average(main, "wyweb"),
    "averaged_tasks": [t for t in TASKS if TASKS[t].board == "wyweb" and TASKS[t].averaged],
    "clue_scores": clue_scores(main),
    "tasks": {t: r["dev"] for t, r in ordered.items()},
    "main_metric": {t: r["main_metric"] for t, r in ordered.items()},
    "dev_mean_std": {t: [r["dev_mean"], r["dev_std"]] for t, r in ordered.items()},
    "test": {t: r["test"] for t, r in ordered.items() if r["test"] is not None},
    "majority_baseline": {t: r["majority_baseline"] for t, r in ordered.items()},
    "linear_baseline": linear,  # {task: {"dev": metrics, "test": metrics or None}}
    "no_pretraining_baseline": {
      t: {"dev": r["dev"], "test": r["test"], "dev_mean_std": [r["dev_mean"], r["dev_std"]]} for t, r in twin.items()
    },
    "notes": {t: r["notes"] for t, r in ordered.items() if r.get("notes")},
    "failed": failed,
  }
  baseline = "majority class" + (" (WYWMT: copy the source)" if "wywmt" in ordered else "")
  sections = []
  for name in boards:
    on_board = lambda results: {t: r for t, r in results.items() if TASKS[t].board == name}  # noqa: E731
    rows = {
      **model_rows(model_name, on_board(ordered), "dev"),
      **model_rows(TWIN, on_board(twin), "dev"),
      baseline if name == "wyweb" else "majority class": majority,
    }
    linear_rows = {
      split: {t: _main(r[split], ordered[t]) for t, r in on_board(linear).items() if r[split]}
      for split in ("dev", "test")
    }
    if linear_rows["dev"]:
      rows[LINEAR] = linear_rows["dev"]
    sections.append(f"## {board_of(name).title}\n\n" + table(rows, name))
    sections += [
      TASKS[t].board_tables(r) for t, r in ordered.items() if TASKS[t].board == name and TASKS[t].board_tables
    ]
    test_rows = {**model_rows(model_name, on_board(ordered), "test"), **model_rows(TWIN, on_board(twin), "test")}
    if test_rows:
      if linear_rows["test"]:
        test_rows[LINEAR] = linear_rows["test"]
      sections.append(f"## {board_of(name).title}: test split\n\n" + table(test_rows, name))
  if failed:
    sections.append(
      "## Failed\n\n" + "".join(f"- {TASKS[t].column if t in TASKS else t}: {error}\n" for t, error in failed.items())
    )
  notes = [
    f"- {board_of(name).average.split(' (')[0]}: {board_of(name).note}"
    for name in boards
    if average(main, name) is not None
  ]
  if len(seeds) > 1:
    notes.append(
      f"- {model_name}: the best-dev seed's scores (its test predictions are the submission); below "
      f"it, the mean ± std (population) of the {len(seeds)} seeds' scores"
    )
  if twin:
    notes.append(
      f"- {TWIN}: {model_name} fine-tuned from random weights (its architecture and vocabulary, "
      "config.init_weights='random') with the same recipe and seeds: the gap to it is what the "
      "pretraining adds"
    )
  if board["test"]:
    notes.append("- test split: each seed's parameters chosen on dev, as for the submission")
  notes += [_clue_note(name, score) for name, score in board["clue_scores"].items()]
  notes += [_note(t, r) for t, r in ordered.items()]
  notes += [f"- {LINEAR}: {linear_baseline.NOTE}"] if linear else []
  title = "dev and test" if board["test"] else "dev"
  (out / "leaderboard.md").write_text(
    f"# {model_name}: {title} scores (×100)\n\n" + "\n".join(sections) + "\n" + "\n".join(notes) + "\n",
    encoding="utf-8",
  )
  storage.write_json(out / "leaderboard.json", board)
  return board


def _clue_note(name: str, score: dict) -> str:
  """What a CLUE score is, under the tables: a partial one must not pass for CLUE's."""
  tasks = ", ".join(TASKS[t].column + (" (EM)" if TASKS[t].main_metric == "em" else "") for t in score["of"])
  line = f"- {name}: the mean of {tasks}, as CLUE publishes it (on its test sets; dev here)"
  if not score["complete"]:
    line += f"; partial: only {len(score['tasks'])} of its {len(score['of'])} tasks ran, not CLUE's number"
  return line


def _note(task: str, result: dict) -> str:
  """One line under the tables: the task's main metric, its own note, and results.json's notes on its data."""
  line = f"- {TASKS[task].column}: {result['main_metric']}"
  if TASKS[task].board_note:
    line += f" ({TASKS[task].board_note(result)})"
  return line + "".join(f"; {split}: {note}" for split, notes in result.get("notes", {}).items() for note in notes)


def _pyplot():
  """pyplot on its file-only backend, imported only by the commands that draw (it takes 0.45 s)."""
  import matplotlib  # pylint: disable=import-outside-toplevel

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  return plt


def plot_confusion(path, labels, matrix, title: str) -> None:
  # Labels without an ASCII name (C-CLUE predicates) are shown by index.
  names = [ASCII_LABELS.get(label, label if label.isascii() else f"#{i}") for i, label in enumerate(labels)]
  many = len(names) > 30  # IFLYTEK's 119 classes: colours, no counts
  side = 1.0 + 0.6 * min(len(names), 30)
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(side, side))
  ax.imshow(matrix, cmap="Blues")
  ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=4 if many else None)
  ax.set_yticks(range(len(names)), names, fontsize=4 if many else None)
  ax.set_xlabel("predicted")
  ax.set_ylabel("gold")
  ax.set_title(title)
  peak = max(max(row) for row in matrix) or 1
  for i, row in enumerate(matrix if not many else []):
    for j, count in enumerate(row):
      ax.text(j, i, str(count), ha="center", va="center", fontsize=8, color="white" if count > peak / 2 else "black")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def plot_curves(path, metrics_file, main_metric: str, title: str) -> None:
  """Training loss and the dev metric against steps, from a run's metrics.jsonl."""
  records = [record for _, record in files.json_records(metrics_file)]
  train = [(r["step"], r["loss"]) for r in records if "loss" in r]
  dev = [(r["step"], r[f"dev_{main_metric}"]) for r in records if f"dev_{main_metric}" in r]
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(6, 4))
  if train:
    ax.plot(*zip(*train), color="tab:blue", label="train loss")
  ax.set_xlabel("step")
  ax.set_ylabel("train loss")
  dev_ax = ax.twinx()
  dev_ax.plot(*zip(*dev), color="tab:orange", marker="o", label=f"dev {main_metric}")
  dev_ax.set_ylabel(f"dev {main_metric}")
  ax.set_title(title)
  fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.92), ncol=2, fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def plot_pretraining(path, metrics_file, probe_keys, title: str) -> None:
  """A pretraining run's validation MLM loss and its probes' dev scores against steps.

  The probes' scores are the `probe_keys` of its metrics.jsonl.
  """
  records = [record for _, record in files.json_records(metrics_file)]
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(6, 4))
  loss = [(r["step"], r["valid_loss"]) for r in records if "valid_loss" in r]
  if loss:
    ax.plot(*zip(*loss), color="C0", marker="o", label="validation MLM loss")
  ax.set_xlabel("pretraining step")
  ax.set_ylabel("validation MLM loss")
  probe_ax = ax.twinx()
  for i, key in enumerate(probe_keys):
    points = [(r["step"], r[key]) for r in records if key in r]
    if points:
      probe_ax.plot(*zip(*points), color=f"C{i + 1}", marker="s", label=f"{key} (dev)")
  probe_ax.set_ylabel("probe dev score")
  ax.set_title(title)
  fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.92), ncol=2, fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)

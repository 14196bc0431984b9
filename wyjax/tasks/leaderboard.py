"""leaderboard.md / leaderboard.json in the shape of the WYWEB README table, and the plots.

One row per model (and one for the majority-class baseline), one column per task in WYWEB's
order, scores ×100 on the dev split. Avg. is WYWEB's: the mean of the 8 tasks other than
WYWMT (its leaderboard's 607.2 / 8 = 75.9 for DeBERTa-base), WYWMT's BLEU shown apart. A
second table shows the other classical benchmarks (CCPM, C-CLUE, AC-EVAL) without an average,
and AC-EVAL adds its paper's category table. A third shows CLUE, the modern-Chinese benchmark,
with its score: the mean over its tasks present. A task that failed is listed with its error.
leaderboard.json also works as `python -m wyjax.export --results=…` (its `tasks` go into the
model card).
"""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)

from wyjax.tasks import aceval  # noqa: E402

AVERAGED = ("punc", "glner", "gjc", "tlc", "fspc", "xuci", "irc", "wywrc")  # WYWEB's average
COLUMNS = (*AVERAGED, "wywmt")
CLASSICAL_COLUMNS = ("ccpm", "ccpm_match", "ccpm_softmax", "ccpm_match_shared", "cclue_ner", "cclue_re", "cclue_spo",
                     "cclue_re_given_entities", "aceval")
CLUE_COLUMNS = ("afqmc", "tnews", "iflytek", "cmnli", "ocnli", "cluewsc2020", "csl", "cmrc2018", "chid", "c3")
HEADINGS = {"xuci": "XuCi", "ccpm": "CCPM (Cls)", "ccpm_match": "CCPM (Match)", "ccpm_softmax": "CCPM (softmax)",
            "ccpm_match_shared": "CCPM (Match, one encoder)", "cclue_ner": "C-CLUE NER", "cclue_re": "C-CLUE RE",
            "cclue_spo": "C-CLUE triples", "cclue_re_given_entities": "C-CLUE RE (given entities)",
            "aceval": "AC-EVAL", "cluewsc2020": "WSC", "cmrc2018": "CMRC 2018", "chid": "ChID",
            "c3": "C³"}
# The plots' fonts may lack CJK glyphs: class names in ASCII.
ASCII_LABELS = {
    "先秦": "pre-Qin", "两汉": "Han", "魏晋南北朝": "Wei-Jin-N&S", "唐": "Tang", "宋": "Song", "元明": "Yuan-Ming",
    "清": "Qing", "儒藏": "Ru", "诗藏": "Shi", "佛藏": "Fo", "易藏": "Yi", "医藏": "Yi (med.)", "艺藏": "Yi (arts)",
    "子藏": "Zi", "集藏": "Ji", "道藏": "Dao", "史藏": "Shi (hist.)", "S-。": "S-period", "S-？": "S-question",
    "S-！": "S-exclaim", "S-，": "S-comma", "S-、": "S-enum", "S-；": "S-semicolon", "S-：": "S-colon",
}


def _cell(value) -> str:
  return "–" if value is None else f"{100 * value:.2f}"


def wyweb_average(scores: dict[str, float]) -> float | None:
  """WYWEB's average: the mean of the 8 non-MT tasks present (None when none is)."""
  return _mean(scores, AVERAGED)


def clue_score(scores: dict[str, float]) -> float | None:
  """CLUE's score: the mean over its tasks present (None when none is)."""
  return _mean(scores, CLUE_COLUMNS)


def _mean(scores: dict[str, float], tasks) -> float | None:
  present = [scores[t] for t in tasks if t in scores]
  return sum(present) / len(present) if present else None


WYWEB_AVERAGE = ("Avg. (WYWMT apart)", wyweb_average)


def table(rows: dict[str, dict[str, float]], order=COLUMNS, average=WYWEB_AVERAGE) -> str:
  """Markdown table: rows {model: {task: score in [0, 1]}}, the tasks of `order` present, and
  first `average`, (heading, function of a row), unless it is None."""
  columns = [c for c in order if any(c in scores for scores in rows.values())]
  headings = [average[0]] if average else []
  lines = ["| " + " | ".join(["Model", *headings, *(HEADINGS.get(c, c.upper()) for c in columns)]) + " |",
           "|---" * (len(columns) + 1 + len(headings)) + "|"]
  for model, scores in rows.items():
    cells = [_cell(average[1](scores))] if average else []
    lines.append("| " + " | ".join([model, *cells, *(_cell(scores.get(c)) for c in columns)]) + " |")
  return "\n".join(lines) + "\n"


def write(out, model_name: str, results: dict[str, dict], failed: dict[str, str] | None = None) -> dict:
  """leaderboard.md and leaderboard.json from {task: results.json of wyjax.finetune} and
  {task: error} of the tasks that failed."""
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  failed = failed or {}
  ordered = {t: results[t] for t in COLUMNS + CLASSICAL_COLUMNS + CLUE_COLUMNS if t in results}
  main = {t: r["dev"][r["main_metric"]] for t, r in ordered.items()}
  majority = {t: r["majority_baseline"][r["main_metric"]] for t, r in ordered.items()}
  board = {
      "model": model_name, "split": "dev", "average": wyweb_average(main), "averaged_tasks": list(AVERAGED),
      "clue_score": clue_score(main),
      "tasks": {t: r["dev"] for t, r in ordered.items()},
      "main_metric": {t: r["main_metric"] for t, r in ordered.items()},
      "dev_mean_std": {t: [r["dev_mean"], r["dev_std"]] for t, r in ordered.items()},
      "test": {t: r["test"] for t, r in ordered.items() if r["test"] is not None},
      "majority_baseline": {t: r["majority_baseline"] for t, r in ordered.items()},
      "notes": {t: r["notes"] for t, r in ordered.items() if r.get("notes")},
      "failed": failed,
  }
  baseline = "majority class" + (" (WYWMT: copy the source)" if "wywmt" in ordered else "")
  sections = []
  if any(t in ordered for t in COLUMNS):
    sections.append("## WYWEB\n\n" + table({model_name: main, baseline: majority}, COLUMNS))
  if any(t in ordered for t in CLASSICAL_COLUMNS):
    sections.append("## Other classical benchmarks\n\n"
                    + table({model_name: main, baseline: majority}, CLASSICAL_COLUMNS, average=None))
  if "aceval" in ordered:
    r = ordered["aceval"]
    protocols = {name: r[name] for name in ("transfer", "dev_finetune") if r.get(name)}
    sections.append("## AC-EVAL (accuracy ×100; encoders, not the paper's prompting: not comparable)\n\n"
                    + aceval_tables({**protocols, "chance": r["majority_baseline"]}))
  if any(t in ordered for t in CLUE_COLUMNS):
    sections.append("## CLUE (modern Chinese)\n\n"
                    + table({model_name: main, "majority class": majority}, CLUE_COLUMNS, ("CLUE score", clue_score)))
  if failed:
    sections.append("## Failed\n\n" + "".join(f"- {HEADINGS.get(t, t.upper())}: {error}\n"
                                               for t, error in failed.items()))
  notes = [_note(t, r) for t, r in ordered.items()]
  if any(t in ordered for t in CLUE_COLUMNS):
    notes.insert(0, "- CLUE score: the mean of the CLUE tasks shown (CLUE's own averages all of its tasks)")
  if any(t in ordered for t in AVERAGED):
    notes.insert(0, "- Avg.: the mean of the WYWEB tasks shown other than WYWMT (WYWEB averages its 8 non-MT tasks)")
  (out / "leaderboard.md").write_text(f"# {model_name}: dev scores (×100)\n\n" + "\n".join(sections)
                                      + "\n" + "\n".join(notes) + "\n", encoding="utf-8")
  (out / "leaderboard.json").write_text(json.dumps(board, indent=2, ensure_ascii=False), encoding="utf-8")
  return board


def _note(task: str, result: dict) -> str:
  """One line under the tables: the task's main metric and what results.json notes about it."""
  line = f"- {HEADINGS.get(task, task.upper())}: {result['main_metric']}"
  if task == "tlc":
    line += f" (dynasty, 7 classes; period accuracy {100 * result['dev']['period_accuracy']:.2f})"
  return line + "".join(f"; {split}: {note}" for split, notes in result.get("notes", {}).items() for note in notes)


def aceval_tables(rows: dict[str, dict]) -> str:
  """Markdown in the shape of the AC-EVAL paper: accuracy (×100) per category and their
  average, then per subject; rows {name: scores of wyjax.tasks.aceval.scores}."""
  categories = list(aceval.CATEGORIES)
  lines = ["| Model | " + " | ".join(categories) + " | Average |", "|---" * (len(categories) + 2) + "|"]
  for name, scores in rows.items():
    lines.append(f"| {name} | " + " | ".join(_cell(scores.get(f"category/{c}")) for c in categories)
                 + f" | {_cell(scores.get('average'))} |")
  lines += ["", "| Model | " + " | ".join(aceval.SUBJECTS) + " |", "|---" * (len(aceval.SUBJECTS) + 1) + "|"]
  for name, scores in rows.items():
    lines.append(f"| {name} | " + " | ".join(_cell(scores.get(f"subject/{s}")) for s in aceval.SUBJECTS) + " |")
  return "\n".join(lines) + "\n"


def plot_confusion(path, labels, matrix, title: str) -> None:
  # Labels without an ASCII name (C-CLUE predicates) are shown by index.
  names = [ASCII_LABELS.get(label, label if label.isascii() else f"#{i}") for i, label in enumerate(labels)]
  many = len(names) > 30  # IFLYTEK's 119 classes: colours, no counts
  side = 1.0 + 0.6 * min(len(names), 30)
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
  records = [json.loads(line) for line in pathlib.Path(metrics_file).read_text().splitlines()]
  train = [(r["step"], r["loss"]) for r in records if "loss" in r]
  dev = [(r["step"], r[f"dev_{main_metric}"]) for r in records if f"dev_{main_metric}" in r]
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

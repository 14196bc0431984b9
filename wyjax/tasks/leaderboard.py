"""leaderboard.md / leaderboard.json in the shape of the WYWEB README table, and the plots.

One row per model (and one for the majority-class baseline), one column per task in WYWEB's
order, scores ×100 on the dev split, Avg. over the tasks that have a score; a second table
does the same for the other classical benchmarks (CCPM, C-CLUE, AC-EVAL), and AC-EVAL adds
its paper's category table. leaderboard.json also works as `python -m wyjax.export
--results=…` (its `tasks` go into the model card).
"""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)

from wyjax.tasks import aceval  # noqa: E402

COLUMNS = ("punc", "glner", "gjc", "tlc", "fspc", "xuci", "irc", "wywrc", "wywmt")
CLASSICAL_COLUMNS = ("ccpm", "ccpm_match", "cclue_ner", "cclue_re", "aceval")
HEADINGS = {"xuci": "XuCi", "ccpm": "CCPM (Cls)", "ccpm_match": "CCPM (Match)", "cclue_ner": "C-CLUE NER",
            "cclue_re": "C-CLUE RE", "aceval": "AC-EVAL"}
# The plots' fonts may lack CJK glyphs: class names in ASCII.
ASCII_LABELS = {
    "先秦": "pre-Qin", "两汉": "Han", "魏晋南北朝": "Wei-Jin-N&S", "唐": "Tang", "宋": "Song", "元明": "Yuan-Ming",
    "清": "Qing", "儒藏": "Ru", "诗藏": "Shi", "佛藏": "Fo", "易藏": "Yi", "医藏": "Yi (med.)", "艺藏": "Yi (arts)",
    "子藏": "Zi", "集藏": "Ji", "道藏": "Dao", "史藏": "Shi (hist.)", "S-。": "S-period", "S-？": "S-question",
    "S-！": "S-exclaim", "S-，": "S-comma", "S-、": "S-enum", "S-；": "S-semicolon", "S-：": "S-colon",
}


def _cell(value) -> str:
  return "–" if value is None else f"{100 * value:.2f}"


def table(rows: dict[str, dict[str, float]], order=COLUMNS) -> str:
  """Markdown table: rows {model: {task: score in [0, 1]}}, the tasks of `order` present."""
  columns = [c for c in order if any(c in scores for scores in rows.values())]
  lines = ["| Model | Avg. | " + " | ".join(HEADINGS.get(c, c.upper()) for c in columns) + " |",
           "|---" * (len(columns) + 2) + "|"]
  for model, scores in rows.items():
    present = [scores[c] for c in columns if c in scores]
    average = sum(present) / len(present) if present else None
    lines.append(f"| {model} | {_cell(average)} | " + " | ".join(_cell(scores.get(c)) for c in columns) + " |")
  return "\n".join(lines) + "\n"


def write(out, model_name: str, results: dict[str, dict]) -> dict:
  """leaderboard.md and leaderboard.json from {task: results.json of wyjax.finetune}."""
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  ordered = {t: results[t] for t in COLUMNS + CLASSICAL_COLUMNS if t in results}
  main = {t: r["dev"][r["main_metric"]] for t, r in ordered.items()}
  majority = {t: r["majority_baseline"][r["main_metric"]] for t, r in ordered.items()}
  board = {
      "model": model_name, "split": "dev", "average": sum(main.values()) / max(len(main), 1),
      "tasks": {t: r["dev"] for t, r in ordered.items()},
      "main_metric": {t: r["main_metric"] for t, r in ordered.items()},
      "dev_mean_std": {t: [r["dev_mean"], r["dev_std"]] for t, r in ordered.items()},
      "test": {t: r["test"] for t, r in ordered.items() if r["test"] is not None},
      "majority_baseline": {t: r["majority_baseline"] for t, r in ordered.items()},
  }
  baseline = "majority class" + (" (WYWMT: copy the source)" if "wywmt" in ordered else "")
  sections = []
  for title, order in (("WYWEB", COLUMNS), ("Other classical benchmarks", CLASSICAL_COLUMNS)):
    if any(t in ordered for t in order):
      sections.append(f"## {title}\n\n" + table({model_name: main, baseline: majority}, order))
  if "aceval" in ordered:
    r = ordered["aceval"]
    protocols = {name: r[key] for name, key in (("zero-shot", "zero_shot"), ("few-shot", "few_shot")) if r[key]}
    sections.append("## AC-EVAL (accuracy ×100; few-shot by cross-validation on dev)\n\n"
                    + aceval_tables({**protocols, "chance": r["majority_baseline"]}))
  notes = "\n".join(f"- {HEADINGS.get(t, t.upper())}: {r['main_metric']}"
                    + (" (dynasty, 7 classes; period accuracy " f"{100 * r['dev']['period_accuracy']:.2f})"
                       if t == "tlc" else "")
                    for t, r in ordered.items())
  (out / "leaderboard.md").write_text(f"# {model_name}: dev scores (×100)\n\n" + "\n".join(sections)
                                      + f"\n{notes}\n", encoding="utf-8")
  (out / "leaderboard.json").write_text(json.dumps(board, indent=2, ensure_ascii=False), encoding="utf-8")
  return board


def aceval_tables(rows: dict[str, dict]) -> str:
  """Markdown in the shape of the AC-EVAL paper: accuracy (×100) per category and their
  average, then per subject; rows {name: scores of tasks.aceval_scores}."""
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
  fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(names), 1.0 + 0.6 * len(names)))
  ax.imshow(matrix, cmap="Blues")
  ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
  ax.set_yticks(range(len(names)), names)
  ax.set_xlabel("predicted")
  ax.set_ylabel("gold")
  ax.set_title(title)
  peak = max(max(row) for row in matrix) or 1
  for i, row in enumerate(matrix):
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

"""Continued pretraining against pretraining from scratch, on this CPU.

    python benchmarks/continue_pretraining.py --clue=DATA/clue --out=/tmp/continue [--seeds=3]

1. A "modern" tiny encoder, standing in for RoBERTa-wwm-ext: the demo's architecture and recipe
   (configs/pretrain/deberta_tiny.py) pretrained on the CLUE files' modern-Chinese texts, exported.
2. Continued on the chinese-poetry corpus for the demo's steps, as a user's commands: (i) with its
   own vocabulary (its [UNK] rate on poetry reported); (ii) with the corpus's vocabulary
   transplanted and the encoder frozen for the first --frozen steps (the GuwenBERT recipe);
   (iii) from random weights (the demo's own pretraining).
3. Each fine-tuned on the demo's derived tasks (PUNC, TLC) with the demo's recipe, --seeds seeds.

Prints a markdown table (validation MLM loss at step 0 and at the end, PUNC and TLC dev and test,
mean ± std over seeds, beside the demo's baselines) and writes OUT/results.json. A rerun reuses
every finished step.
"""

import argparse
import json
import pathlib
import platform
import time

from commands import command, mean_std  # benchmarks/, beside this file

from wyjax.tasks import leaderboard
from wyjax.tasks.builders import poetry
from wyjax.train import suite

DEMO = "pretrain/deberta_tiny.py"
TEXT_FILES = (
  "c3/d-train.json",
  "c3/m-train.json",
  "iflytek/train.json",
  "ocnli/train.json",
  "csl/train.json",
  "tnews/train.json",
  "cmrc2018/cmrc2018_train.json",
  "chid/train.json",
  "cluewsc2020/train.json",
)
RECORDS_PER_DOCUMENT = 100


def _strings(value):
  if isinstance(value, str):
    yield value
  elif isinstance(value, dict):
    for item in value.values():
      yield from _strings(item)
  elif isinstance(value, list):
    for item in value:
      yield from _strings(item)


def _records(path: pathlib.Path):
  text = path.read_text(encoding="utf-8")
  if text.lstrip().startswith("{") and "\n{" not in text.strip():  # one JSON document (CMRC 2018's SQuAD layout)
    yield from json.loads(text)["data"]
  elif text.lstrip().startswith("["):  # a JSON array (C3)
    yield from json.loads(text)
  else:  # JSON lines (a record may hold U+2028, which str.splitlines would split on)
    yield from (json.loads(line) for line in text.split("\n") if line.strip())


def modern_texts(clue: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  """`out`, written once: every string of ten characters or more in the CLUE files' records.

  RECORDS_PER_DOCUMENT records go in a .txt file (a document: the validation split takes whole files).
  """
  if out.is_dir():
    return out
  partial = out.with_name(out.name + ".partial")
  partial.mkdir(parents=True, exist_ok=True)
  count = 0
  for name in TEXT_FILES:
    records = list(_records(clue / name))
    for start in range(0, len(records), RECORDS_PER_DOCUMENT):
      lines = [
        s.strip()
        for record in records[start : start + RECORDS_PER_DOCUMENT]
        for s in _strings(record)
        if len(s.strip()) >= 10
      ]
      (partial / f"{count:05d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
      count += 1
  partial.rename(out)
  return out


def valid_losses(workdir: pathlib.Path) -> tuple[float, float]:
  """The validation MLM loss at step 0 and at the last evaluation."""
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  losses = {r["step"]: r["valid_loss"] for r in records if "valid_loss" in r}
  return losses[0], losses[max(losses)]


def scores(results_dir: pathlib.Path) -> dict:
  """{task: {split: [main metric of each seed]}} of a suite run's results.json files."""
  out = {}
  for task in poetry.TASKS:
    result = json.loads((results_dir / task / "results.json").read_text())
    out[task] = {split: [s[task] for s in leaderboard.per_seed({task: result}, split)] for split in ("dev", "test")}
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument(
    "--clue", type=pathlib.Path, required=True, help="The CLUE files: a folder per task in its released format."
  )
  parser.add_argument("--out", type=pathlib.Path, required=True)
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--frozen", type=int, default=300, help="Frozen-encoder steps of (ii).")
  args = parser.parse_args()
  out = args.out.resolve()
  out.mkdir(parents=True, exist_ok=True)
  log = out / "commands.log"
  start = time.perf_counter()

  # 1. the modern model
  texts = modern_texts(args.clue.resolve(), out / "modern_texts")
  modern = out / "modern"
  command(
    log,
    "wyjax.pretrain",
    f"--config={DEMO}",
    f"--workdir={modern}",
    f"--config.corpus.source=text:{texts}",
    f"--config.data_dir={out / 'modern_corpus'}",
    "--prepare_corpus",
    "--config.corpus.valid_fraction=0.02",
  )
  modern_hf = out / "modern-hf"
  if not (modern_hf / "config.json").exists():
    command(log, "wyjax.export", f"--workdir={modern}", f"--out={modern_hf}")

  # 2. continued on poetry, and from random weights
  runs = {
    "(i) continued, its own vocabulary": [
      f"--config.init={modern_hf}",
      f"--config.corpus.vocab={modern_hf}",
      f"--config.data_dir={out / 'poetry_modern_vocab'}",
      "--prepare_corpus",
    ],
    f"(ii) continued, vocabulary transplanted, encoder frozen {args.frozen} steps": [
      f"--config.init={modern_hf}",
      f"--config.freeze_encoder_steps={args.frozen}",
    ],
    "(iii) from random weights (the demo's pretraining)": [],
  }
  folders, said = {}, {}
  for i, (name, flags) in enumerate(runs.items()):
    folders[name] = out / f"poetry_{i}"
    said[name] = command(log, "wyjax.pretrain", f"--config={DEMO}", f"--workdir={folders[name]}", *flags)

  # 3. fine-tuned on the demo's tasks
  tasks = out / "tasks"
  if not (tasks / "summary.json").exists():
    poetry.build_poetry_tasks(tasks)
  steps = {poetry.PUNCTUATION: 300, poetry.DYNASTY: 750}
  table = {}
  for name, folder in folders.items():
    suite.run(
      init=str(folder),
      data_root=tasks,
      out=folder / "finetuned",
      tasks=list(poetry.TASKS),
      name=name,
      batch_size=32,
      seeds=args.seeds,
      per_task={t: dict(num_train_steps=n, eval_every=n // 4) for t, n in steps.items()},
    )
    table[name] = {
      "valid_loss": valid_losses(folder),
      "scores": scores(folder / "finetuned"),
      "vocabulary": next((line for line in said[name].splitlines() if "vocabulary" in line), ""),
    }

  lines = [
    "| Pretraining (1,500 steps on poetry) | valid MLM loss, step 0 → end | PUNC dev | PUNC test | TLC dev | "
    "TLC test |",
    "|---|---|---|---|---|---|",
  ]
  for name, row in table.items():
    s = row["scores"]
    lines.append(
      f"| {name} | {row['valid_loss'][0]:.2f} → {row['valid_loss'][1]:.2f} | "
      + " | ".join(mean_std(s[t][split]) for t in (poetry.PUNCTUATION, poetry.DYNASTY) for split in ("dev", "test"))
      + " |"
    )
  print("\n".join(lines))
  print(f"\nbaselines (the same tasks): {out / 'poetry_2' / 'finetuned' / 'leaderboard.md'}")
  for name, row in table.items():
    if row["vocabulary"]:
      print(f"{name}: {row['vocabulary']}")
  record = {
    "table": table,
    "seconds": round(time.perf_counter() - start),
    "machine": platform.processor() or platform.machine(),
    "seeds": args.seeds,
    "frozen": args.frozen,
  }
  (out / "results.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))


if __name__ == "__main__":
  main()

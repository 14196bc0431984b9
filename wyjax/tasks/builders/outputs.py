"""The files a task builder writes in its --out folder: {train,dev,test}.tsv and summary.json.

They may be a user's results: a folder already holding any of them (the user's own, or an
earlier build's) is refused unless `overwrite`. Each file is written under a temporary name and
renamed when complete (storage.written_whole), so a failed or interrupted build leaves nothing
half-written, and the files already there as they were.
"""
import json
import pathlib

from wyjax.core import guards
from wyjax.core.storage import written_whole

SPLITS = ("train", "dev", "test")
SUMMARY = "summary.json"


def claim(out, overwrite: bool, suffix: str = ".tsv") -> pathlib.Path:
  """out, created if need be; refused when it holds a file the build would replace or remove."""
  out = pathlib.Path(out)
  held = [name for name in [f"{s}{suffix}" for s in SPLITS] + [SUMMARY]
          if (out / name).exists() or (out / name).is_symlink()]
  if held and not overwrite:
    raise guards.RunError(f"--out {out} already holds {', '.join(held)}; choose an empty or new folder, or pass "
                          "--overwrite to replace them")
  out.mkdir(parents=True, exist_ok=True)
  return out


def write_summary(out: pathlib.Path, counts) -> dict:
  summary = dict(sorted(counts.items()))
  with written_whole(out / SUMMARY, encoding="utf-8") as f:
    json.dump(summary, f, ensure_ascii=False, indent=2)
  return summary

"""The files a task builder writes in its --out folder: {train,dev,test}.tsv and summary.json.

A folder already holding any of them is refused unless `overwrite`. They are written under temporary names and
renamed together when complete, so a failed build leaves the files already there as they were.
"""

import collections
import contextlib
import json
import logging
import pathlib

from wyjax.core import guards
from wyjax.core.storage import written_together

SPLITS = ("train", "dev", "test")
SUMMARY = "summary.json"


def claim(out, overwrite: bool) -> pathlib.Path:
  """out, created if need be; refused when it holds a file the build would replace or remove."""
  out = pathlib.Path(out)
  held = [
    name for name in [f"{s}.tsv" for s in SPLITS] + [SUMMARY] if (out / name).exists() or (out / name).is_symlink()
  ]
  if held and not overwrite:
    raise guards.RunError(
      f"--out {out} already holds {', '.join(held)}; choose an empty or new folder, or pass --overwrite to replace them"
    )
  out.mkdir(parents=True, exist_ok=True)
  return out


@contextlib.contextmanager
def written(out: pathlib.Path, counts: collections.Counter, overwrite: bool):
  """{split: its open .tsv file}; when the block ends, the split files and summary.json appear in `out` together.

  - Files there are replaced only if `overwrite` (never one another command wrote meanwhile:
    storage.written_together).
  - A split with no examples gets no file (an empty one would read as a broken split): one already there is
    removed, the summary notes no_<split>_split, and a warning says so.
  """
  with written_together(
    [out / f"{s}.tsv" for s in SPLITS] + [out / SUMMARY], encoding="utf-8", replace=overwrite
  ) as files:
    yield dict(zip(SPLITS, files))
    for split in SPLITS:
      if not counts[f"{split}_examples"]:
        counts[f"no_{split}_split"] = 1
        logging.warning("%s: no document fell into the %s split; no %s.tsv written", out, split, split)
    json.dump(counts, files[-1], ensure_ascii=False, indent=2, sort_keys=True)
  for split in SPLITS:
    if counts[f"no_{split}_split"]:
      (out / f"{split}.tsv").unlink()

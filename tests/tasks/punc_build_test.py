import collections
import json
import subprocess
import sys
import unicodedata

import pytest

from wyjax.tasks import wyweb_files
from wyjax.tasks.builders import outputs, punc


def test_label_paragraph():
  text, tags = punc.label_paragraph("子曰：「學而時習之，不亦說乎？」《詩》云 有朋")
  assert text == "子曰學而時習之不亦說乎詩云 有朋"
  assert tags == "O：OOOO，OOO？OOOOO"
  assert punc.label_paragraph("甲.乙,丙｜丁")[1] == "。，|O"


def test_split_long_cuts_after_sentence_ends():
  text, tags = "甲乙丙丁戊己庚辛", "O。OOO？OO"
  assert punc.split_long(text, tags, 5) == [("甲乙", "O。"), ("丙丁戊己", "OOO？"), ("庚辛", "OO")]


def test_build_punc_on_the_daizhige_sample(shared_data, tmp_path):
  out = tmp_path / "punc"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.tasks",
      "build-punc",
      f"--daizhige={shared_data / 'daizhige_sample'}",
      f"--out={out}",
      "--dev_fraction=0.3",
      "--test_fraction=0.3",
    ],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr
  summary = json.loads((out / "summary.json").read_text())
  total = 0
  for split in ("train", "dev", "test"):  # a split no document fell into has no file, and says so
    if summary.get(f"no_{split}_split"):
      assert not (out / f"{split}.tsv").exists() and f"{split}_examples" not in summary
      continue
    examples = wyweb_files.read_split("punc", out, split)
    for e in examples:
      assert not any(unicodedata.category(c).startswith("P") for c in e.text), e.text
      assert len(e.text) <= 510 and any(label != "O" for label in e.labels)
    total += len(examples)
  assert total > 300


def test_commands_refuse_unknown_commands_and_the_other_commands_flags(tmp_path):
  out = tmp_path / "out"
  common = ["--daizhige=DIR", f"--out={out}"]
  for args, message in (
    (["bogus", *common], "expected one command (build-punc | build-gjc), got: bogus"),
    (["build-punc", "--per_collection=5", *common], "--per_collection is for build-gjc, not build-punc"),
    (["build-gjc", "--collections=史藏", *common], "--collections is for build-punc, not build-gjc"),
    (
      ["build-punc", "--collections=史臧", *common],  # a typo built nothing, exit 0
      "flag --collections=['史臧']: expected Daizhige's collections, among 佛藏,",
    ),
  ):
    result = subprocess.run([sys.executable, "-m", "wyjax.tasks", *args], capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
  assert not out.exists()


@pytest.mark.parametrize("command", ["build-punc", "build-gjc"])
def test_builders_never_replace_files_unless_told(shared_data, tmp_path, command):
  """The user's train/dev/test.tsv in --out are refused (the build replaced train and deleted the
  others); with --overwrite, a build whose disk fills leaves them byte for byte: the files appear
  together or not at all (build-punc renamed each file as it closed, build-gjc split by split, so
  a failure left a new train or test.tsv beside the old ones). A full disk is simulated by a
  file-size limit (`ulimit -f`, RLIMIT_FSIZE: a write beyond it fails with EFBIG as ENOSPC does):
  the book goes to dev (its document fraction is below 0.99), whose 5 kB exceed the 2 KiB limit at
  its last flush, when it closes."""
  history = (shared_data / "daizhige_sample" / "史藏" / "正史" / "史记.txt").read_text(encoding="utf-8")
  paragraphs = [line for line in history.splitlines() if len(line) > 40][:16]  # 1,500 characters
  book = tmp_path / "daizhige" / "史藏" / "正史" / "a.txt"
  book.parent.mkdir(parents=True)
  book.write_text("".join(p + "\n" for p in paragraphs), encoding="utf-8")
  out = tmp_path / "out"
  out.mkdir()
  mine = {f"{split}.tsv": f"my {split}\n" for split in ("train", "dev", "test")}
  for name, text in mine.items():
    (out / name).write_text(text)
  command = [
    sys.executable,
    "-m",
    "wyjax.tasks",
    command,
    f"--daizhige={book.parents[2]}",
    f"--out={out}",
    "--dev_fraction=0.99",
    "--test_fraction=0",
  ]
  run = lambda *flags, limit="unlimited": subprocess.run(
    ["bash", "-c", f'ulimit -f {limit} && exec "$@"', "bash", *command, *flags], capture_output=True, text=True
  )
  refused = run()
  assert refused.returncode == 1 and refused.stderr.splitlines() == [
    f"wyjax: error: --out {out} already holds train.tsv, dev.tsv, test.tsv; choose an empty or new folder, or pass "
    "--overwrite to replace them"
  ]
  full = run("--overwrite", limit=2)
  assert full.returncode == 1 and full.stderr.splitlines()[-1] == f"wyjax: error: {out / 'dev.tsv'}: File too large", (
    full.stderr[-2000:]
  )
  assert {p.name: p.read_text() for p in out.iterdir()} == mine  # and no temporary file
  replaced = run("--overwrite")
  assert replaced.returncode == 0, replaced.stderr
  assert sorted(p.name for p in out.iterdir()) == ["dev.tsv", "summary.json"]  # the empty splits: no file
  assert len((out / "dev.tsv").read_text(encoding="utf-8").splitlines()) == 16


def test_a_file_that_appears_while_a_build_runs_is_not_replaced(tmp_path):
  """Without --overwrite a build's files are renamed as new ones: a train.tsv another command
  wrote meanwhile stays, the build is refused naming it, and none of its own files is left."""
  counts = collections.Counter(train_examples=1, dev_examples=1, test_examples=1)
  with pytest.raises(FileExistsError) as refused:
    with outputs.written(tmp_path, counts, overwrite=False) as files:
      files["train"].write("甲\tO\n")
      (tmp_path / "train.tsv").write_text("the user's\n", encoding="utf-8")
  assert refused.value.filename == str(tmp_path / "train.tsv")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["train.tsv"]
  assert (tmp_path / "train.tsv").read_text(encoding="utf-8") == "the user's\n"

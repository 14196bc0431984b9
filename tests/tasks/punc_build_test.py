import json
import subprocess
import sys
import unicodedata

from wyjax.tasks import wyweb_files
from wyjax.tasks.builders import punc


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
  result = subprocess.run([sys.executable, "-m", "wyjax.tasks", "build-punc",
                           f"--daizhige={shared_data / 'daizhige_sample'}", f"--out={out}",
                           "--dev_fraction=0.3", "--test_fraction=0.3"], capture_output=True, text=True)
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
  for args, message in ((["bogus", *common], "expected one command (build-punc | build-gjc), got: bogus"),
                        (["build-punc", "--per_collection=5", *common],
                         "--per_collection is for build-gjc, not build-punc"),
                        (["build-gjc", "--collections=經藏", *common], "--collections is for build-punc, not build-gjc")):
    result = subprocess.run([sys.executable, "-m", "wyjax.tasks", *args], capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
  assert not out.exists()

"""WYWMT end to end on real pairs: `python -m wyjax.finetune --config=configs/wywmt.py`, its
generated dev translations and scores, then `python -m wyjax.translate` on the run."""

import json
import math
import pathlib
import subprocess
import sys

import pytest
import sacrebleu

from tests.train.conftest import REPO_ROOT, pretrain_env
from wyjax.hf import loading, task_models
from wyjax.tasks import wyweb_files

DECODING = ["--config.decoding.beam_size=2", "--config.decoding.max_ratio=1.0", "--config.decoding.max_extra=8"]


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
  """A fresh tiny model trained 60 steps (less than an epoch: one dev evaluation) on 1000 real
  pairs; dev: the next 24."""
  root = tmp_path_factory.mktemp("wywmt")
  lines = (shared_data / "wyweb" / "wywmt" / "train.tsv").read_bytes().split(b"\n")
  data = root / "data"
  data.mkdir()
  (data / "train.tsv").write_bytes(b"\n".join(lines[:1000]))
  (data / "dev.tsv").write_bytes(b"\n".join(lines[1000:1024]))
  workdir = root / "run"
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.finetune",
      "--config=wywmt.py",
      f"--workdir={workdir}",
      f"--config.data_dir={data}",
      "--config.num_train_steps=60",
      "--config.batch_size=16",
      "--config.learning_rate=1e-3",
      "--config.log_every=10",
      "--config.max_length=64",
      *DECODING,
    ],
    cwd=root,
    env=pretrain_env(WYJAX_CACHE=str(root / "cache")),
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return data, workdir


def test_dev_translations_are_generated_scored_and_written(run):
  data, workdir = run
  results = json.loads((workdir / "results.json").read_text())
  dev = wyweb_files.read_wywmt(data / "dev.tsv")
  predictions = wyweb_files.read_wywmt(workdir / "seed_0" / "dev_predictions.tsv")  # never empty: it parses
  assert [p.source for p in predictions] == [e.source for e in dev]
  for p in predictions:
    assert len(p.target) <= math.ceil(1.0 * len(p.source)) + 8
  # The reported scores are those of the written translations.
  bleu = sacrebleu.BLEU(tokenize="zh").corpus_score([p.target for p in predictions], [[e.target for e in dev]])
  assert results["dev"]["bleu"] == pytest.approx(bleu.score / 100)
  assert {"chrf", "ter", "rouge1", "rouge2", "rougeL", "teacher_forced_bleu"} <= set(results["dev"])
  # Copying the source is the baseline row.
  copy = sacrebleu.BLEU(tokenize="zh").corpus_score([e.source for e in dev], [[e.target for e in dev]])
  assert results["majority_baseline"]["bleu"] == pytest.approx(copy.score / 100)
  losses = [
    r["loss"] for r in map(json.loads, (workdir / "seed_0" / "metrics.jsonl").read_text().splitlines()) if "loss" in r
  ]
  assert len(losses) == 6 and losses[-1] < losses[0] - 1.0, losses


def _translate(workdir, text: str, *flags):
  """The command on `text` as stdin (a lone surrogate, "\\udcff", is that byte, not UTF-8)."""
  return subprocess.run(
    [
      sys.executable,
      "-m",
      "wyjax.translate",
      f"--init={workdir}",
      "--beam=2",
      "--max_ratio=1.0",
      "--max_extra=8",
      "--max_length=64",
      *flags,
    ],  # a later --beam wins
    input=text,
    cwd=REPO_ROOT,
    env=pretrain_env(),
    capture_output=True,
    encoding="utf-8",
    errors="surrogateescape",
  )


def _torch_greedy(hf_dir, source_ids: list[int], limit: int) -> list[int]:
  """Greedy prefix-LM decoding written from the layout alone, on transformers' DeBERTa-v2:
  [CLS] source [SEP] target …, token types 0 | 1, query i sees key j iff types[:j+1].sum() <=
  types[:i+1].sum(); the logits at the last position give the next token; no special token
  but [SEP], [SEP] never first and forced as the limit-th token."""
  import torch
  import transformers

  model = transformers.AutoModelForMaskedLM.from_pretrained(hf_dir).eval()
  vocab = (pathlib.Path(hf_dir) / "vocab.txt").read_text(encoding="utf-8").splitlines()
  cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
  banned = [vocab.index(t) for t in ("[PAD]", "[CLS]", "[MASK]", "[UNK]")]
  ids, types, target = [cls, *source_ids, sep], [0] * (len(source_ids) + 2), []
  while True:
    input_ids, token_types = torch.tensor([ids]), torch.tensor([types])
    level = token_types.cumsum(-1)
    mask = (level[:, None, :] <= level[:, :, None]).long()
    with torch.no_grad():
      embedded = model.deberta.embeddings(
        input_ids=input_ids, token_type_ids=token_types, mask=torch.ones_like(input_ids)
      )
      hidden = model.deberta.encoder(embedded, mask).last_hidden_state[:, -1]
      logits = (
        model.cls(hidden) if model.legacy else model.lm_predictions(hidden, model.deberta.embeddings.word_embeddings)
      )[0]
    logits[banned] = -float("inf")
    if not target and limit > 1:
      logits[sep] = -float("inf")
    token = sep if len(target) + 1 >= limit else int(torch.argmax(logits))
    if token == sep:
      return target
    target.append(token)
    ids, types = ids + [token], types + [1]


def test_greedy_translations_equal_an_independent_decoder(run, tmp_path):
  """`wyjax.translate --beam=1` (KV-cached, batched, left-padded) from the workdir and from its
  transformers export gives what a plain step-by-step decoder on transformers gives."""
  data, workdir = run
  dev = wyweb_files.read_wywmt(data / "dev.tsv")[:6]
  model = loading.load(workdir / "seed_0")
  hf_dir = task_models.export(task_models.load(workdir / "seed_0"), tmp_path / "hf")  # as wyjax.export writes it
  expected = []
  for e in dev:
    source = [int(i) for i in model.tokenizer.encode_chars(e.source)[0]]
    limit = min(math.ceil(1.0 * len(source)) + 8, 64 - len(source) - 2)  # --max_ratio 1 --max_extra 8, 64 tokens
    expected.append(model.tokenizer.decode(_torch_greedy(hf_dir, source, limit)))
  assert any(expected)
  for init in (workdir, hf_dir):
    result = _translate(init, "".join(e.source + "\n" for e in dev), "--beam=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == expected, init


def test_translate_cli_reports_bad_lines_and_never_drops_them(run):
  """Only \\n ends a line (\\r\\n too): a lone \\r stays inside its line (text mode split it, and
  the output no longer lined up with the input); invalid UTF-8 is a bad line too."""
  _, workdir = run
  text = "子曰學而時習之\r不亦說乎\r\n   \n" + "天" * 70 + "\n有朋\udcff自遠方來\n不亦說乎\n"
  strict = _translate(workdir, text)
  assert strict.returncode != 0 and strict.stdout == ""
  assert "stdin:2: empty line" in strict.stderr
  assert "stdin:3: 70 characters; at most 61 fit (--max_length 64)" in strict.stderr
  assert "stdin:4: not valid UTF-8 (invalid start byte at byte 7 of the line)" in strict.stderr
  lenient = _translate(workdir, text, "--skip_bad_lines")
  assert lenient.returncode == 0, lenient.stderr[-3000:]
  out = lenient.stdout.split("\n")
  assert len(out) == 6 and out[5] == ""  # five lines, each ended by a newline
  assert out[0] and out[1] == out[2] == out[3] == "" and out[4]
  assert "3 bad line(s) left empty, 2 translated" in lenient.stderr


def test_standard_output_that_is_the_input_file_is_refused(tmp_path):
  """`translate --input=in.txt >> in.txt` would append the translations to the sentences they
  translate: refused before the model is read, in.txt as it was."""
  source = tmp_path / "in.txt"
  source.write_text("學而時習之\n", encoding="utf-8")
  with source.open("a") as stdout:
    result = subprocess.run(
      [sys.executable, "-m", "wyjax.translate", f"--init={tmp_path / 'no_model'}", f"--input={source}"],
      stdout=stdout,
      stderr=subprocess.PIPE,
      text=True,
      timeout=120,
    )
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.strip().splitlines()[-1] == (
    f"wyjax: error: standard output is the input file {source}; writing it would destroy the input: "
    "write to another file"
  )
  assert source.read_text(encoding="utf-8") == "學而時習之\n"

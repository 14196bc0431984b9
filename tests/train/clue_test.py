"""CLUE end to end: `--tasks=clue` runs every CLUE task with a folder, from CLUE's files, a
fresh tiny model a few steps each; the leaderboard gets its CLUE section and scores, each task
its submission under CLUE's file name."""

import json

import pytest

from tests.tasks.clue_test import write_pair_folders
from wyjax.train import suite


def _write(path, data):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def _lines(source, out, rows: slice):
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_bytes(b"".join(source.read_bytes().splitlines(keepends=True)[rows]))


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
  root = tmp_path_factory.mktemp("clue_data")
  clue_dir = shared_data / "clue"
  write_pair_folders(shared_data, root, tasks=("afqmc",))  # with a test file; CMNLI's is read in tests/tasks
  _lines(clue_dir / "ocnli" / "train.json", root / "ocnli" / "train.json", slice(1280, 1340))  # one "-" record
  _lines(clue_dir / "ocnli" / "dev.json", root / "ocnli" / "dev.json", slice(740, 760))  # one "-" record
  for split in ("train", "dev"):
    _lines(clue_dir / "cluewsc2020" / f"{split}.json", root / "cluewsc2020" / f"{split}.json", slice(0, 32))
    for kind in "dm":  # C3: the first documents of both kinds (2 to 4 choices)
      documents = json.loads((clue_dir / "c3" / f"{kind}-{split}.json").read_text(encoding="utf-8"))
      _write(root / "c3" / f"{kind}-{split}.json", documents[:12])
    squad = json.loads((clue_dir / "cmrc2018" / f"cmrc2018_{split}.json").read_text(encoding="utf-8"))
    squad["data"] = squad["data"][: 3 if split == "train" else 1]  # contexts of hundreds of characters
    _write(root / "cmrc2018" / f"cmrc2018_{split}.json", squad)
  out = tmp_path_factory.mktemp("clue_out")
  with pytest.MonkeyPatch.context() as patch:  # TFDS builds go to the session's cache
    patch.setenv("WYJAX_CACHE", str(tmp_path_factory.getbasetemp() / "wyjax-cache"))
    board = suite.run(
      init="",
      data_root=root,
      out=out,
      tasks=suite.task_names(["clue"]),
      name="tiny",
      num_train_steps=2,
      eval_every=2,
      batch_size=8,
      max_length=64,
      learning_rate=1e-3,
    )
  return root, out, board


def test_the_clue_group_runs_the_tasks_with_data(run):
  _, out, board = run
  assert suite.task_names(["clue"]) == [
    "afqmc",
    "tnews",
    "iflytek",
    "cmnli",
    "ocnli",
    "cluewsc2020",
    "csl",
    "cmrc2018",
    "chid",
    "c3",
  ]
  assert list(board["tasks"]) == ["afqmc", "ocnli", "cluewsc2020", "cmrc2018", "c3"] and not board["failed"]
  main = {t: board["tasks"][t][board["main_metric"][t]] for t in board["tasks"]}
  assert board["main_metric"]["cmrc2018"] == "em"
  scores = board["clue_scores"]  # no CMNLI: 1.1's classification; both partial
  assert list(scores) == ["CLUE 1.1 classification", "CLUE reading comprehension"] and board["average"] is None
  assert scores["CLUE 1.1 classification"]["tasks"] == ["afqmc", "ocnli", "cluewsc2020"]
  assert scores["CLUE 1.1 classification"]["score"] == pytest.approx(
    (main["afqmc"] + main["ocnli"] + main["cluewsc2020"]) / 3
  )
  assert scores["CLUE reading comprehension"]["score"] == pytest.approx((main["cmrc2018"] + main["c3"]) / 2)
  assert not any(s["complete"] for s in scores.values())
  markdown = (out / "leaderboard.md").read_text(encoding="utf-8")
  assert (
    "| Model | CLUE 1.1 classification (partial: 3 of 6) | CLUE reading comprehension (partial: 2 of 3) "
    "| AFQMC | OCNLI | WSC | CMRC 2018 | C³ |"
  ) in markdown and "## WYWEB" not in markdown
  note = "1 record(s) labelled '-' (no majority label): not trained on, not scored"
  assert f"- OCNLI: accuracy; train: {note}; dev: {note}\n" in markdown


def test_submissions_have_clue_names_and_lines(run):
  _, out, _ = run
  lines = (out / "afqmc" / "submission" / "afqmc_predict.json").read_text().splitlines()
  assert [json.loads(line)["id"] for line in lines] == list(range(500, 510))
  assert {json.loads(line)["label"] for line in lines} <= {"0", "1"}
  results = json.loads((out / "ocnli" / "results.json").read_text())
  assert results["test"] is None  # no test file: no submission
  wsc = json.loads((out / "cluewsc2020" / "results.json").read_text())
  assert set(wsc["dev"]) == {"accuracy", "macro_f1"} and 0 <= wsc["dev"]["accuracy"] <= 1


def test_reading_comprehension_across_windows_and_varying_choices(run):
  root, out, _ = run
  cmrc = json.loads((out / "cmrc2018" / "results.json").read_text())
  assert set(cmrc["dev"]) == {"em", "f1", "average"} and cmrc["majority_baseline"]["f1"] == 0.0
  predictions = (out / "cmrc2018" / "seed_0" / "dev_predictions.json").read_text(encoding="utf-8")
  answers = json.loads(predictions)  # {id: answer}: every dev question, each a piece of its context
  squad = json.loads((root / "cmrc2018" / "cmrc2018_dev.json").read_text(encoding="utf-8"))
  contexts = {qa["id"]: p["context"] for a in squad["data"] for p in a["paragraphs"] for qa in p["qas"]}
  assert set(answers) == set(contexts) and all(answers[q] in contexts[q] for q in answers)
  assert max(len(c) for c in contexts.values()) > 64  # several windows at max_length 64
  c3 = json.loads((out / "c3" / "results.json").read_text())
  assert 0 <= c3["dev"]["accuracy"] <= 1 and len(c3["labels"]) == 4
  assert c3["files"] == {
    split: [str(root / "c3" / f"{kind}-{split}.json") for kind in "dm"] for split in ("train", "dev")
  }  # the files read, named

"""CLUE's tasks from their released files: the real FewCLUE, OCNLI, C3 and CMRC 2018 samples,
AFQMC/CMNLI and CLUE-layout ChID fixtures; labels, ids, WSC's span marks, pair truncation,
doc-stride windows and span decoding, CMRC 2018's EM/F1 against its rules written out apart,
submissions and CLUE's scores (its published BERT-base numbers)."""

import difflib
import json
import re

import jax
import numpy as np
import pytest
from nltk.tokenize import word_tokenize

from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.models import EncoderConfig, MultipleChoice
from wyjax.models.heads import ABSENT
from wyjax.tasks import batching, clue, clue_reading_files, leaderboard, metrics, spans
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS
from wyjax.tasks.tagging import IGNORE
from wyjax.train.task_model import FRESH_TINY_MODEL


def _jsonl(path, records, newline="\n"):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + newline for r in records), encoding="utf-8")
  return path


def write_pair_folders(shared_data, root, tasks=("afqmc", "cmnli")) -> dict:
  """AFQMC and CMNLI folders in CLUE's format (no ids in train and dev, ids and no labels in
  test, string labels), their sentences taken from the real OCNLI files."""
  lines = (shared_data / "clue" / "ocnli" / "train.json").read_text("utf-8").splitlines()
  records = [json.loads(line) for line in lines]
  records = [r for r in records if r["label"] != "-"][:120]
  pairs = [{"sentence1": r["sentence1"], "sentence2": r["sentence2"]} for r in records]
  folders = {}
  labels = {"afqmc": lambda r: "1" if r["label"] == "entailment" else "0", "cmnli": lambda r: r["label"]}
  for task in tasks:
    label, folder = labels[task], root / task
    _jsonl(folder / "train.json", [{**p, "label": label(r)} for p, r in zip(pairs[:80], records[:80])])
    _jsonl(folder / "dev.json", [{**p, "label": label(r)} for p, r in zip(pairs[80:110], records[80:110])])
    _jsonl(folder / "test.json", [{"id": 500 + i, **p} for i, p in enumerate(pairs[110:])])
    folders[task] = folder
  return folders


# Records per released file (shared/data/README.md) and the NLI records labelled "-".
SIZES = {
  ("tnews", "train"): 1185,
  ("tnews", "dev"): 1098,
  ("iflytek", "train"): 3024,
  ("iflytek", "dev"): 1373,
  ("csl", "train"): 160,
  ("csl", "dev"): 160,
  ("cluewsc2020", "train"): 160,
  ("cluewsc2020", "dev"): 159,
  ("ocnli", "train"): 9000,
  ("ocnli", "dev"): 1000,
}


@pytest.mark.parametrize("task, split", SIZES)
def test_real_files_read_whole(shared_data, task, split):
  examples = clue.read_split(task, shared_data / "clue" / task, split)
  assert len(examples) == SIZES[task, split]
  unlabelled = sum(e.label is None for e in examples)
  assert unlabelled == {("ocnli", "train"): 14, ("ocnli", "dev"): 1}.get((task, split), 0)
  if task == "iflytek" and split == "train":  # all 119 classes occur in IFLYTEK's train file
    assert {e.label for e in examples} == set(range(119))
  if task == "tnews":  # the label file's 15 codes are the task's classes
    lines = (shared_data / "clue" / "tnews" / "labels.json").read_text().splitlines()
    codes = [json.loads(line)["label"] for line in lines]
    assert tuple(codes) == clue.TNEWS_LABELS


def test_wsc_marks_the_noun_phrase_and_the_pronoun(shared_data):
  first = clue.read_split("cluewsc2020", shared_data / "clue" / "cluewsc2020", "train")[0]
  # span1 树叶 at 22, span2 他 at 30 (the released record 0)
  assert first.text_a == ("为什么要出现一个身穿军装的高大男人？就像一片_树叶_飘入了树林，[他]走到了我的家人中间。")
  assert clue.FORMATS["cluewsc2020"].labels[first.label] == "false"
  assert clue.mark_wsc_spans("他说张三来了", (2, "张三"), (0, "他")) == "[他]说_张三_来了"


def test_pair_tasks_in_clue_format(shared_data, tmp_path):
  folders = write_pair_folders(shared_data, tmp_path)
  afqmc = clue.read_split("afqmc", folders["afqmc"], "train")
  assert [e.id for e in afqmc[:3]] == [0, 1, 2] and afqmc[0].text_b  # positions stand in for ids
  test = clue.read_split("cmnli", folders["cmnli"], "test")
  assert [e.id for e in test] == list(range(500, 510)) and all(e.label is None for e in test)
  lines = TASKS["cmnli"].submission(test, ["entailment"] * len(test))
  assert json.loads(lines[0]) == {"id": 500, "label": "entailment"}
  assert TASKS["cmnli"].submission_file == "cmnli_predict.json"


@pytest.mark.parametrize(
  "task, record, message",
  [
    ("tnews", {"sentence": "标题", "label": 105, "id": 1}, "label '105' is not one of"),
    ("ocnli", {"sentence1": "甲", "sentence2": "", "label": "neutral"}, "empty 'sentence2'"),
    ("afqmc", {"sentence1": "甲", "label": "1"}, "'sentence2'"),
    (
      "cluewsc2020",
      {
        "text": "他说张三来了",
        "label": "true",
        "idx": 0,
        "target": {"span1_text": "张三", "span1_index": 1, "span2_text": "他", "span2_index": 0},
      },
      "span1_text '张三' is not at span1_index 1",
    ),
    (
      "cluewsc2020",
      {
        "text": "他说张三来了",
        "label": "true",
        "idx": 1,  # text[-6:-5] is 他: a slice, not a position
        "target": {"span1_text": "张三", "span1_index": 2, "span2_text": "他", "span2_index": -6},
      },
      r"span2_index -6 is not a position in the text \(0 to 5\)",
    ),
    (
      "cluewsc2020",
      {
        "text": "他说张三来了",
        "label": "true",
        "idx": 1,
        "target": {"span1_text": "张三", "span1_index": 9, "span2_text": "他", "span2_index": 0},
      },
      "span1_index 9 is not a position in the text",
    ),
    ("tnews", {"sentence": "标题", "label": 100, "id": "²"}, r"id '²' is not a number \(digits 0-9\)"),
    ("csl", {"abst": "摘要", "keyword": [], "label": "0", "id": 0}, "'keyword' should be a list"),
  ],
)
def test_malformed_records_name_file_and_line(tmp_path, task, record, message):
  good = {
    "tnews": {"sentence": "标题", "label": 100, "id": 0},
    "ocnli": {"sentence1": "甲", "sentence2": "乙", "label": "neutral"},
    "afqmc": {"sentence1": "甲", "sentence2": "乙", "label": "1"},
    "cluewsc2020": {
      "text": "他说张三来了",
      "label": "true",
      "idx": 0,
      "target": {"span1_text": "张三", "span1_index": 2, "span2_text": "他", "span2_index": 0},
    },
    "csl": {"abst": "摘要", "keyword": ["摘"], "label": "0", "id": 0},
  }[task]
  path = _jsonl(tmp_path / "train.json", [good, record])
  with pytest.raises(FormatError, match=f"{path}:2: .*{message}"):
    clue.read_clue(task, path)


def test_a_file_is_labelled_throughout_or_not_at_all(tmp_path):
  path = _jsonl(tmp_path / "dev.json", [{"sentence": "甲", "label": 100}, {"sentence": "乙"}])
  with pytest.raises(FormatError, match=r"dev.json:2: some records have a 'label' and others do not"):
    clue.read_clue("tnews", path)


def test_pairs_are_cut_longest_first_with_token_types():
  tokenizer = Tokenizer(build_vocab(["甲乙丙丁戊己庚辛"]))
  example = clue.ClueExample(1, 0, "甲乙丙丁戊己", "庚辛", 1)
  features, cut = clue._featurize(example, tokenizer, max_length=8)  # 3 specials leave 5: 甲乙丙 + 庚辛
  chars = lambda text: list(tokenizer.encode_chars(text)[0])
  ids = [tokenizer.cls_id, *chars("甲乙丙"), tokenizer.sep_id, *chars("庚辛"), tokenizer.sep_id]
  np.testing.assert_array_equal(features["input_ids"], ids)
  np.testing.assert_array_equal(features["token_type_ids"], [0, 0, 0, 0, 0, 1, 1, 1])
  assert cut == 3 and features["label"] == 1


def test_accuracy_leaves_unlabelled_records_out_and_notes_them():
  task = TASKS["ocnli"]
  examples = [clue.ClueExample(i + 1, i, "甲", "乙", label) for i, label in enumerate([0, 1, None, 2])]
  predictions = ["contradiction", "neutral", "entailment", "neutral"]  # right, wrong, unscored, right
  assert task.score(examples, predictions)["accuracy"] == pytest.approx(2 / 3)
  assert task.notes(examples) == ["1 record(s) labelled '-' (no majority label): not trained on, not scored"]
  assert task.baseline(examples, examples[:2]) == ["contradiction"] * 2  # the first of three tied


def _result(score, metric="accuracy"):
  return {
    "dev": {metric: score},
    "main_metric": metric,
    "dev_mean": score,
    "dev_std": 0.0,
    "test": None,
    "majority_baseline": {metric: 0.5},
    "labels": [],
  }


def test_leaderboard_shows_the_clue_score_beside_the_wyweb_average(tmp_path):
  board = leaderboard.write(tmp_path, "m", {"gjc": _result(0.8), "afqmc": _result(0.7), "ocnli": _result(0.6)})
  assert board["clue_scores"] == {
    "CLUE 1.1 classification": {
      "score": pytest.approx(0.65),
      "tasks": ["afqmc", "ocnli"],
      "of": ["afqmc", "tnews", "iflytek", "ocnli", "cluewsc2020", "csl"],
      "complete": False,
    }
  }
  assert board["average"] == pytest.approx(0.8)
  markdown = (tmp_path / "leaderboard.md").read_text()
  assert (
    "## CLUE (modern Chinese)\n\n| Model | CLUE 1.1 classification (partial: 2 of 6) | AFQMC | OCNLI |\n"
    "|---|---|---|---|\n| m | 65.00 | 70.00 | 60.00 |"
  ) in markdown
  assert "## WYWEB" in markdown


# CLUE's README, BERT-base (test, ×100): AFQMC, TNEWS, IFLYTEK, CMNLI, WSC, CSL; CMRC 2018 (EM), ChID, C³.
BERT_BASE = {
  "afqmc": 73.70,
  "tnews": 56.58,
  "iflytek": 60.29,
  "cmnli": 79.69,
  "cluewsc2020": 62.0,
  "csl": 80.36,
  "cmrc2018": 71.60,
  "chid": 82.04,
  "c3": 64.50,
}


def _board(tmp_path, scores):
  results = {t: _result(v / 100, "em" if t == "cmrc2018" else "accuracy") for t, v in scores.items()}
  board = leaderboard.write(tmp_path, "m", results)
  return board, (tmp_path / "leaderboard.md").read_text(encoding="utf-8")


def test_the_clue_scores_are_clues_published_ones(tmp_path):
  board, markdown = _board(tmp_path, BERT_BASE)
  # CLUE's board: 412.62 / 6 = 68.77 (classification, 1.0), 218.14 / 3 = 72.71 (reading comprehension).
  assert (
    "| Model | CLUE 1.0 classification | CLUE reading comprehension | AFQMC | TNEWS | IFLYTEK | CMNLI | WSC "
    "| CSL | CMRC 2018 | ChID | C³ |"
  ) in markdown
  assert "| m | 68.77 | 72.71 | 73.70 | 56.58 | 60.29 | 79.69 | 62.00 | 80.36 | 71.60 | 82.04 | 64.50 |" in markdown
  scores = board["clue_scores"]
  assert list(scores) == ["CLUE 1.0 classification", "CLUE reading comprehension"]
  assert scores["CLUE 1.0 classification"]["score"] == pytest.approx(0.6877)
  assert scores["CLUE reading comprehension"]["score"] == pytest.approx(2.1814 / 3)
  assert all(s["complete"] and s["tasks"] == s["of"] for s in scores.values())
  assert "- CLUE reading comprehension: the mean of CMRC 2018 (EM), ChID, C³" in markdown
  assert "partial" not in markdown


def test_clue_1_1_puts_ocnli_in_cmnlis_place(tmp_path):
  # OCNLI at 73.69 (not a published number): (412.62 - 79.69 + 73.69) / 6 = 406.62 / 6 = 67.77.
  ocnli = {**{t: v for t, v in BERT_BASE.items() if t != "cmnli"}, "ocnli": 73.69}
  board, markdown = _board(tmp_path / "1.1", ocnli)
  assert "| Model | CLUE 1.1 classification | CLUE reading comprehension | AFQMC |" in markdown
  assert "| m | 67.77 | 72.71 |" in markdown and "CLUE 1.0" not in markdown
  assert board["clue_scores"]["CLUE 1.1 classification"]["complete"]
  board, markdown = _board(tmp_path / "both", {**BERT_BASE, "ocnli": 73.69})  # both NLI tasks: both boards
  assert "| Model | CLUE 1.0 classification | CLUE 1.1 classification | CLUE reading comprehension |" in markdown
  assert "| m | 68.77 | 67.77 | 72.71 |" in markdown


def test_a_partial_clue_score_says_so(tmp_path):
  # No NLI task: one classification score (1.1), (73.70 + 56.58 + 60.29 + 62.0) / 4 = 252.57 / 4 = 63.14.
  partial = {t: BERT_BASE[t] for t in ("afqmc", "tnews", "iflytek", "cluewsc2020", "cmrc2018")}
  board, markdown = _board(tmp_path, partial)
  assert (
    "| Model | CLUE 1.1 classification (partial: 4 of 6) | CLUE reading comprehension (partial: 1 of 3) "
    "| AFQMC | TNEWS | IFLYTEK | WSC | CMRC 2018 |\n"
  ) in markdown
  assert "| m | 63.14 | 71.60 | 73.70 |" in markdown
  assert board["clue_scores"]["CLUE reading comprehension"] == {
    "score": pytest.approx(0.716),
    "tasks": ["cmrc2018"],
    "of": ["cmrc2018", "chid", "c3"],
    "complete": False,
  }
  assert not board["clue_scores"]["CLUE 1.1 classification"]["complete"]
  assert "; partial: only 1 of its 3 tasks ran, not CLUE's number" in markdown


# --- CMRC 2018, ChID, C3 ------------------------------------------------------------------------------------


def test_windows_cover_a_long_context_and_answers_across_their_boundaries():
  context = "".join(chr(0x4E00 + i) for i in range(100))  # 100 distinct characters
  tokenizer = Tokenizer(build_vocab([context, "问题"]))
  # max_length 32, question 2 tokens: 27 context tokens a window, windows start 10 apart.
  for answer in ((20, 30), (25, 31), (95, 100), (0, 3)):  # (25, 31) crosses the first window's end
    features, _ = spans.windows(tokenizer, "问题", context, 32, 10, answer)
    assert features["input_ids"].shape == (9, 32)  # starts 0, 10, ..., 70, and 73 for the tail
    covered = set(features["char_index"][features["char_index"] >= 0].tolist())
    assert covered == set(range(100))
    holding = [w for w, (s, e) in enumerate(features["label"]) if (s, e) != (0, 0)]
    assert holding, answer
    for w in range(len(features["label"])):
      chars = features["char_index"][w]
      whole = chars.max() >= answer[1] - 1 and chars[chars >= 0].min() <= answer[0]
      assert (w in holding) == whole
      if whole:  # the label's tokens are the answer's first and last characters
        s, e = features["label"][w]
        assert (chars[s], chars[e] + 1) == answer
    # Logits peaking at the answer in the last window holding it decode back to its characters.
    w = holding[-1]
    logits = np.zeros((len(features["label"]), 2, 32), np.float32)
    logits[w, 0, features["label"][w][0]] = logits[w, 1, features["label"][w][1]] = 10.0
    logits[0, :, 0] = 50.0  # [CLS] and the question are never an answer
    assert spans.best_span(features, logits) == (answer, 20.0)


def test_a_span_longer_than_the_limit_is_not_chosen():
  context = "".join(chr(0x4E00 + i) for i in range(20))
  tokenizer = Tokenizer(build_vocab([context, "问"]))
  features, _ = spans.windows(tokenizer, "问", context, 64, 16)
  logits = np.zeros((1, 2, features["input_ids"].shape[-1]), np.float32)
  logits[0, 0, 3], logits[0, 1, 18], logits[0, 1, 5] = 9.0, 9.0, 5.0  # tokens 3..18: 16 characters
  assert spans.best_span(features, logits, max_answer_length=10) == ((0, 3), 14.0)  # tokens 3..5 = characters 0..2
  assert "label" in features and (features["label"] == IGNORE).all()  # no answer: unscored


def _official_cmrc(predictions, references):
  """CMRC 2018's evaluation rules written out separately: Chinese characters by regular
  expression, the runs between them by NLTK's word_tokenize (the official script's tokenizer),
  the longest common run by difflib, as cmrc2018_evaluate.py's calc_f1_score/calc_em_score."""
  punctuation = set("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")

  def segments(text):
    text = "".join(c for c in text.lower().strip() if c not in punctuation)
    return [
      s
      for part in re.findall(r"[\u4e00-\u9fa5]|[^\u4e00-\u9fa5]+", text)
      for s in ([part] if re.match(r"[\u4e00-\u9fa5]", part) else word_tokenize(part, preserve_line=True))
    ]

  em = f1 = 0
  for prediction, answers in zip(predictions, references):
    em += any(
      "".join(c for c in a.lower().strip() if c not in punctuation)
      == "".join(c for c in prediction.lower().strip() if c not in punctuation)
      for a in answers
    )
    scores = [0.0]
    for answer in answers:
      a, p = segments(answer), segments(prediction)
      common = difflib.SequenceMatcher(None, a, p, autojunk=False).find_longest_match(0, len(a), 0, len(p)).size
      if common:
        scores.append(2 * common / (len(a) + len(p)))
    f1 += max(scores)
  return 100 * em / len(predictions), 100 * f1 / len(predictions)


def test_cmrc_scores_follow_the_official_rules():
  predictions = [
    "法赫德国王国际机场。",
    "吉达港",
    "达曼的卫星城有现代经济中心 Khobar",
    "",
    "Aramco石油公司",
    "6车道公路",
    "约200万人",
  ]
  references = [
    ["法赫德国王国际机场"],
    ["沙特位于红海海岸的吉达港", "吉达港"],
    ["达曼的卫星城有现代经济中心 Khobar、世界最大的沙特Aramco石油公司所在地札哈兰"],
    ["达曼"],
    ["沙特Aramco石油公司"],
    ["一条6车道公路"],
    ["200万"],
  ]
  scores = metrics.cmrc_scores(predictions, references)
  em, f1 = _official_cmrc(predictions, references)
  assert 100 * scores["em"] == pytest.approx(em) and 100 * scores["f1"] == pytest.approx(f1)
  assert scores["average"] == pytest.approx((scores["em"] + scores["f1"]) / 2)
  # By hand: the first two match exactly (punctuation and the second reference); 200万 in 约200万人:
  # segments 200 万 vs 约 200 万 人, a common run of 2, F1 2·(2/4·2/2)/(2/4 + 2/2) = 2/3.
  assert metrics.cmrc_scores(predictions[:2], references[:2]) == {"em": 1.0, "f1": 1.0, "average": 1.0}
  assert metrics.cmrc_scores(predictions[6:], references[6:])["f1"] == pytest.approx(2 / 3)


# (prediction, references, EM, F1) worked by hand with cmrc2018_evaluate.py's rules: Chinese
# characters one segment each, NLTK's word_tokenize between them, sp_char removed (':' among
# them, '…' not), the longest common contiguous run, the best reference.
CMRC_BY_HAND = [
  ("364.6公里", ["364公里"], 0, 2 / 3),  # 364.6 公 里 vs 364 公 里: P = R = 2/3
  ("2,400万年", ["2400万年"], 0, 2 / 3),  # '2,400' is one word; ',' is not removed for EM
  ("0.304平方公里", ["0.304平方公里"], 1, 1),
  ("约1.93米", ["1.93米"], 0, 4 / 5),  # 约 1.93 米 vs 1.93 米: P 2/3, R 1
  ("Don't Stop", ["don't"], 0, 4 / 5),  # do n't stop vs do n't
  ("IBM's 360型", ["IBM 360型"], 0, 4 / 7),  # ibm 's 360 型 vs ibm 360 型: run 360 型, P 2/4, R 2/3
  ("12:30开始", ["12:30"], 0, 1 / 2),  # 1230 开 始 vs 1230
  ("好……", ["好"], 0, 2 / 3),  # 好 …… vs 好
  ("Hello  World", ["hello world"], 0, 1),  # EM keeps inner spaces; the words are equal
  ("吉达港", ["沙特吉达港", "吉达港。"], 1, 1),  # the second reference, its 。 removed
  ("", ["达曼"], 0, 0),
]


@pytest.mark.parametrize("prediction,references,em,f1", CMRC_BY_HAND)
def test_cmrc_scores_equal_the_official_scripts_worked_by_hand(prediction, references, em, f1):
  scores = metrics.cmrc_scores([prediction], [references])
  assert scores["em"] == em and scores["f1"] == pytest.approx(f1)


def test_cmrc_reads_squad_json_and_repairs_a_missed_start(tmp_path):
  data = {
    "version": "v1.0",
    "data": [
      {
        "paragraphs": [
          {
            "id": "P",
            "context": "达曼位于沙特阿拉伯的东部省。",
            "qas": [
              {"question": "达曼在哪？", "id": "Q0", "answers": [{"text": "沙特阿拉伯", "answer_start": 5}]},
              {
                "question": "",
                "id": "Q1",
                "answers": [{"text": "东部省", "answer_start": 10}, {"text": "沙特阿拉伯的东部省", "answer_start": 4}],
              },
            ],
          }
        ]
      }
    ],
  }
  path = tmp_path / "cmrc2018_dev.json"
  path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
  first, second = clue_reading_files.read_cmrc(path, labelled=True)
  assert first.answer == (4, 9) and first.start_moved  # answer_start 5 missed 沙特阿拉伯 at 4
  assert second.answers == ("东部省", "沙特阿拉伯的东部省") and not second.start_moved
  assert TASKS["cmrc2018"].notes([first, second]) == [
    "1 answer(s) whose answer_start missed their text, taken at its nearest occurrence (Q0)",
    "1 empty question(s), answered from the context alone (Q1)",
  ]
  assert json.loads(TASKS["cmrc2018"].submission([first, second], ["沙特", ""])[0]) == {"Q0": "沙特", "Q1": ""}


def test_cmrc_references_not_in_the_context_are_scored_not_trained_on(tmp_path):
  """The official dev and test files hold references that are not in the context (variant
  characters, paraphrases): the file reads, every reference is scored, the first one found
  is trained on, and the notes count the others."""
  qas = [
    {
      "question": "达曼在哪？",
      "id": "Q0",
      "answers": [{"text": "沙特的东部", "answer_start": 4}, {"text": "东部省", "answer_start": 10}],
    },
    {"question": "何国？", "id": "Q1", "answers": [{"text": "阿拉伯國", "answer_start": 6}]},
  ]
  path = tmp_path / "cmrc2018_dev.json"
  path.write_text(
    json.dumps(
      {"data": [{"paragraphs": [{"context": "达曼位于沙特阿拉伯的东部省。", "qas": qas}]}]}, ensure_ascii=False
    ),
    encoding="utf-8",
  )
  first, second = clue_reading_files.read_cmrc(path, labelled=True)
  assert first.answers == ("沙特的东部", "东部省") and first.answer == (10, 13) and first.unlocated == 1
  assert second.answers == ("阿拉伯國",) and second.answer == clue_reading_files.NO_SPAN
  tokenizer = Tokenizer(build_vocab(["达曼位于沙特阿拉伯的东部省。何国？在哪"]))
  features, _ = TASKS["cmrc2018"].featurize(second, tokenizer, 64)
  assert (features["label"] == IGNORE).all()  # nothing to train on
  assert TASKS["cmrc2018"].notes([first, second]) == [
    "2 reference answer(s) of 2 question(s) not in the context, scored but not trained on (Q0, Q1)",
    "1 question(s) with no reference in the context: not trained on (Q1)",
  ]
  assert TASKS["cmrc2018"].score([first, second], ["沙特的东部", "阿拉伯国"])["em"] == 0.5


def test_cmrc_official_dev_layout_scores_as_cmrc2018_evaluate(tmp_path):
  """The official dev file gives answer_start -1 to references it could not place, and 174 of its
  3,219 questions have a reference not verbatim in the context. Such a file (written here) reads as
  a dev or test split, and wyjax's EM/F1 on its submission are the official script's, which never
  reads answer_start and scores every reference by its text."""
  # Characters: 1898年 at 7, 京师大学堂 at 15; 2,740,000平方米 at 7, 海淀区 at 24.
  contexts = [
    "北京大学创建于1898年，初名京师大学堂，是中国近代第一所国立大学。",
    "该校占地面积约2,740,000平方米，校园位于海淀区。",
  ]
  references = [
    [[("1898年", 7), ("1898年", 7), ("1898", 7)], [("京师大学堂", 15), ("京師大學堂", -1)], [("近代首所国立大学", -1)]],
    [[("约274万平方米", -1), ("2,740,000平方米", 7)], [("海淀区", 24)], [("海淀区", -1)]],
  ]
  data = {
    "version": "v1.0",
    "data": [
      {
        "id": f"TEST_{a}",
        "title": "北大",
        "paragraphs": [
          {
            "id": f"TEST_{a}",
            "context": context,
            "qas": [
              {
                "question": "问？",
                "id": f"TEST_{a}_QUERY_{q}",
                "answers": [{"text": text, "answer_start": start} for text, start in answers],
              }
              for q, answers in enumerate(references[a])
            ],
          }
        ],
      }
      for a, context in enumerate(contexts)
    ],
  }
  for name in ("cmrc2018_dev.json", "cmrc2018_test.json"):
    (tmp_path / name).write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
  examples = clue_reading_files.read_split("cmrc2018", tmp_path, "test")
  assert examples == clue_reading_files.read_split("cmrc2018", tmp_path, "dev")
  assert [e.answer for e in examples] == [(7, 12), (15, 20), clue_reading_files.NO_SPAN, (7, 19), (24, 27), (24, 27)]
  task = TASKS["cmrc2018"]
  assert task.notes(examples) == [
    "1 answer(s) whose answer_start missed their text, taken at its nearest occurrence (TEST_1_QUERY_2)",
    "3 reference answer(s) of 3 question(s) not in the context, scored but not trained on (TEST_0_QUERY_1, "
    "TEST_0_QUERY_2, TEST_1_QUERY_0)",
    "1 question(s) with no reference in the context: not trained on (TEST_0_QUERY_2)",
  ]
  (submission,) = task.submission(
    examples, ["1898年", "京師大學堂", "中国近代第一所国立大学", "2,740,000平方米。", "", "位于海淀区"]
  )
  predicted = json.loads(submission)
  scores = task.score(examples, [predicted[e.id] for e in examples])
  # By hand, cmrc2018_evaluate.py over the six questions: EM 1, 1 (the reference not in the context),
  # 0, 1 (。 removed), 0, 0. F1 1, 1; 近代首所国立大学 vs 中国近代第一所国立大学: the run 所国立大学,
  # P 5/11, R 5/8, F1 10/19; 1; 0 (empty); 海淀区 vs 位于海淀区: P 3/5, R 1, F1 3/4.
  em, f1 = 3 / 6, (1 + 1 + 10 / 19 + 1 + 0 + 3 / 4) / 6
  assert scores == pytest.approx({"em": em, "f1": f1, "average": (em + f1) / 2})


def test_chid_in_clues_layout_one_example_per_blank(tmp_path):
  idioms = [
    "画蛇添足",
    "雪中送炭",
    "草木皆兵",
    "小巧玲珑",
    "坚如盘石",
    "喜上眉梢",
    "脸红耳赤",
    "急功近利",
    "欢天喜地",
    "万人空巷",
  ]
  _jsonl(
    tmp_path / "train.json",
    [{"candidates": idioms, "content": ["他#idiom000001#，我#idiom000002#。", "又一段#idiom000003#"]}],
  )
  (tmp_path / "train_answer.json").write_text(json.dumps({"#idiom000001#": 1, "#idiom000002#": 0, "#idiom000003#": 9}))
  examples = clue_reading_files.read_split("chid", tmp_path, "train")
  assert [(e.id, e.left, e.right, e.label) for e in examples] == [
    ("#idiom000001#", "他", "，我□。", 1),
    ("#idiom000002#", "他□，我", "。", 0),
    ("#idiom000003#", "又一段", "", 9),
  ]
  assert json.loads(TASKS["chid"].submission(examples, [1, 0, 2])[0]) == {
    "#idiom000001#": 1,
    "#idiom000002#": 0,
    "#idiom000003#": 2,
  }
  tokenizer = Tokenizer(build_vocab(idioms + ["他我又一段，。□"]))
  features, _ = TASKS["chid"].featurize(examples[0], tokenizer, 70)
  assert features["input_ids"].shape == (10, 11)  # [CLS] 他 idiom ， 我 □ 。 [SEP]
  assert tokenizer.decode(features["input_ids"][1]) == "他雪中送炭，我□。"


def test_chid_fewclue_layout_and_c3_real_files(shared_data):
  chid = clue_reading_files.read_split("chid", shared_data / "clue" / "chid", "dev")
  assert len(chid) == 202 and all(len(e.candidates) == 7 for e in chid)
  assert json.loads(TASKS["chid"].submission(chid[:1], [3])[0]) == {"id": int(chid[0].id), "answer": 3}
  c3 = clue_reading_files.read_split("c3", shared_data / "clue" / "c3", "dev")
  assert len(c3) == 1825 + 1991 and {len(e.options) for e in c3} == {2, 3, 4}
  assert [e.id for e in c3] == list(range(len(c3)))  # dialogue questions, then mixed-genre ones


def test_questions_with_fewer_choices_get_padding_rows_the_head_never_picks():
  tokenizer = Tokenizer(build_vocab(["文章问题甲乙丙丁"]))
  two = clue_reading_files.C3Example(1, 0, "文章", "问题", ("甲", "乙"), 1)
  four = clue_reading_files.C3Example(1, 1, "文章", "问题", ("甲", "乙", "丙", "丁"), 3)
  items = [TASKS["c3"].featurize(e, tokenizer, 512)[0] for e in (two, four)]
  batch = batching.collate(items, batch_size=2, lengths=(32,), pad_id=tokenizer.pad_id)
  assert batch["input_ids"].shape == (2, 4, 32) and batch["label"].tolist() == [1, 3]
  assert (batch["input_ids"][0, 2:] == tokenizer.pad_id).all()  # two padding rows
  assert (batch["input_ids"][1] != tokenizer.pad_id).any(-1).all()
  model = MultipleChoice(EncoderConfig(**FRESH_TINY_MODEL, vocab_size=len(tokenizer)))
  mask = (batch["input_ids"] != tokenizer.pad_id).astype(np.int32)
  params = model.init(jax.random.key(0), batch["input_ids"], mask, batch["token_type_ids"])
  scores = np.asarray(model.apply(params, batch["input_ids"], mask, batch["token_type_ids"]))
  assert (scores[0, 2:] == ABSENT).all() and (scores[0, :2] > ABSENT).all() and (scores[1] > ABSENT).all()

"""Valid benchmark folders in every released format, and the damage fuzz_test.py does to them.

A seed is a small folder (3-6 records a file) as its benchmark releases it, held as values
(JSON documents, rows of fields) and written the way the real files are (CRLF or LF, a final
newline or none, JSON indents). Damage is drawn with hypothesis: edits of the values (a field or
record deleted or written twice, a wrong JSON type, an out-of-range offset, an odd character in
a string; in JSON, nesting deeper than Python's parser goes or an integer of more digits than it
converts), then of the written bytes (truncation, a raw odd character). Each seed counts the
records of any text from the format's own definition, never through wyjax's readers, so the
test can tell a clean read from a silent loss. The text is generated: nothing here comes from
the shared data.
"""

import csv
import dataclasses
import functools
import io
import json
import operator
import re
from collections.abc import Callable

from hypothesis import strategies as st

from wyjax.tasks import aceval, cclue_files, clue, wyweb_files

SURROGATE = "\ud800"  # a lone surrogate: in a JSON file, the escape "\ud800"
ODD_CHARACTERS = (SURROGATE, "\ufeff", "\x00", "\r", "\u0301", "\ue000")  # BOM, NUL, CR, combining, private use
RAW_CHARACTERS = ODD_CHARACTERS[1:] + ("\t",)  # inserted into a file's text anywhere
WRONG_JSON = (None, 0, -1, 1.5, True, False, "", "字", [], {})
WRONG_TEXT = ("", " ", "字", "0", "-1", "1.5", "true", "null", "O", "I-PER")
# Values json.dumps cannot write, written in their place after it (expanded).
DEEP, HUGE = "⟦nested 100,000 deep⟧", "⟦an integer of 5,001 digits⟧"


class Malformed(Exception):
  """The text is not the format at all (not JSON, not UTF-8, not the layout): a read must fail."""


@dataclasses.dataclass(frozen=True)
class Doc:
  """One file of a seed folder: its content as values, and how it is written."""

  value: object  # JSON: the document (JSON Lines: the list of records); tables: rows of string fields
  write: Callable[[object], str]
  table: bool = False  # fields are strings: a wrong "type" is a wrong string


@dataclasses.dataclass(frozen=True)
class Seed:
  name: str  # the test's id
  files: str  # the Files' name in wyjax.tasks.registry
  split: str
  docs: dict[str, Doc]  # path in the folder → its file
  count: Callable[[dict[str, str]], int]  # {path: text} → records the reader must return (or Malformed)
  records: int  # records of the undamaged seed, by construction
  parallel: bool = False  # files describing the same records: an error may name any of them

  def __repr__(self):  # hypothesis prints the seed of a failing example
    return f"<seed {self.name}>"


# --- writing -------------------------------------------------------------------------------------------------


def han(i: int, n: int = 6) -> str:
  """n distinct characters, a different string for each i."""
  pool = "天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳云腾致雨露结为霜"
  return "".join(pool[(i * 5 + k * 7) % len(pool)] for k in range(n))


def _dumps(value, **options) -> str:
  return json.dumps(value, ensure_ascii=False, **options).replace(SURROGATE, "\\ud800")


def _lines(lines, newline: str, final: bool) -> str:
  return newline.join(lines) + (newline if final and lines else "")


def jsonl(newline="\n", final=True, separators=None) -> Callable:
  return lambda records: _lines([_dumps(r, separators=separators) for r in records], newline, final)


def json_doc(indent: int, newline="\n", separators=None) -> Callable:
  return lambda value: _dumps(value, indent=indent, separators=separators).replace("\n", newline)


def table(separator="\t", newline="\n", final=True) -> Callable:
  return lambda rows: _lines([separator.join(row) for row in rows], newline, final)


def csv_text(rows) -> str:
  out = io.StringIO()
  csv.writer(out, lineterminator="\n").writerows(rows)
  return out.getvalue()


# --- counting records, from the formats' definitions ---------------------------------------------------------


def lines(text: str) -> list[str]:
  """A line file's lines: LF-separated, a final LF ends the last line."""
  out = text.split("\n")
  return out[:-1] if out[-1] == "" else out


def loads(text: str):
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise Malformed(e) from e


def json_records(text: str, json_lines: bool) -> list:
  """A JSON array's items, or a JSON Lines file's values (blank lines are no records)."""
  if not json_lines and text.lstrip(" \t\r\n").startswith("["):
    return _list(loads(text))
  return [loads(line) for line in text.split("\n") if line.strip(" \t\r")]


def _list(value) -> list:
  if not isinstance(value, list):
    raise Malformed(f"expected a list, found {value!r}")
  return value


def _member(value, key) -> list:
  """value[key], where value must be an object and value[key] a list."""
  if not isinstance(value, dict) or key not in value:
    raise Malformed(f"no {key!r} in {value!r}")
  return _list(value[key])


def count_lines(name: str) -> Callable:
  return lambda texts: len(lines(texts[name]))


def count_json(name: str) -> Callable:
  return lambda texts: len(json_records(texts[name], name.endswith(".jsonl")))


def count_csv_rows(texts) -> int:
  """Data rows (all but the header) of every CSV file."""
  total = 0
  for text in texts.values():
    try:
      rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as e:
      raise Malformed(e) from e
    if not rows:
      raise Malformed("no header")
    total += len(rows) - 1
  return total


def count_cmrc_questions(texts) -> int:
  (text,) = texts.values()
  return sum(
    len(_member(paragraph, "qas"))
    for article in _member(loads(text), "data")
    for paragraph in _member(article, "paragraphs")
  )


def count_c3_questions(texts) -> int:
  """[[sentences], [questions], document id] per document, in every file."""
  total = 0
  for text in texts.values():
    for document in _list(loads(text)):
      if not (isinstance(document, list) and len(document) == 3 and isinstance(document[0], list)):
        raise Malformed(f"not a C3 document: {document!r}")
      total += len(_list(document[1]))
  return total


def count_chid_blanks(texts) -> int:
  """One record per #idiom# blank (FewCLUE's records have one, CLUE's passages several); CLUE's
  layout needs its answer file to be a JSON object."""
  if "dev_answer.json" in texts and not isinstance(loads(texts["dev_answer.json"]), dict):
    raise Malformed("the answer file is not a JSON object")
  total = 0
  records = next(text for name, text in texts.items() if not name.endswith("_answer.json"))
  for record in json_records(records, json_lines=False):
    content = record.get("content") if isinstance(record, dict) else None
    passages = [content] if isinstance(content, str) else content
    if not isinstance(passages, list) or not all(isinstance(p, str) for p in passages):
      raise Malformed(f"content {content!r}")
    total += sum(len(re.findall(r"#idiom\d*#", p)) for p in passages)
  return total


# --- damage --------------------------------------------------------------------------------------------------


class _Object(dict):
  """A JSON object that json.dumps writes with the keys in `twice` written twice."""

  def __init__(self, *args):
    super().__init__(*args)
    self.twice = set()

  def items(self):
    for key, value in super().items():
      if key in self.twice:
        yield key, value
      yield key, value


def _copy(value):
  if isinstance(value, dict):
    return _Object({k: _copy(v) for k, v in value.items()})
  return [_copy(v) for v in value] if isinstance(value, list) else value


def _paths(value, prefix=()):
  children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
  for key, child in children:
    yield prefix + (key,)
    yield from _paths(child, prefix + (key,))


def _offset_like(value) -> bool:
  """An integer, or a string of numbers ("2", "3, 5"): an index, an offset or a label."""
  if isinstance(value, bool):
    return False
  return isinstance(value, int) or isinstance(value, str) and re.fullmatch(r"[\d, ]*\d[\d, ]*", value) is not None


def _out_of_range(data, number: int) -> int:
  return data.draw(st.sampled_from((-1, number + 1, number + 1000, 2**31)), label="offset")


def _bad_offset(data, value):
  """value with its number, or one of its numbers, negative or past it."""
  if isinstance(value, int):
    return _out_of_range(data, value)
  number = data.draw(st.sampled_from(list(re.finditer(r"\d+", value))), label="number")
  return value[: number.start()] + str(_out_of_range(data, int(number[0]))) + value[number.end() :]


def damage_value(data, value, table: bool) -> None:
  """One edit, in place, of a node of value (not its root)."""
  paths = list(_paths(value))
  if not paths:
    return
  path = data.draw(st.sampled_from(paths), label="path")
  *above, key = path
  parent = functools.reduce(operator.getitem, above, value)
  node = parent[key]
  edits = ["delete", "duplicate"]
  if not (table and isinstance(node, list)):
    edits.append("replace")
  if _offset_like(node):
    edits.append("offset")
  if isinstance(node, str):
    edits.append("odd character")
  if not table:
    edits += ["nest deeply", "huge integer"]
  edit = data.draw(st.sampled_from(edits), label="edit")
  if edit == "delete":
    del parent[key]
  elif edit == "duplicate" and isinstance(parent, dict):
    parent.twice.add(key)
  elif edit == "duplicate":
    parent.insert(key, _copy(node))
  elif edit == "replace":
    parent[key] = _copy(data.draw(st.sampled_from(WRONG_TEXT if table else WRONG_JSON + ([node],)), label="value"))
  elif edit == "offset":
    parent[key] = _bad_offset(data, node)
  elif edit in ("nest deeply", "huge integer"):
    parent[key] = DEEP if edit == "nest deeply" else HUGE
  else:
    at = data.draw(st.integers(0, len(node)), label="at")
    # A table is written as text, which cannot hold a lone surrogate.
    character = data.draw(st.sampled_from(ODD_CHARACTERS[1:] if table else ODD_CHARACTERS), label="character")
    parent[key] = node[:at] + character + node[at:]


def damage_text(data, text: str) -> bytes:
  """The written file cut short (perhaps inside a character's bytes), or with a raw odd character."""
  edit = data.draw(st.sampled_from(("truncate", "truncate inside a character", "insert")), label="text edit")
  at = data.draw(st.integers(0, max(0, len(text) - (edit != "insert"))), label="at")
  if edit == "insert":
    return (text[:at] + data.draw(st.sampled_from(RAW_CHARACTERS), label="character") + text[at:]).encode()
  partial = text[at : at + 1].encode()[:-1] if edit == "truncate inside a character" else b""
  return text[:at].encode() + partial


def expanded(text: str) -> str:
  return text.replace(f'"{DEEP}"', "[" * 100_000 + "]" * 100_000).replace(f'"{HUGE}"', "9" * 5001)


def written(seed: Seed) -> dict[str, bytes]:
  return {name: doc.write(doc.value).encode() for name, doc in seed.docs.items()}


def damaged(data, seed: Seed) -> tuple[str, dict[str, bytes]]:
  """(the damaged file's path, every file's bytes): 0-2 edits of one file's values, then a
  text edit (always, when there was no value edit)."""
  target = data.draw(st.sampled_from(sorted(seed.docs)), label="file")
  doc = seed.docs[target]
  value = _copy(doc.value)
  edits = data.draw(st.integers(0, 2), label="value edits")
  for _ in range(edits):
    damage_value(data, value, doc.table)
  text = expanded(doc.write(value))
  raw = damage_text(data, text) if not edits or data.draw(st.booleans(), label="then a text edit") else text.encode()
  return target, {**written(seed), target: raw}


# --- the seeds -----------------------------------------------------------------------------------------------


def _rows(name: str, rows: list, write=None) -> dict:
  return {"docs": {name: Doc(rows, write or table(), table=True)}, "count": count_lines(name), "records": len(rows)}


def _records(name: str, records: list, write) -> dict:
  return {"docs": {name: Doc(records, write)}, "count": count_json(name), "records": len(records)}


def _wyweb() -> list[Seed]:
  """The WYWEB toolkit's files: TSV (TLC, WYWMT with CRLF), JSON Lines (GLNER, CRLF), JSON
  arrays (FSPC, IRC, WYWRC), none with a final newline."""
  crlf = table(newline="\r\n", final=False)
  dynasties = [("远古", "先秦"), ("中古", "唐"), ("近古", "清"), ("远古", "两汉")]
  sentiments = wyweb_files.FSPC_SENTIMENTS
  seeds = {
    "tlc": _rows("dev.tsv", [[p, d, han(i, 8)] for i, (p, d) in enumerate(dynasties)], crlf),
    "gjc": _rows("dev.tsv", [[wyweb_files.GJC_COLLECTIONS[i * 3], han(i, 9)] for i in range(4)], table(final=False)),
    "punc": _rows(
      "dev.tsv", [[han(i, 8), "OO，OOO" + wyweb_files.PUNC_MARKS[i] + "。"] for i in range(4)], table(final=False)
    ),
    "glner": _records(
      "dev.jsonl",
      [
        {"text": han(i, 10), "label": [[1, 3, "noun_other"], [5, 8, "noun_bookname"]] if i % 3 else []}
        for i in range(4)
      ],
      jsonl("\r\n", final=False),
    ),
    "fspc": _records(
      "dev.json",
      [
        {
          "poet": han(i, 2),
          "poem": "|".join(han(4 * i + k, 7) for k in range(4)),
          "dynasty": "宋",
          "title": han(i, 4),
          "sentiments": {"holistic": sentiments[i], **{f"line{k}": sentiments[(i + k) % 5] for k in range(1, 5)}},
        }
        for i in range(4)
      ],
      json_doc(1),
    ),
    "xuci": _rows(
      "dev.tsv", [[han(i, 8), han(i + 1, 8), f"{i}, {i}", f"{i + 2}, {i + 3}", "tf"[i % 2]] for i in range(4)]
    ),
    "irc": _records(
      "dev.json",
      [
        {"idiom": han(i, 4), "options": [han(i + k, 10) for k in range(4)], "label": i % 4, "origin": han(i + 9, 12)}
        for i in range(4)
      ],
      json_doc(1),
    ),
    "wywrc": _records(
      "dev.json",
      [
        {
          "article": han(i, 30),
          "question": han(i + 1, 8),
          **{f"option{k}": han(i + k, 6) for k in range(4)},
          "answer": str(i % 4),
          "type": i % 3,
        }
        for i in range(4)
      ],
      json_doc(1),
    ),
    "wywmt": _rows("dev.tsv", [[han(i, 8), han(i + 3, 12)] for i in range(4)], crlf),
  }
  return [Seed(name, name, "dev", **fields) for name, fields in seeds.items()]


def _ccpm() -> list[Seed]:
  records = [
    {"translation": han(i, 12), "choices": [han(i + k, 7) for k in range(4)], "answer": i % 4} for i in range(4)
  ]
  unlabelled = [{k: v for k, v in r.items() if k != "answer"} for r in records]
  return [
    Seed("ccpm", "ccpm", "dev", **_records("valid.jsonl", records, jsonl())),
    Seed("ccpm-test", "ccpm", "test", **_records("test_public.jsonl", unlabelled, jsonl())),
  ]


def _cclue() -> list[Seed]:
  """NER: characters and their tags, one space between, in two parallel files (tag lines end
  with a space, as C-CLUE's do); relations: JSON Lines, CRLF, no final newline."""
  tags = (
    ["B-PER", "I-PER", "O", "B-LOC", "O", "O", "B-JOB", "I-JOB", "I-JOB", "O"],
    ["O", "B-ORG", "I-ORG", "O", "O", "B-PER", "O", "O", "B-LOC", "I-LOC", ""],
  )
  ner = Seed(
    "cclue_ner",
    "cclue_ner",
    "dev",
    {
      "dev.txt": Doc([list(han(i, 10)) for i in range(4)], table(" "), table=True),
      "dev-label.txt": Doc([tags[i % 2] for i in range(4)], table(" "), table=True),
    },
    count_lines("dev.txt"),
    4,
    parallel=True,
  )
  relations = []
  for i in range(4):
    text = han(i, 16)
    relations.append(
      {
        "text": text,
        "spo_list": {
          "predicate": cclue_files.PREDICATES[i],
          "object_type": "LOC",
          "subject_type": "PER",
          "object": text[6:9],
          "subject": text[1:3],
        },
      }
    )
  return [ner, Seed("cclue_re", "cclue_re", "dev", **_records("dev_data.json", relations, jsonl("\r\n", False)))]


def _aceval() -> list[Seed]:
  """Every subject's CSV, dev (with Answer and Explanation) and test; a question with a comma
  and quotes."""
  seeds = []
  for split, size, answers in (("dev", 3, ["Answer", "Explanation"]), ("test", 2, [])):
    docs = {}
    for s, subject in enumerate(aceval.SUBJECTS):
      rows = [["", "Question", *aceval.LETTERS, *answers]]
      for r in range(size):
        question = f'{han(s + r, 5)}, "{han(r, 3)}"' if r == 0 else han(s + r, 9)
        rows.append(
          [
            str(r),
            question,
            *(han(s + r + k, 4) for k in range(4)),
            *([aceval.LETTERS[(s + r) % 4], han(r, 6)] if answers else []),
          ]
        )
      docs[f"{split}/{subject}.csv"] = Doc(rows, csv_text, table=True)
    seeds.append(Seed(f"aceval-{split}", "aceval", split, docs, count_csv_rows, size * len(aceval.SUBJECTS)))
  return seeds


def _wsc(i: int) -> dict:
  text = han(i, 20)
  return {
    "target": {"span2_index": 12, "span1_index": 3, "span1_text": text[3:5], "span2_text": text[12]},
    "idx": i,
    "label": ("true", "false")[i % 2],
    "text": text,
  }


def _clue_classification() -> list[Seed]:
  """CLUE's JSON Lines, as FewCLUE (integer labels and ids), OCNLI (compact, a '-' record),
  AFQMC and CMNLI (no ids) and CSL and WSC (CRLF) write them."""
  nli = clue.NLI_LABELS + (clue.NO_MAJORITY,)
  records = {
    "afqmc": [{"sentence1": han(i, 8), "sentence2": han(i + 2, 8), "label": str(i % 2)} for i in range(4)],
    "tnews": [
      {
        "label": int(clue.TNEWS_LABELS[i * 4]),
        "label_desc": "news_story",
        "sentence": han(i, 12),
        "keywords": f"{han(i, 2)},{han(i + 1, 2)}",
        "id": 3 * i,
      }
      for i in range(4)
    ],
    "iflytek": [{"label": 7 * i, "label_des": han(i, 2), "sentence": han(i, 20), "id": i} for i in range(4)],
    "cmnli": [{"sentence1": han(i, 9), "sentence2": han(i + 1, 5), "label": nli[i]} for i in range(4)],
    "ocnli": [
      {
        "level": "medium",
        "sentence1": han(i, 9),
        "sentence2": han(i + 1, 5),
        "label": nli[i],
        **{f"label{k}": None for k in range(5)},
        "genre": "gov",
        "prem_id": f"gov_{i}",
        "id": 10 + i,
      }
      for i in range(4)
    ],
    "csl": [
      {"id": i, "abst": han(i, 30), "keyword": [han(i, 2), han(i + 1, 3)], "label": str(i % 2)} for i in range(4)
    ],
    "cluewsc2020": [_wsc(i) for i in range(4)],
  }
  writers = {"ocnli": jsonl(separators=(",", ":")), "csl": jsonl("\r\n"), "cluewsc2020": jsonl("\r\n")}
  return [
    Seed(task, task, "dev", **_records("dev.json", rows, writers.get(task, jsonl()))) for task, rows in records.items()
  ]


def _clue_reading() -> list[Seed]:
  """CMRC 2018 (SQuAD v1.1, indent 2, ', ' separators, no final newline), ChID in FewCLUE's
  layout and in CLUE's (passages with numbered blanks, answers in dev_answer.json), C3 (JSON
  arrays, indent 1, CRLF, a dialogue and a mixed-genre file)."""
  articles = []
  for a in range(2):
    context = han(a, 30)
    qas = [
      {
        "question": han(a + q, 8),
        "id": f"TRIAL_{a}_QUERY_{q}",
        "answers": [{"text": context[5 * q + 2 : 5 * q + 6], "answer_start": 5 * q + 2}],
      }
      for q in range(2)
    ]
    articles.append(
      {"paragraphs": [{"id": f"TRIAL_{a}", "context": context, "qas": qas}], "id": f"TRIAL_{a}", "title": han(a, 4)}
    )
  cmrc = Doc({"version": "v1.0", "data": articles}, json_doc(2, separators=(", ", ": ")))
  fewclue = [
    {
      "id": 100 + i,
      "candidates": [han(i + k, 4) for k in range(7)],
      "content": f"{han(i, 10)}#idiom#{han(i + 1, 10)}",
      "answer": i % 7,
    }
    for i in range(4)
  ]
  tags = iter(f"#idiom{n:06d}#" for n in range(1, 6))
  clue_layout = [
    {
      "candidates": [han(r + k, 4) for k in range(10)],
      "content": [f"{han(r, 6)}{next(tags)}{han(r + 1, 6)}{next(tags)}", f"{han(r + 2, 8)}{next(tags)}"]
      if r == 0
      else [f"{next(tags)}{han(r, 9)}{next(tags)}"],
    }
    for r in range(2)
  ]
  answers = {f"#idiom{n:06d}#": n % 10 for n in range(1, 6)}

  def c3(first: int, questions: tuple[int, ...], test: bool = False) -> Doc:
    """Documents of C3's train and dev files; test: CLUE's test file, its questions with ids
    and without answers."""
    documents = []
    for d, n in enumerate(questions):
      options = [[han(first + d + q + k, 3) for k in range(2 + (d + q) % 3)] for q in range(n)]
      documents.append(
        [
          [han(first + d, 12), han(first + d + 1, 9)],
          [
            {"question": han(first + q, 7), "choice": o, **({"id": 10 * d + q} if test else {"answer": o[-1]})}
            for q, o in enumerate(options)
          ],
          f"{first}-{d}",
        ]
      )
    return Doc(documents, json_doc(1, "\r\n"))

  unlabelled = [{k: v for k, v in record.items() if k != "answer"} for record in fewclue]
  return [
    Seed("cmrc2018", "cmrc2018", "dev", {"cmrc2018_dev.json": cmrc}, count_cmrc_questions, 4),
    Seed("chid", "chid", "dev", {"dev.json": Doc(fewclue, jsonl())}, count_chid_blanks, 4),
    Seed("chid-test", "chid", "test", {"test1.1.json": Doc(unlabelled, jsonl())}, count_chid_blanks, 4),
    Seed(
      "chid-clue-layout",
      "chid",
      "dev",
      {"dev.json": Doc(clue_layout, jsonl()), "dev_answer.json": Doc(answers, json_doc(None))},
      count_chid_blanks,
      5,
      parallel=True,
    ),
    Seed("c3", "c3", "dev", {"d-dev.json": c3(0, (1, 2)), "m-dev.json": c3(5, (1, 1))}, count_c3_questions, 5),
    Seed("c3-test", "c3", "test", {"test1.1.json": c3(0, (2, 1, 2), test=True)}, count_c3_questions, 5),
  ]


SEEDS = (*_wyweb(), *_ccpm(), *_cclue(), *_aceval(), *_clue_classification(), *_clue_reading())

"""Benchmark folders in the exact published formats of CCPM, C-CLUE relations and AC-EVAL,
written from real classical text in ../shared/data (none of it is committed):

- CCPM: a WYWMT pair's modern translation, its classical source among 3 other sources.
- C-CLUE relations: C-CLUE NER sentences, a person as subject and another entity as object,
  the predicate given by the object's type (so a model can learn it).
- AC-EVAL: all 13 subjects, 5 dev questions (with answers) and 2 test questions each, "which
  translation fits this sentence", with commas, double quotes and line breaks in some fields.
"""

import csv
import json

from wyjax.tasks import aceval, cclue_files, wyweb_files

PREDICATE_OF_TYPE = {"JOB": "任职", "LOC": "位于", "ORG": "隶属于", "PER": "同名于"}


def _pairs(shared_data, longest: int):
  return [e for e in wyweb_files.read_wywmt(shared_data / "wyweb" / "wywmt" / "train.tsv") if len(e.source) <= longest]


def _jsonl(path, records):
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def write_ccpm(shared_data, out):
  out.mkdir(parents=True)
  pairs = _pairs(shared_data, 16)
  records = []
  for i, pair in enumerate(pairs[:160]):
    others = [p.source for p in pairs[i + 1 : i + 4]] if i + 4 <= len(pairs) else [p.source for p in pairs[:3]]
    choices = others[: i % 4] + [pair.source] + others[i % 4 :]
    records.append({"translation": pair.target, "choices": choices, "answer": i % 4})
  _jsonl(out / "train.jsonl", records[:112])
  _jsonl(out / "valid.jsonl", records[112:144])
  _jsonl(out / "test_public.jsonl", [{k: v for k, v in r.items() if k != "answer"} for r in records[144:]])
  return out


def write_cclue_re(shared_data, out):
  out.mkdir(parents=True)
  records = []
  for e in cclue_files.read_split("cclue_ner", shared_data / "cclue" / "ner", "train"):
    if len(e.text) > 150:
      continue
    people = [s for s in e.spans if s[2] == "PER"]
    others = [s for s in e.spans if s[2] in PREDICATE_OF_TYPE and s != (people[:1] or [None])[0]]
    if people and others:
      (a, b, _), (c, d, kind) = people[0], others[0]
      records.append(
        {
          "text": e.text,
          "spo_list": {
            "predicate": PREDICATE_OF_TYPE[kind],
            "object_type": kind,
            "subject_type": "PER",
            "object": e.text[c:d],
            "subject": e.text[a:b],
          },
        }
      )
  _jsonl(out / "train_data.json", records[:160])
  _jsonl(out / "dev_data.json", records[160:200])
  _jsonl(
    out / "test_data.json",
    [
      {"text": r["text"], "spo_list": {k: v for k, v in r["spo_list"].items() if k != "predicate"}}
      for r in records[200:216]
    ],
  )
  return out


def write_aceval(shared_data, out):
  pairs = _pairs(shared_data, 40)
  for split, per_subject in (("dev", 5), ("test", 2)):
    (out / split).mkdir(parents=True)
    for s, subject in enumerate(aceval.SUBJECTS):
      with open(out / split / f"{subject}.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "Question", *aceval.LETTERS] + (["Answer", "Explanation"] if split == "dev" else []))
        for row in range(per_subject):
          start = (s * 7 + row * 4 + (0 if split == "dev" else 400)) % (len(pairs) - 4)
          chosen = pairs[start : start + 4]
          answer = (s + row) % 4
          question = f"{chosen[answer].source}\\n下列翻译正确的一项是（）"
          if row == 0:  # quoting: an ASCII comma, double quotes and a real line break
            question = f'阅读, "材料"\n{question}'
          fields = [str(row), question, *(p.target for p in chosen)]
          if split == "dev":
            fields += [aceval.LETTERS[answer], f'{aceval.LETTERS[answer]}, 即 "{chosen[answer].target}"']
          writer.writerow(fields)
  return out

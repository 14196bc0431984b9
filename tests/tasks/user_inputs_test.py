"""wyjax.predict's inputs: every task's input line becomes an unlabelled example its featurize
takes; bad lines name their file and line; long texts are windowed so that every character is
decided once, from the window where it has most context."""

import json
import re
import typing

import numpy as np
import pytest

from wyjax.data.tokenizer import Tokenizer, build_vocab
from wyjax.tasks import long_texts, user_inputs
from wyjax.tasks.cclue_files import PREDICATES
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS
from wyjax.tasks.tagging import IGNORE

TEXT = "子曰學而時習之不亦說乎有朋自遠方來"
# A value for every input field of every task (the relation tasks' entities lie in TEXT).
VALUES = {"subject": "學而", "object": "朋", "given_predicate": PREDICATES[0], "span_a": [2, 2], "span_b": [0, 1]}


def _value(task, name):
  if name in VALUES:
    return VALUES[name]
  kind = typing.get_type_hints(task.files.example_type)[name]
  return ["學而", "時習之", "有朋", "自遠方來"] if typing.get_origin(kind) is tuple else TEXT


@pytest.fixture(scope="module")
def tokenizer():
  texts = [TEXT, "學而時習之有朋自遠方來", *PREDICATES] + [t.inserted_text for t in TASKS.values()]
  return Tokenizer(build_vocab(texts))


@pytest.mark.parametrize("name", [name for name, task in TASKS.items() if task.inputs])
def test_every_tasks_input_becomes_an_unlabelled_example_it_featurizes(name, tokenizer):
  task = TASKS[name]
  record = {field: _value(task, field) for field in task.inputs}
  example = user_inputs.example(task, json.dumps(record, ensure_ascii=False), "in.jsonl", 3)
  assert example.line == 3
  features, _ = task.featurize(example, tokenizer, task.max_length)
  assert features["input_ids"].size > 0
  if "label" in features and name != "xuci":  # (XuCi's same_usage is a bool: its blank is False)
    assert np.all(features["label"] == IGNORE), (name, features["label"])  # no gold class from a blank
  if len(task.inputs) == 1:  # a plain line of text is the same input
    assert (
      user_inputs.example(task, TEXT, "in.txt", 3)
      == user_inputs.example(task, json.dumps({task.inputs[0]: TEXT}), "in.txt", 3)
      or typing.get_origin(typing.get_type_hints(task.files.example_type)[task.inputs[0]]) is tuple
    )


def test_a_text_for_a_list_field_is_split_at_punctuation():
  example = user_inputs.example(TASKS["fspc"], "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。", "poems.txt", 1)
  assert example.lines == ("床前明月光", "疑是地上霜", "舉頭望明月", "低頭思故鄉")


@pytest.mark.parametrize(
  "line, message",
  [
    ('{"context": "甲", "question": ', "invalid JSON"),
    ('{"context": "甲", "options": ["乙"]}', "missing question"),
    ('{"context": "甲", "question": "乙", "options": ["丙"], "answer": 1}', "unknown field(s) answer"),
    ('{"context": "甲", "question": "乙", "options": "丙"}', None),  # a text for a list: split, accepted
    ('{"context": "甲", "question": "乙", "options": [1, 2]}', '"options" must be a string'),
    ('{"context": "", "question": "", "options": []}', "empty input"),
    ("甲乙丙", 'a JSON object with "context", "question", "options"'),
  ],
)
def test_a_bad_line_names_its_file_line_and_what_is_wrong(line, message):
  if message is None:
    assert user_inputs.example(TASKS["c3"], line, "questions.jsonl", 7).options == ("丙",)
    return
  with pytest.raises(FormatError, match=f"^questions.jsonl:7: .*{re.escape(message)}"):
    user_inputs.example(TASKS["c3"], line, "questions.jsonl", 7)


@pytest.mark.parametrize(
  "line, text",
  [
    ("{注}学而时习之", "{注}学而时习之"),  # an editor's note in braces: "invalid JSON"
    ('{"注": "学"}学而时习之', '{"注": "学"}学而时习之'),  # JSON and more: no JSON object
    ('{"note": "学而时习之"}', '{"note": "学而时习之"}'),  # an object without the text field
    ("{" * 5000 + "学" + "}" * 5000, "{" * 5000 + "学" + "}" * 5000),  # deeper than the parser
    ('{"text": "学而时习之"}', "学而时习之"),  # an object giving it: JSON
  ],
)
def test_a_one_text_line_is_json_only_when_it_is_an_object_giving_the_text(line, text):
  assert user_inputs.example(TASKS["punc"], line, "in.txt", 1).text == text


def test_a_task_without_raw_inputs_is_refused_with_the_reason():
  with pytest.raises(ValueError, match="aceval takes no raw input"):
    user_inputs.check_predictable(TASKS["aceval"])


@pytest.mark.parametrize("tokens, room", [(1000, 100), (101, 100), (100, 100), (7, 100), (257, 64)])
def test_each_token_is_decided_in_the_window_where_it_has_most_context(tokens, room):
  starts = long_texts.window_starts(tokens, room)
  assert starts[0] == 0 and min(starts[-1] + room, tokens) == tokens
  assert all(b - a <= room // 2 for a, b in zip(starts, starts[1:]))  # windows overlap by half or more
  # Window w's logits are w everywhere: the stitched row of a token names the window it came from.
  window_logits = [np.full((min(room, tokens - s) + 2, 1), w, np.float32) for w, s in enumerate(starts)]
  chosen = long_texts.stitch(window_logits, starts, room, tokens)[1:-1, 0].astype(int)
  for t in range(tokens):

    def context(w):
      s = starts[w]
      left = t - s if s > 0 else np.inf
      right = s + room - 1 - t if s + room < tokens else np.inf
      return min(left, right) if s <= t < s + room else -1

    best = max(range(len(starts)), key=lambda w: (context(w), -w))
    assert chosen[t] == best, (t, chosen[t], best)


def test_a_window_is_the_whole_texts_features_cut():
  features = {"input_ids": np.arange(12), "labels": np.arange(12) * 10, "predicate": np.int32(4)}
  window = long_texts.cut(features, 3, 4)
  np.testing.assert_array_equal(window["input_ids"], [0, 4, 5, 6, 7, 11])
  np.testing.assert_array_equal(window["labels"], [0, 40, 50, 60, 70, 110])
  assert window["predicate"] == 4

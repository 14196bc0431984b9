"""Extractive reading comprehension: long contexts in overlapping windows, decoded back to one answer span.

A window is [CLS] question [SEP] context piece [SEP], `stride` tokens after the previous one (BERT's doc stride,
at most half a window).
"""

import numpy as np

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks.tagging import IGNORE
from wyjax.tasks.task import rows

MAX_QUESTION = 64  # tokens of the question kept (BERT's max_query_length), at most half of max_length


def windows(
  tokenizer: Tokenizer, question: str, context: str, max_length: int, stride: int, answer: tuple[int, int] | None = None
) -> tuple[dict, int]:
  """Features of one question's windows, and the question's characters cut.

  input_ids and token_type_ids [windows, length], char_index (each token's context character, -1 elsewhere) and,
  given the answer's [start, end) characters, label [windows, 2]: the first and last of its tokens in each window
  that holds them all, [CLS] (0, 0) in the others (BERT's rule).
  """
  whole_question = tokenizer.encode_chars(question)[0]
  question_ids = whole_question[: min(MAX_QUESTION, max_length // 2)]
  context_ids, char_index = tokenizer.encode_chars(context)
  room = max_length - len(question_ids) - 3
  stride = min(stride, max(room // 2, 1))  # windows overlap however short max_length is
  starts = list(range(0, max(len(context_ids) - room, 0) + 1, stride))
  if starts[-1] + room < len(context_ids):
    starts.append(len(context_ids) - room)
  head = np.concatenate([[tokenizer.cls_id], question_ids, [tokenizer.sep_id]]).astype(np.int32)
  if answer is not None:  # the answer's tokens in the whole context (its spaces have none)
    answer_tokens = np.flatnonzero((char_index >= answer[0]) & (char_index < answer[1]))
  input_ids, index, labels = [], [], []
  for start in starts:
    piece = slice(start, start + room)
    ids = np.concatenate([head, context_ids[piece], [tokenizer.sep_id]]).astype(np.int32)
    chars = np.full(len(ids), -1, np.int32)
    chars[len(head) : len(ids) - 1] = char_index[piece]
    input_ids.append(ids)
    index.append(chars)
    if answer is not None:
      whole = answer_tokens.size and start <= answer_tokens[0] and answer_tokens[-1] < start + room
      labels.append([len(head) + answer_tokens[0] - start, len(head) + answer_tokens[-1] - start] if whole else [0, 0])
  features = rows(input_ids, tokenizer.pad_id, len(head))
  features["char_index"] = np.full(features["input_ids"].shape, -1, np.int32)
  for row, chars in zip(features["char_index"], index):
    row[: len(chars)] = chars
  features["label"] = (
    np.asarray(labels, np.int32) if answer is not None else np.full((len(starts), 2), IGNORE, np.int32)
  )
  return features, len(whole_question) - len(question_ids)


def best_span(
  features: dict, logits: np.ndarray, *, n_best: int = 20, max_answer_length: int = 30
) -> tuple[tuple[int, int] | None, float]:
  """The [start, end) characters of the best answer over all windows, and its score.

  Of each window's n_best start and end tokens, the pairs inside the context with start ≤ end and at most
  max_answer_length tokens, scored start logit + end logit; (None, -inf) when no pair qualifies.

  Args:
    logits: [windows, 2, length], the (start, end) logits of this example's windows.
  """
  char_index = np.asarray(features["char_index"])
  best, best_score = None, -np.inf
  for window, (start_logits, end_logits) in enumerate(np.asarray(logits)):
    chars = char_index[window]
    starts = np.argsort(start_logits)[::-1][:n_best]
    ends = np.argsort(end_logits)[::-1][:n_best]
    for s in starts:
      for e in ends:
        if chars[s] < 0 or chars[e] < 0 or e < s or e - s + 1 > max_answer_length:
          continue
        score = start_logits[s] + end_logits[e]
        if score > best_score:
          best, best_score = (int(chars[s]), int(chars[e]) + 1), score
  return best, float(best_score)

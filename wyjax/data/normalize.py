"""Length-preserving text normalisation, so that character offsets never shift.

Every function here maps a string to one of the same length: position i of the output is
position i of the input, so labels and spans stay aligned with the original text.
"""

import functools

import opencc


@functools.cache
def _t2s() -> opencc.OpenCC:
  return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
  """OpenCC t2s (traditional → simplified), as WYWEB does.

  OpenCC converts phrases; when a phrase changes the length of the text, the text is
  converted character by character instead, which never changes the length.
  """
  converted = _t2s().convert(text)
  if len(converted) == len(text):
    return converted
  return "".join(c if len(s := _t2s().convert(c)) != 1 else s for c in text)

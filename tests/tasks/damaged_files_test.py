"""Damage every reader meets through wyjax.tasks.files: a split file that is a folder or a broken
link, one split under two names, text that is no character (a lone surrogate) or no text (a NUL
byte), JSON that Python's parser cannot take (nested too deeply, an integer too long); each is
an error naming the file, never an absent split or a failure long after reading."""

import pytest

from wyjax.tasks import aceval, cclue_files, ccpm, clue_reading_files, wyweb_files
from wyjax.tasks.files import FormatError

# (reader of a folder's dev split, the dev file it reads)
READERS = {
  "tlc": (lambda folder: wyweb_files.read_split("tlc", folder, "dev"), "dev.tsv"),
  "ccpm": (lambda folder: ccpm.read_split(folder, "dev"), "valid.jsonl"),
  "cclue_re": (lambda folder: cclue_files.read_split("cclue_re", folder, "dev"), "dev_data.json"),
  "cclue_ner": (lambda folder: cclue_files.read_split("cclue_ner", folder, "dev"), "dev.txt"),
  "aceval": (lambda folder: aceval.read_split(folder, "dev"), "dev/geography.csv"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_folder_in_place_of_a_split_file(tmp_path, reader):
  read, name = READERS[reader]
  (tmp_path / name).mkdir(parents=True)
  with pytest.raises(IsADirectoryError, match=rf"{name}: a folder, expected a file"):
    read(tmp_path)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_broken_link_is_not_an_absent_split(tmp_path, reader):
  read, name = READERS[reader]
  (tmp_path / name).parent.mkdir(exist_ok=True)
  (tmp_path / name).symlink_to(tmp_path / "moved_away")
  with pytest.raises(FileNotFoundError, match=rf"{name}: a link to .*moved_away, which does not exist"):
    read(tmp_path)


def test_one_split_under_two_names(tmp_path):
  for name in ("dev.tsv", "dev.txt"):
    (tmp_path / name).write_text("远古\t先秦\t冽彼下泉\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"dev\.tsv and dev\.txt are the same split under two names"):
    wyweb_files.read_split("tlc", tmp_path, "dev")


_CCPM = '{"translation": "%s", "choices": ["a", "b", "c", "d"], "answer": 0}\n'


def test_lone_surrogate_escapes_fail_at_read_time_with_their_line(tmp_path):
  (tmp_path / "valid.jsonl").write_text(_CCPM % "\\ud83d\\ude00" + _CCPM % "t\\ud800", encoding="utf-8")
  with pytest.raises(FormatError, match=r"valid\.jsonl:2: \\ud800 is a lone surrogate"):
    ccpm.read_split(tmp_path, "dev")
  (tmp_path / "dev.json").write_text(
    '[\n{"idiom": "a", "origin": "b", "options": ["1", "2", "3", "4"], "label": 0},\n'
    '{"idiom": "a", "origin": "b", "options": ["1", "2", "\\udc00", "4"], "label": 0}\n]',
    encoding="utf-8",
  )
  with pytest.raises(FormatError, match=r"dev\.json:3: \\udc00 is a lone surrogate"):
    wyweb_files.read_split("irc", tmp_path, "dev")
  (tmp_path / "valid.jsonl").write_text(_CCPM % "\\ud83d\\ude00", encoding="utf-8")  # a pair: one character
  assert [e.translation for e in ccpm.read_split(tmp_path, "dev")] == ["\U0001f600"]


def test_utf8_text_cannot_hold_a_surrogate(tmp_path):
  """TSV and text files are decoded as UTF-8, which refuses an encoded surrogate."""
  (tmp_path / "dev.tsv").write_bytes("远古\t先秦\t冽彼下泉\n".encode() + b"\xe8\xbf\x9c\xe5\x8f\xa4\t\xed\xa0\x80\n")
  with pytest.raises(ValueError, match=r"dev\.tsv:2: not valid UTF-8"):
    wyweb_files.read_split("tlc", tmp_path, "dev")


_DEEP, _HUGE = "[" * 100_000 + "]" * 100_000, "9" * 5001  # json raised RecursionError, ValueError


@pytest.mark.parametrize(
  "value, message",
  [(_DEEP, r"JSON nested 1000\d\d levels deep"), (_HUGE, r"an integer of 5001 digits \(Python reads at most 4300\)")],
)
def test_json_too_deep_or_a_number_too_long_is_an_error_at_its_line(tmp_path, value, message):
  """JSON Lines, a JSON array of records, one JSON document (files.located_json)."""
  for folder in ("ccpm", "irc", "cmrc2018"):
    (tmp_path / folder).mkdir()
  (tmp_path / "ccpm" / "valid.jsonl").write_text(_CCPM % "t" + _CCPM.replace("0}", value + "}") % "t")
  with pytest.raises(FormatError, match=rf"valid\.jsonl:2: {message}"):
    ccpm.read_split(tmp_path / "ccpm", "dev")
  (tmp_path / "irc" / "dev.json").write_text(
    '[\n{"idiom": "a", "origin": "b", "options": ["1", "2", "3", "4"], '
    f'"label": 0}},\n{{"idiom": "a", "label": {value}}}\n]'
  )
  with pytest.raises(FormatError, match=rf"dev\.json:3: {message}"):
    wyweb_files.read_split("irc", tmp_path / "irc", "dev")
  (tmp_path / "cmrc2018" / "cmrc2018_dev.json").write_text(
    f'{{"data": [\n{{"paragraphs": []}},\n{{"paragraphs": {value}}}]}}'
  )
  with pytest.raises(FormatError, match=rf"cmrc2018_dev\.json:3: {message}"):
    clue_reading_files.read_split("cmrc2018", tmp_path / "cmrc2018", "dev")


def test_a_nul_byte_is_an_error_at_its_line(tmp_path):
  """A NUL is valid UTF-8 (text saved as UTF-16 decodes so), but no task's text: TSV, C-CLUE's
  text files, AC-EVAL's CSV."""
  (tmp_path / "dev.tsv").write_text("远古\t先秦\t冽彼下泉\n远古\t先秦\t冽\0彼\n", encoding="utf-8")
  with pytest.raises(FormatError, match=r"dev\.tsv:2: a NUL byte: not a text file"):
    wyweb_files.read_split("tlc", tmp_path, "dev")
  (tmp_path / "dev.txt").write_text("甲 乙\n丙 \0\n", encoding="utf-8")
  (tmp_path / "dev-label.txt").write_text("O O\nO O\n", encoding="utf-8")
  with pytest.raises(FormatError, match=r"dev\.txt:2: a NUL byte"):
    cclue_files.read_split("cclue_ner", tmp_path, "dev")
  (tmp_path / "geography.csv").write_text(",Question,A,B,C,D\n0,问\0,甲,乙,丙,丁\n", encoding="utf-8")
  with pytest.raises(FormatError, match=r"geography\.csv:2: a NUL byte"):
    aceval.read_subject(tmp_path / "geography.csv", "geography")

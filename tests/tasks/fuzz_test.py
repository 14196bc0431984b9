"""Every reader, fuzzed (issue #30): each benchmark folder format starts from a valid seed
folder (tests/tasks/damage.py), gets random damage, and must then either read cleanly, with as
many examples as the damaged files hold records, or fail with wyjax's FormatError naming a
damaged file and one of its lines. Another exception, a silent change of the record count or a
lone surrogate kept in an example (it fails later, in TFDS serialisation) is a bug.

CI runs a fixed, derandomized sample in well under a minute. The long run draws thousands of
fresh examples per format (and prints a @reproduce_failure blob for any failure):

    WYJAX_FUZZ=long JAX_PLATFORMS=cpu python -m pytest tests/tasks/fuzz_test.py -q -x
"""

import dataclasses
import os
import pathlib
import re
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tasks import damage
from wyjax.tasks.files import FormatError
from wyjax.tasks.registry import TASKS

PROFILES = {
  "ci": settings(
    derandomize=True, max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
  ),
  "long": settings(
    max_examples=4000, deadline=None, database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
  ),
}
PROFILE = PROFILES[os.environ.get("WYJAX_FUZZ", "ci")]
FILES = {task.files.name: task.files for task in TASKS.values()}
SEEDS = pytest.mark.parametrize("seed", damage.SEEDS, ids=lambda seed: seed.name)


def test_every_folder_format_has_a_seed():
  assert len({id(task.files) for task in TASKS.values()}) == len(FILES)  # one Files per name
  assert {seed.files for seed in damage.SEEDS} == set(FILES)


def _write(root: pathlib.Path, files: dict[str, bytes]) -> None:
  for name, content in files.items():
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(content)


def _texts(files: dict[str, bytes]) -> dict[str, str]:
  try:
    return {name: content.decode("utf-8-sig") for name, content in files.items()}
  except UnicodeDecodeError as e:
    raise damage.Malformed(e) from e


@SEEDS
def test_seed_reads_whole(seed, tmp_path):
  """The undamaged seed reads cleanly, and the test's own count agrees with the reader's."""
  files = damage.written(seed)
  _write(tmp_path, files)
  assert seed.count(_texts(files)) == seed.records
  assert len(FILES[seed.files].read_split(tmp_path, seed.split)) == seed.records


def _strings(value):
  if isinstance(value, str):
    yield value
  elif isinstance(value, (tuple, list)):
    for item in value:
      yield from _strings(item)
  elif dataclasses.is_dataclass(value):
    yield from _strings(dataclasses.astuple(value))


def _editor_lines(content: bytes) -> int:
  """The lines an editor shows, with the empty one after a final line break (an error at the
  end of the file may cite it)."""
  return len((content.decode("utf-8", "replace") + ".").splitlines())


def _check_error(error: FormatError, root: pathlib.Path, files: dict[str, bytes], named: list[str]) -> None:
  assert type(error) is FormatError, f"a subclass of FormatError: {error!r}"
  message = str(error)
  for name in named:
    cited = re.match(rf"{re.escape(str(root / name))}:(\d+): ", message)
    if cited:
      assert 1 <= int(cited[1]) <= _editor_lines(files[name]), f"{name} has no line {cited[1]}: {message}"
      return
  pytest.fail(f"the error does not start with {' or '.join(named)}:<line>: {message}")


def _check_read(seed: damage.Seed, root: pathlib.Path, files: dict[str, bytes], named: list[str]) -> None:
  """One read of the damaged folder: a clean parse with every record, or a FormatError at file:line."""
  try:
    examples = FILES[seed.files].read_split(root, seed.split)
  except FormatError as e:
    _check_error(e, root, files, named)
    return
  try:
    records = seed.count(_texts(files))
  except damage.Malformed as e:
    pytest.fail(f"read {len(examples)} examples from a folder that is not {seed.name}'s format ({e})")
  assert examples is not None, "the split's files are there"
  assert len(examples) == records, f"{len(examples)} examples from {records} records"
  kept = [s for e in examples for s in _strings(e) if re.search("[\ud800-\udfff]", s)]
  assert not kept, f"lone surrogates kept in {kept!r}"


@SEEDS
@PROFILE
@given(data=st.data())
def test_damaged_folder_reads_whole_or_names_file_and_line(seed, data, tmp_path_factory):
  target, files = damage.damaged(data, seed)
  with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as root:
    _write(pathlib.Path(root), files)
    _check_read(seed, pathlib.Path(root), files, sorted(files) if seed.parallel else [target])

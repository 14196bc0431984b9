"""Shared fixtures. Tests that read ../shared/data use `shared_data`; CI always has it."""
import os
import pathlib

import pytest

SHARED_DATA = pathlib.Path(os.environ.get(
    "WYJAX_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
  if not SHARED_DATA.is_dir():
    if os.environ.get("CI"):
      pytest.fail(f"CI must have the shared data at {SHARED_DATA}")
    pytest.skip(f"no shared data at {SHARED_DATA}")
  return SHARED_DATA


@pytest.fixture(scope="session")
def classical_dirs(shared_data, tmp_path_factory) -> dict[str, pathlib.Path]:
  """Data folders of the non-WYWEB benchmarks: C-CLUE NER as shared; CCPM, C-CLUE relations
  and AC-EVAL written by tests.classical_fixtures in their exact formats, from real text."""
  from tests import classical_fixtures

  root = tmp_path_factory.mktemp("classical")
  return {"ccpm": classical_fixtures.write_ccpm(shared_data, root / "ccpm"),
          "cclue_ner": shared_data / "cclue" / "ner",
          "cclue_re": classical_fixtures.write_cclue_re(shared_data, root / "cclue_re"),
          "aceval": classical_fixtures.write_aceval(shared_data, root / "aceval")}

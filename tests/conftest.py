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

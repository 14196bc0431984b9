"""attention.ROUTES walked row by row: a call that reaches each row takes its route (or is refused
with its reason), every row is reached, and every row's evidence names tests and documents that
exist."""

import pathlib
import re

import jax
import numpy as np
import pytest

from wyjax.aot import targets
from wyjax.models import attention

REPO = pathlib.Path(__file__).resolve().parents[2]
# BERT's inference in bf16 over 512 keys, head dimension 64, a padding mask; each witness changes it.
BASE = dict(relative=False, training=False, dropout=False, length=512, padding_only=True, dtype="bfloat16", head_dim=64)
DEBERTA_TRAINING = dict(relative=True, training=True)
DETERMINISTIC = "--xla_gpu_deterministic_ops=true"
# (platform, XLA_FLAGS, config.attention, changes to BASE) → the route it takes, row by row.
WITNESSES = [
  ("cpu", "", "xla", {}, "xla"),
  ("gpu", DETERMINISTIC, "pallas", {"relative": True}, "refused: deterministic_ops"),
  ("gpu", DETERMINISTIC, "auto", {"relative": True}, "xla"),
  ("gpu", "", "cudnn_dropout", {"training": True, "dropout": True}, "cudnn_dropout"),
  ("gpu", "", "auto", {}, "cudnn"),
  ("gpu", "", "auto", DEBERTA_TRAINING, "cudnn"),
  ("gpu", "", "auto", {**DEBERTA_TRAINING, "dropout": True}, "xla"),
  ("gpu", "", "auto", {"relative": True}, "pallas"),
  ("gpu", "", "pallas", {"relative": True, "head_dim": 96}, "refused: head dimension"),
  ("gpu", "", "auto", {"relative": True, "head_dim": 96}, "xla"),
  ("tpu", "", "auto", DEBERTA_TRAINING, "pallas"),
  ("cpu", "", "pallas", {}, "pallas"),
  ("cpu", "", "auto", {}, "xla"),
]


@pytest.fixture(scope="module")
def meshes(h100_mesh):
  tpu = jax.sharding.Mesh(np.array(targets.devices("v5p:2x2x1")[:1]), ("data",)).abstract_mesh
  return {"gpu": h100_mesh, "tpu": tpu, "cpu": jax.sharding.AbstractMesh((), ())}


def _taken(meshes, where, choice, changes):
  call = attention.Call(**{**BASE, **changes})
  with jax.sharding.use_abstract_mesh(meshes[where]):
    row = attention.route(choice, call)
    try:
      taken = attention.implementation(choice, **{**BASE, **changes})
    except ValueError as e:
      taken = f"refused: {e}"
  return row, taken


def test_each_row_is_taken_by_its_witness_and_every_row_by_one(meshes, monkeypatch):
  reached = []
  for (where, flags, choice, changes, expected), row in zip(WITNESSES, attention.ROUTES, strict=True):
    monkeypatch.setenv("XLA_FLAGS", flags)
    reached_row, taken = _taken(meshes, where, choice, changes)
    assert reached_row is row, (where, choice, changes, reached_row)
    route, _, reason = expected.partition(": ")
    assert taken.partition(": ")[0] == route and reason in taken, (where, choice, changes, taken)
    reached.append(reached_row)
  assert len(reached) == len(attention.ROUTES)


def test_every_route_named_by_a_config_value_is_reachable_on_a_gpu(meshes):
  """Each implementation the models know (bert.py, deberta_v2.py) is some row's route on a GPU."""
  assert {r.takes for r in attention.ROUTES if r.platform == "gpu"} == {"xla", "cudnn", "cudnn_dropout", "pallas", None}


def test_every_rows_evidence_names_what_exists():
  for row in attention.ROUTES:
    assert row.evidence, row
    for path, test in re.findall(r"(tests/[\w/]+\.py)::(\w+)", row.evidence):
      assert re.search(rf"^def {test}\(", (REPO / path).read_text(), re.M), (path, test)
    for section in re.findall(r'docs/benchmarks\.md, "([^"]+)"', row.evidence):
      assert section in (REPO / "docs" / "benchmarks.md").read_text(), section

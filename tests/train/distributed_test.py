import pytest

from wyjax.core import distributed


@pytest.mark.parametrize(
  "env,expected",
  [
    ({}, False),
    ({"SLURM_NTASKS": "1"}, False),
    ({"SLURM_NTASKS": "4"}, True),
    ({"TPU_WORKER_HOSTNAMES": "t1k-0"}, False),
    ({"TPU_WORKER_HOSTNAMES": "t1k-0,t1k-1,t1k-2,t1k-3"}, True),
    ({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}, True),
  ],
)
def test_multi_process_environment(monkeypatch, env, expected):
  for name in ("SLURM_NTASKS", "TPU_WORKER_HOSTNAMES", "JAX_COORDINATOR_ADDRESS"):
    monkeypatch.delenv(name, raising=False)
  for name, value in env.items():
    monkeypatch.setenv(name, value)
  assert distributed.multi_process_environment() is expected

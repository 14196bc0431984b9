"""Issue 84: a Hub endpoint that accepts the connection and never answers (a stalled proxy) waited for ever, silently.

Every Hub request is bounded by WYJAX_HUB_TIMEOUT; a download (pretraining's --config.init=ORG/NAME) and an upload
(export --push_to_hub) end in one line naming the endpoint and the limit (docs/reliability.md).
"""

import time

import pytest

from tests.hf.fake_hub import StalledHub
from wyjax.core import guards
from wyjax.hf import export_folder, hub
from wyjax.train import continuing


@pytest.fixture
def stalled(monkeypatch):
  with StalledHub(seconds=30) as endpoint:  # without the limit a request waits until it closes: 30 s
    monkeypatch.setenv("HF_ENDPOINT", endpoint.url)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token")
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, "1.5")
    yield endpoint


def _ends_in_one_line_within_the_limit(stalled, call):
  start = time.monotonic()
  with pytest.raises(guards.RunError) as error:
    call()
  message = str(error.value)
  assert message.startswith(
    f"org/name: the Hub at {stalled.url} did not answer within 1.5 s (WYJAX_HUB_TIMEOUT); check the network"
  ), message
  assert "\n" not in message and stalled.connections
  assert time.monotonic() - start < 15


def test_a_download_from_a_stalled_hub_ends_in_one_line_naming_it_and_the_limit(stalled):
  _ends_in_one_line_within_the_limit(stalled, lambda: continuing.local_init("org/name"))


def test_an_upload_to_a_stalled_hub_ends_in_one_line_naming_it_and_the_limit(stalled, tmp_path):
  for name in export_folder.FILES:
    (tmp_path / name).write_text("{}")
  _ends_in_one_line_within_the_limit(stalled, lambda: hub.push(tmp_path, "org/name"))


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_a_limit_that_is_no_positive_number_is_refused_before_any_request(stalled, value, monkeypatch):
  monkeypatch.setenv(hub.TIMEOUT_VARIABLE, value)
  with pytest.raises(guards.RunError, match=f"^WYJAX_HUB_TIMEOUT={value}: not a number of seconds > 0"):
    hub.fetch("org/name")
  assert not stalled.connections

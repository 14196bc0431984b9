"""Upload an exported folder to the Hugging Face Hub (or any endpoint in HF_ENDPOINT), and download models from it.

Every request waits at most WYJAX_HUB_TIMEOUT seconds (default 60) to connect and for each next piece of its answer.
"""

import contextlib
import math
import os
import pathlib

import httpx2
import huggingface_hub

from wyjax.core import guards, storage
from wyjax.hf import export_folder

TIMEOUT_VARIABLE = "WYJAX_HUB_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0


def timeout_s() -> float:
  """WYJAX_HUB_TIMEOUT's seconds, DEFAULT_TIMEOUT_S when unset; raises RunError for one that is no positive number."""
  text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
  if not text:
    return DEFAULT_TIMEOUT_S
  try:
    seconds = float(text)
  except ValueError:
    seconds = math.nan
  if not (0 < seconds < math.inf):
    raise guards.RunError(f"{TIMEOUT_VARIABLE}={text}: not a number of seconds > 0; unset it for {DEFAULT_TIMEOUT_S:g}")
  return seconds


def _bound_waits(request: httpx2.Request) -> None:
  """An httpx2 request hook: the request waits at most timeout_s() to connect, read, write or get a connection.

  huggingface_hub sends some requests (a model's info, a commit) with no timeout at all, and its downloads with
  HF_HUB_DOWNLOAD_TIMEOUT's: this one limit replaces both.
  """
  request.extensions["timeout"] = httpx2.Timeout(timeout_s()).as_dict()


def _client(token: str | None) -> huggingface_hub.HfApi:
  """A Hub client for HF_ENDPOINT whose every request is bounded (`_bound_waits`)."""
  timeout_s()  # a bad WYJAX_HUB_TIMEOUT is refused before any request
  hooks = huggingface_hub.get_session().event_hooks["request"]  # the client huggingface_hub shares for all requests
  if _bound_waits not in hooks:
    hooks.append(_bound_waits)
  return huggingface_hub.HfApi(endpoint=os.environ.get("HF_ENDPOINT"), token=token)


def _api() -> huggingface_hub.HfApi:
  """A bounded Hub client for HF_ENDPOINT and HF_TOKEN (or a login), read now; raises RunError without a token."""
  if not huggingface_hub.get_token():
    raise guards.RunError(
      "--push_to_hub needs a Hugging Face token with write access: set HF_TOKEN or run `hf auth login`"
    )
  return _client(os.environ.get("HF_TOKEN"))


def _timed_out(error: BaseException, what: str, endpoint: str) -> guards.RunError | None:
  """A RunError naming the endpoint and the limit when `error` (or what it arose from) is a request that timed out."""
  while error is not None and not isinstance(error, httpx2.TimeoutException):
    error = error.__cause__ or error.__context__
  if error is None:
    return None
  return guards.RunError(
    f"{what}: the Hub at {endpoint} did not answer within {timeout_s():g} s ({TIMEOUT_VARIABLE}); check the "
    f"network and HF_ENDPOINT, or raise {TIMEOUT_VARIABLE}"
  )


@contextlib.contextmanager
def _reaching(api: huggingface_hub.HfApi, repo_id: str):
  """Turns a failed request (no network, an endpoint that is no Hub, a refused token) into a one-line RunError.

  The Hub's own errors (httpx2's, which huggingface_hub speaks) carry a URL and advice over several lines.
  """
  try:
    yield
  except httpx2.HTTPError as e:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise _timed_out(e, repo_id, api.endpoint) or guards.RunError(
      f"{repo_id}: the Hub at {api.endpoint} failed ({reason}); check the network, HF_ENDPOINT and HF_TOKEN"
    ) from e


def fetch(init: str) -> str:
  """`init` as a local path: a Hub model id is downloaded, anything else returned as it is.

  A Hub model id (ORG/NAME naming no local path) goes into huggingface_hub's cache, from HF_ENDPOINT when
  set, with its progress shown; raises RunError when the Hub does not give it.
  """
  if not storage.hub_id(init):
    return init
  api = _client(os.environ.get("HF_TOKEN"))
  try:
    return api.snapshot_download(init, allow_patterns=list(_MODEL_FILES))
  except (httpx2.HTTPError, huggingface_hub.errors.HfHubHTTPError, huggingface_hub.errors.LocalEntryNotFoundError) as e:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise _timed_out(e, init, api.endpoint) or guards.RunError(
      f"{init}: no such folder, and the Hub at {api.endpoint} did not give a model of that name "
      f"({reason}); check the name and the network, or pass a downloaded model's folder"
    ) from e


_MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json")


def create_repo(repo_id: str, *, private: bool = False) -> None:
  """Creates `repo_id` if needed; call it before writing an export, so that an unreachable Hub writes nothing."""
  api = _api()
  with _reaching(api, repo_id):
    api.create_repo(repo_id, private=private, exist_ok=True)


def push(folder, repo_id: str, *, private: bool = False, commit_message: str = "Upload from wyjax"):
  """Creates `repo_id` if needed and uploads the exported files of `folder` in one commit.

  Only export_folder.FILES are sent (anything else in the folder stays local); an incomplete export raises
  FileNotFoundError.
  """
  folder = pathlib.Path(folder)
  missing = [f for f in export_folder.FILES if not (folder / f).is_file()]
  if missing:
    raise FileNotFoundError(f"{folder} is not a complete export: {missing} missing (run wyjax.export first)")
  api = _api()
  with _reaching(api, repo_id):
    api.create_repo(repo_id, private=private, exist_ok=True)
    return api.upload_folder(
      folder_path=str(folder), repo_id=repo_id, allow_patterns=list(export_folder.FILES), commit_message=commit_message
    )

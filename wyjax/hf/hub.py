"""Upload an exported folder to the Hugging Face Hub (or any endpoint in HF_ENDPOINT)."""
import os
import pathlib

import huggingface_hub


def push(folder, repo_id: str, *, private: bool = False, commit_message: str = "Upload from wyjax"):
  """Creates `repo_id` if needed and uploads every file of `folder` in one commit.

  The endpoint and token are read at call time from HF_ENDPOINT and HF_TOKEN.
  """
  api = huggingface_hub.HfApi(endpoint=os.environ.get("HF_ENDPOINT"),
                              token=os.environ.get("HF_TOKEN"))
  api.create_repo(repo_id, private=private, exist_ok=True)
  return api.upload_folder(folder_path=str(pathlib.Path(folder)), repo_id=repo_id,
                           commit_message=commit_message)

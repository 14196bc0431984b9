"""Upload an exported folder to the Hugging Face Hub (or any endpoint in HF_ENDPOINT)."""
import os
import pathlib

import huggingface_hub

from wyjax.hf import export_folder


def push(folder, repo_id: str, *, private: bool = False, commit_message: str = "Upload from wyjax"):
  """Creates `repo_id` if needed and uploads the exported files of `folder` (export_folder.FILES;
  anything else in the folder stays local) in one commit.

  The endpoint and token are read at call time from HF_ENDPOINT and HF_TOKEN.
  """
  folder = pathlib.Path(folder)
  missing = [f for f in export_folder.FILES if not (folder / f).is_file()]
  if missing:
    raise FileNotFoundError(f"{folder} is not a complete export: {missing} missing (run wyjax.export first)")
  api = huggingface_hub.HfApi(endpoint=os.environ.get("HF_ENDPOINT"),
                              token=os.environ.get("HF_TOKEN"))
  api.create_repo(repo_id, private=private, exist_ok=True)
  return api.upload_folder(folder_path=str(folder), repo_id=repo_id, allow_patterns=list(export_folder.FILES),
                           commit_message=commit_message)

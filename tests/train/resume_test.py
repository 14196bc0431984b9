import json

import ml_collections
import pytest

from wyjax.core import run_config
from wyjax.train import finetuning, pretraining


def test_a_key_added_after_the_run_began_counts_as_its_default(tmp_path):
  defaults = ml_collections.ConfigDict({"learning_rate": 1e-4, "scan_layers": False})
  (tmp_path / run_config.CONFIG).write_text(json.dumps({"learning_rate": 1e-3}))  # stored before scan_layers existed
  same = ml_collections.ConfigDict({"learning_rate": 1e-3, "scan_layers": False})
  assert run_config.check_config(tmp_path, same, defaults=defaults) == {}
  scanned = ml_collections.ConfigDict({"learning_rate": 1e-3, "scan_layers": True})
  with pytest.raises(run_config.ConfigChanged, match="scan_layers: False -> True"):
    run_config.check_config(tmp_path, scanned, defaults=defaults)
  with pytest.raises(run_config.ConfigChanged, match="scan_layers: '<absent>' -> False"):  # no defaults given
    run_config.check_config(tmp_path, same)


@pytest.mark.parametrize("runs", [pretraining, finetuning], ids=["pretrain", "finetune"])
def test_the_attention_implementation_may_change_on_resume(tmp_path, runs):
  """config.attention changes how a step runs, not what it trains: a resumed run may switch it."""
  stored = runs.base_config()
  stored.attention = "pallas"
  (tmp_path / run_config.CONFIG).write_text(json.dumps(stored.to_dict()))
  current = runs.base_config()
  current.attention = "xla"
  assert run_config.check_config(tmp_path, current, ignore=runs.RESUMABLE_CHANGES, defaults=runs.base_config()) == {}

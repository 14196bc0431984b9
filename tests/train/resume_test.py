import json

import ml_collections
import pytest

from wyjax.train import resume


def test_a_key_added_after_the_run_began_counts_as_its_default(tmp_path):
  defaults = ml_collections.ConfigDict({"learning_rate": 1e-4, "scan_layers": False})
  (tmp_path / resume.CONFIG).write_text(json.dumps({"learning_rate": 1e-3}))  # stored before scan_layers existed
  same = ml_collections.ConfigDict({"learning_rate": 1e-3, "scan_layers": False})
  assert resume.check_config(tmp_path, same, defaults=defaults) == {}
  scanned = ml_collections.ConfigDict({"learning_rate": 1e-3, "scan_layers": True})
  with pytest.raises(resume.ConfigChanged, match="scan_layers: False -> True"):
    resume.check_config(tmp_path, scanned, defaults=defaults)
  with pytest.raises(resume.ConfigChanged, match="scan_layers: '<absent>' -> False"):  # no defaults given
    resume.check_config(tmp_path, same)

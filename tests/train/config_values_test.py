"""A config value out of its range is refused where the loop reads its config, naming the key and
the range, before anything is read or written: fine-tuning, pretraining, the benchmark (and the
demo, which runs those two)."""
import re

import pytest

from tests.train import pretrain_config
from wyjax.core import config_files
from wyjax.train import config_values, finetuning, pretraining, suite

# (override, the error); each once a ZeroDivisionError, a misleading message or a run that went on.
FINETUNING_CASES = [
    (dict(batch_size=0), "config.batch_size is 0; allowed: an integer ≥ 1"),
    (dict(batch_size=-4), "config.batch_size is -4; allowed: an integer ≥ 1"),
    (dict(eval_every=0), "config.eval_every is 0; allowed: an integer ≥ 1"),
    (dict(log_every=0), "config.log_every is 0; allowed: an integer ≥ 1"),
    (dict(num_train_steps=-5), "config.num_train_steps is -5; allowed: an integer ≥ 0"),
    (dict(seeds=0), "config.seeds is 0; allowed: an integer ≥ 1"),
    (dict(dtype="float7"), "config.dtype is 'float7'; allowed: one of 'float32', 'bfloat16', 'float16'"),
    (dict(learning_rate=-1.0), "config.learning_rate is -1.0; allowed: a number ≥ 0, or None (chosen from the "
                               "model's size)"),
    (dict(learning_rate=float("nan")), "config.learning_rate is nan; allowed: a number ≥ 0"),
    (dict(warmup_fraction=1.5), "config.warmup_fraction is 1.5; allowed: a number in [0, 1]"),
    (dict(b2=1.0), "config.b2 is 1.0; allowed: a number in [0, 1)"),
    (dict(patience=-1), "config.patience is -1; allowed: an integer ≥ 0"),
    (dict(seed=-1, eval_batch_size=0), "config.seed is -1; allowed: an integer ≥ 0; config.eval_batch_size is 0; "
                                       "allowed: an integer ≥ 1"),
]


@pytest.mark.parametrize("override, message", FINETUNING_CASES)
def test_fine_tuning_refuses_a_value_out_of_range_before_anything_is_written(tmp_path, override, message):
  config = suite.task_config("tlc", data_dir=str(tmp_path / "absent"), **override)
  with pytest.raises(ValueError, match=re.escape(message)):
    finetuning.finetune(config, tmp_path / "run")
  with pytest.raises(ValueError, match=re.escape(message)):
    finetuning.compile_only(config, "local")
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override, message", [
    (dict(eval_every=0), "config.eval_every is 0; allowed: an integer ≥ 1"),
    (dict(log_every=0), "config.log_every is 0; allowed: an integer ≥ 1"),
    (dict(checkpoint_every=0), "config.checkpoint_every is 0; allowed: an integer ≥ 1"),
    (dict(num_train_steps=-5), "config.num_train_steps is -5; allowed: an integer ≥ 0"),
    (dict(learning_rate=-1.0), "config.learning_rate is -1.0; allowed: a number ≥ 0"),
    (dict(dtype="float7"), "config.dtype is 'float7'; allowed: one of"),
])
def test_pretraining_refuses_a_value_out_of_range_before_anything_is_written(tmp_path, override, message):
  config = config_files.load("pretrain/deberta_tiny")
  config.data_dir = str(tmp_path / "corpus")  # never prepared: the check comes first
  config.update(override)
  with pytest.raises(ValueError, match=re.escape(message)):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert not (tmp_path / "run").exists() and not (tmp_path / "corpus").exists()


def test_masking_values_are_checked_inside_their_group():
  config = config_files.load("pretrain/deberta_tiny")
  config.masking.rate = 0.0
  with pytest.raises(ValueError, match=re.escape("config.masking.rate is 0.0; allowed: a number in (0, 1]")):
    config_values.check(config, config_values.PRETRAINING)


def test_the_benchmark_refuses_a_bad_override_before_any_task_runs(tmp_path):
  (tmp_path / "data" / "tlc").mkdir(parents=True)
  with pytest.raises(ValueError, match=re.escape("config.num_epochs is 0; allowed: an integer ≥ 1")):
    suite.run(init="", data_root=tmp_path / "data", out=tmp_path / "out", tasks=["tlc", "gjc"], name="tiny",
              num_epochs=0)
  assert not (tmp_path / "out").exists()


def test_every_packaged_config_holds_allowed_values():
  """Each of configs/ as shipped passes the check its loop makes, and so does the tests' own."""
  for name in config_files.available():
    config = config_files.load(name)
    if name.startswith("pretrain/"):
      config_values.check(config, config_values.PRETRAINING)
    else:
      config_values.check(finetuning.with_options(config), config_values.FINETUNING)
  config_values.check(pretrain_config.get_config(), config_values.PRETRAINING)

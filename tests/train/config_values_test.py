"""A config value out of its range is refused where the loop reads its config, naming the key and
the range, before anything is read or written: fine-tuning, pretraining, the benchmark (and the
demo, which runs those two)."""

import logging
import re

import pytest

from tests.train import pretrain_config
from wyjax.core import config_files
from wyjax.models import EncoderConfig
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
  (
    dict(learning_rate=-1.0),
    "config.learning_rate is -1.0; allowed: a number ≥ 0, or None (chosen from the model's size)",
  ),
  (dict(learning_rate=float("nan")), "config.learning_rate is nan; allowed: a number ≥ 0"),
  (dict(warmup_fraction=1.5), "config.warmup_fraction is 1.5; allowed: a number in [0, 1]"),
  (dict(b2=1.0), "config.b2 is 1.0; allowed: a number in [0, 1)"),
  (dict(patience=-1), "config.patience is -1; allowed: an integer ≥ 0"),
  (
    dict(seed=-1, eval_batch_size=0),
    "config.seed is -1; allowed: an integer ≥ 0 and ≤ 2,147,483,647; "
    "config.eval_batch_size is 0; allowed: an integer ≥ 1",
  ),
  # Issue 57's: sizes that fit the step's int32, planning that ran for minutes, a layout of 48 lines.
  (
    dict(num_train_steps=2**40),
    "config.num_train_steps is 1099511627776; allowed: an integer ≥ 0 and ≤ 2,147,483,647",
  ),  # a 68-line OverflowError
  (dict(seed=2**32), "config.seed is 4294967296; allowed: an integer ≥ 0 and ≤ 2,147,483,647"),
  (
    dict(seed=2**31 - 2, seeds=3),
    "config.seed is 2147483646, config.seeds is 3; allowed: seed + seeds - 1 ≤ 2,147,483,647",
  ),
  (dict(length_buckets=1_000_000), "config.length_buckets is 1000000; allowed: an integer ≥ 0 and ≤ 64"),
  (dict(max_length=1), "config.max_length is 1; allowed: 0 (the task's), or an integer ≥ 8"),  # StopIteration
  (dict(base_learning_rate=float("inf")), "config.base_learning_rate is inf; allowed: a number > 0"),
]


@pytest.mark.parametrize("override, message", FINETUNING_CASES)
def test_fine_tuning_refuses_a_value_out_of_range_before_anything_is_written(tmp_path, override, message):
  config = suite.task_config("tlc", data_dir=str(tmp_path / "absent"), **override)
  with pytest.raises(ValueError, match=re.escape(message)):
    finetuning.finetune(config, tmp_path / "run")
  with pytest.raises(ValueError, match=re.escape(message)):
    finetuning.compile_only(config, "local")
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
  "override, message",
  [
    (dict(eval_every=0), "config.eval_every is 0; allowed: an integer ≥ 1"),
    (dict(log_every=0), "config.log_every is 0; allowed: an integer ≥ 1"),
    (dict(checkpoint_every=0), "config.checkpoint_every is 0; allowed: an integer ≥ 1"),
    (dict(num_train_steps=-5), "config.num_train_steps is -5; allowed: an integer ≥ 0"),
    (dict(learning_rate=-1.0), "config.learning_rate is -1.0; allowed: a number ≥ 0"),
    (dict(dtype="float7"), "config.dtype is 'float7'; allowed: one of"),
    # Issue 63's: the model's and the corpus's keys have ranges too (a dropout of 1.5 trained, exit 0).
    ({"model.hidden_dropout_prob": 1.5}, "config.model.hidden_dropout_prob is 1.5; allowed: a number in [0, 1)"),
    (
      {"model.hidden_size": 7},
      "config.model.hidden_size is 7, config.model.num_attention_heads is 4; allowed: a "
      "hidden_size that num_attention_heads divides",
    ),
    ({"model.intermediate_size": 0}, "config.model.intermediate_size is 0; allowed: an integer ≥ 1"),
    ({"model.hidden_act": "gelu7"}, "config.model.hidden_act is 'gelu7'; allowed: one of 'gelu'"),
    ({"corpus.max_vocab": -1}, "config.corpus.max_vocab is -1; allowed: an integer ≥ 0"),
    ({"corpus.valid_fraction": 1.0}, "config.corpus.valid_fraction is 1.0; allowed: a number in [0, 1)"),
  ],
)
def test_pretraining_refuses_a_value_out_of_range_before_anything_is_written(tmp_path, override, message):
  config = config_files.load("pretrain/deberta_tiny")
  config.data_dir = str(tmp_path / "corpus")  # never prepared: the check comes first
  config.update_from_flattened_dict(override)
  with pytest.raises(ValueError, match=re.escape(message)):
    pretraining.train_and_evaluate(config, tmp_path / "run")
  assert not (tmp_path / "run").exists() and not (tmp_path / "corpus").exists()


def test_every_float_anywhere_is_finite_and_nested_keys_are_checked():
  config = config_files.load("pretrain/deberta_tiny")
  config.model.hidden_dropout_prob = float("nan")
  config.mesh.data = 0
  with pytest.raises(
    ValueError,
    match=re.escape(
      "config.mesh.data is 0; allowed: an integer ≥ 1, or -1 (the devices "
      "left); config.model.hidden_dropout_prob is nan; allowed: a number "
      "in [0, 1)"
    ),
  ):
    config_values.check(config, config_values.PRETRAINING)
  with pytest.raises(
    ValueError,
    match=re.escape(  # --config.logical_axis_rules=3: 48 lines from partitioning
      "config.scan_layers is 1; allowed: True or False; config.logical_axis_rules is (3,); allowed: pairs (logical "
      "axis, mesh axis, axes or None)"
    ),
  ):
    config_values.check({"scan_layers": 1, "logical_axis_rules": (3,)}, config_values.FINETUNING)


def test_a_beam_wider_than_an_evaluation_batch_is_refused():
  config = finetuning.with_options(config_files.load("wywmt"))
  config.decoding.beam_size = 10**6  # one beam is 10**6 rows: the evaluation batch grew with it
  with pytest.raises(
    ValueError,
    match=re.escape(
      "config.decoding.beam_size is 1000000, config.eval_batch_size is 64; "
      "allowed: a beam of at most eval_batch_size rows"
    ),
  ):
    config_values.check(config, config_values.FINETUNING)


@pytest.mark.parametrize(
  "override, message",
  [
    (dict(sort_window=10**9), "config.sort_window is 1000000000; allowed: at most an epoch's 3 batches"),  # 2.6 GB
    (dict(batch_size=101), "config.batch_size is 101; allowed: at most the 100 training examples"),
    (dict(num_epochs=2**30), "config.num_epochs is 1073741824; allowed: at most 715,827,882 epochs of 3 steps"),
    (
      dict(max_length=8),
      "config.max_length is 8: the task's examples need 12 tokens; allowed: 0 (the task's), or at least 12",
    ),
  ],
)
def test_what_the_data_bounds_is_refused_before_any_step_compiles(override, message):
  config = suite.task_config("tlc", **override)
  with pytest.raises(ValueError, match=re.escape(message)):
    config_values.check_data(config, train_examples=100, longest=12, max_length=config.max_length or 128)
  config_values.check_data(suite.task_config("tlc"), train_examples=100, longest=12, max_length=128)


def test_masking_values_are_checked_inside_their_group():
  config = config_files.load("pretrain/deberta_tiny")
  config.masking.rate = 0.0
  with pytest.raises(ValueError, match=re.escape("config.masking.rate is 0.0; allowed: a number in (0, 1]")):
    config_values.check(config, config_values.PRETRAINING)


def test_the_benchmark_refuses_a_bad_override_before_any_task_runs(tmp_path):
  (tmp_path / "data" / "tlc").mkdir(parents=True)
  with pytest.raises(ValueError, match=re.escape("config.num_epochs is 0; allowed: an integer ≥ 1")):
    suite.run(
      init="", data_root=tmp_path / "data", out=tmp_path / "out", tasks=["tlc", "gjc"], name="tiny", num_epochs=0
    )
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


def test_a_models_fields_have_their_ranges_wherever_it_is_described():
  """The ranges of a run's config.model are EncoderConfig's, which a config.json or model.json meets too."""
  with pytest.raises(
    ValueError,
    match=re.escape(
      "hidden_dropout_prob is 1.5; allowed: a number in [0, 1); type_vocab_size is -1; allowed: an integer ≥ 0"
    ),
  ):
    EncoderConfig(vocab_size=10, hidden_dropout_prob=1.5, type_vocab_size=-1)
  with pytest.raises(
    ValueError,
    match=re.escape(
      "hidden_size is 7, num_attention_heads is 4; allowed: a hidden_size that num_attention_heads divides"
    ),
  ):
    EncoderConfig(vocab_size=10, hidden_size=7, num_attention_heads=4)


def test_what_the_data_decides_is_refused_where_typed_and_stated_where_a_config_file_holds_it(caplog):
  """`--config.model.vocab_size=3` was replaced by the corpus's 3,974 without a word."""
  config = config_files.load("pretrain/deberta_tiny")  # its model.vocab_size: 6,000, a plan
  with pytest.raises(
    ValueError,
    match=re.escape(
      "--config.model.vocab_size=6000, but the corpus C decides it: 201; "
      "leave --config.model.vocab_size out, or give 201"
    ),
  ):
    config_values.check_decided(config, {"model.vocab_size": 201}, "the corpus C", typed=("model.vocab_size",))
  with caplog.at_level(logging.INFO):
    config_values.check_decided(config, {"model.vocab_size": 201}, "the corpus C", typed=("batch_size",))
    config_values.check_decided(config, {"model.vocab_size": 6000}, "the corpus C", typed=("model.vocab_size",))
  assert [r.getMessage() for r in caplog.records] == [
    "config.model.vocab_size is 6000 in the config; the corpus C decides it: 201"
  ]

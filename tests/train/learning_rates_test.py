"""The fine-tuning learning rate chosen from the model's size, and the warning on a flat loss."""

import math

import jax
import numpy as np
import pytest

from wyjax.core import config_files
from wyjax.hf import loading
from wyjax.models import EncoderConfig
from wyjax.tasks.registry import TASKS
from wyjax.train import finetuning, learning_rates, suite, task_model
from wyjax.train.learning_rates import BASE_SIZE, TINY_LEARNING_RATE, TINY_SIZE

TINY = EncoderConfig(**task_model.FRESH_TINY_MODEL, vocab_size=13763)  # configs/pretrain/deberta_tiny.py's
BASE = EncoderConfig(
  vocab_size=21128,
  relative_attention=True,
  position_buckets=256,
  pos_att_type="p2c|c2p",
  share_att_key=True,
  norm_rel_ebd="layer_norm",
)  # 12 layers of 768 / 3072
# 4 layers of 256 / 1024: 4 × (4·256² + 2·256·1024 + 9·256 + 1024) = 4 × 789,760 = 3,159,040.
SMALL = EncoderConfig(
  vocab_size=100, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
)


def test_layer_parameters_count_the_layers_of_the_model():
  assert learning_rates.layer_parameters(TINY) == TINY_SIZE == 2 * (4 * 128**2 + 2 * 128 * 256 + 9 * 128 + 256)
  assert learning_rates.layer_parameters(BASE) == BASE_SIZE == 12 * (4 * 768**2 + 2 * 768 * 3072 + 9 * 768 + 3072)
  assert learning_rates.layer_parameters(SMALL) == 3_159_040
  for model in (TINY, BASE):  # the formula is the real layers' parameter count (embeddings apart)
    shapes = loading.param_shapes(model, mlm=False)["encoder"]
    layers = {k: v for k, v in shapes.items() if k.startswith("layer_")}
    leaves = jax.tree_util.tree_leaves(layers, is_leaf=lambda x: isinstance(x, tuple))
    assert sum(int(np.prod(shape)) for shape in leaves) == learning_rates.layer_parameters(model)


def test_the_rate_goes_from_the_tiny_models_to_the_papers_with_the_size():
  assert TINY_LEARNING_RATE == 1e-3
  for base_rate in (1e-5, 2e-5, 3e-5, 2e-4):
    assert learning_rates.rate_for(TINY_SIZE, base_rate) == 1e-3
    assert learning_rates.rate_for(1_000, base_rate) == 1e-3  # smaller than tiny: not extrapolated
    assert learning_rates.rate_for(BASE_SIZE, base_rate) == base_rate
    assert learning_rates.rate_for(10 * BASE_SIZE, base_rate) == base_rate  # large: the paper's base rate
  # Halfway in log size (the geometric mean), halfway in log rate: √(1e-3 · 2e-5) = 1.414e-4 → 1.4e-4.
  assert learning_rates.rate_for(math.sqrt(TINY_SIZE * BASE_SIZE), 2e-5) == 1.4e-4
  # SMALL: t = ln(3,159,040 / 264,960) / ln(85,054,464 / 264,960) = 2.4784 / 5.7714 = 0.4294;
  # 1e-3 · (2e-5 / 1e-3)^0.4294 = 1e-3 · e^(−3.9120 · 0.4294) = 1.86e-4 → 1.9e-4, and with WYWMT's
  # 2e-4: 1e-3 · 0.2^0.4294 = 5.01e-4 → 5e-4.
  assert learning_rates.rate_for(3_159_040, 2e-5) == 1.9e-4
  assert learning_rates.rate_for(3_159_040, 2e-4) == 5e-4
  sizes = np.geomspace(TINY_SIZE / 2, BASE_SIZE * 2, 40)
  rates = [learning_rates.rate_for(size, 2e-5) for size in sizes]
  assert all(a >= b for a, b in zip(rates, rates[1:])) and rates[0] == 1e-3 and rates[-1] == 2e-5


def test_an_explicit_rate_wins_and_an_unset_one_is_chosen_for_the_model():
  config = suite.task_config("tlc")
  assert config.learning_rate is None and config.base_learning_rate == 2e-5  # configs/tlc.py: the paper's
  assert learning_rates.resolved(config, TINY).learning_rate == 1e-3
  assert learning_rates.resolved(config, SMALL).learning_rate == 1.9e-4
  assert learning_rates.resolved(config, BASE).learning_rate == 2e-5
  assert config.learning_rate is None  # resolved returns a copy
  for explicit in (5e-3, 0.0, -1e-3):  # 0 (no training) and negative rates are the user's too
    assert learning_rates.resolved(suite.task_config("tlc", learning_rate=explicit), TINY).learning_rate == explicit


def test_every_task_config_leaves_the_rate_to_the_model_size():
  for name, task in TASKS.items():
    config = finetuning.with_options(config_files.load(task.config_name))
    assert config.learning_rate is None, name
    assert 1e-6 <= config.base_learning_rate <= 1e-3, name
  assert finetuning.base_config().base_learning_rate == 2e-5  # Table 15's default


def _watch(total=1000, rate=2e-5):
  return learning_rates.LossWatch(total, rate, TINY)


def test_a_flat_loss_warns_once_with_the_numbers(caplog):
  watch = _watch()
  flat = [1.3863, 1.3870, 1.3859, 1.3866, 1.3861, 1.3864, 1.3862]
  fired = [watch.push(50 * (k + 1), loss) for k, loss in enumerate(flat)]
  # Steps 50 … 350 of 1000: the check is at the first log point at or past 20%, step 200.
  assert fired[:3] == [None] * 3 and fired[4:] == [None] * 3
  message = fired[3]
  assert "1.3863 at step 50" in message and "1.3865 at step 200 of 1000 (mean of the latest 3 logged)" in message
  assert "learning rate 2e-05" in message and "0.26 M layer parameters" in message
  assert "Try a larger --config.learning_rate" in message  # the loss is flat: the rate may be too small
  assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [message]


def test_a_falling_loss_does_not_warn():
  watch = _watch()
  assert all(watch.push(50 * (k + 1), loss) is None for k, loss in enumerate([1.95, 1.80, 1.70, 1.62, 1.55, 1.9]))
  watch = _watch(total=100)  # past 20% at the first log point, but one loss is nothing to compare
  assert watch.push(50, 1.95) is None and watch.push(100, 1.80) is None
  watch = _watch(total=200)  # a NaN loss is the non-finite guard's business
  assert watch.push(50, 1.95) is None and watch.push(100, float("nan")) is None


@pytest.mark.parametrize("losses, fires", [([2.0, 1.89], False), ([2.0, 1.91], True), ([2.0, 2.3], True)])
def test_the_threshold_is_five_percent(losses, fires):
  watch = _watch(total=100)
  assert watch.push(10, losses[0]) is None
  message = watch.push(20, losses[1])
  assert (message is not None) == fires
  if losses[1] > 1.05 * losses[0]:  # risen by more than the flat band: the rate may be too large
    assert "Try a smaller --config.learning_rate" in message

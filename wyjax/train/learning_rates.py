"""Fine-tuning's learning rate from the size of the model, and a warning when the loss stays flat.

A task config's `base_learning_rate` is its source's rate for a base-sized model. With
`learning_rate` None (base_config's default) `resolved` chooses the rate from the size of the model
being fine-tuned (`rate_for`); an explicit `--config.learning_rate` always wins, 0 included.
`LossWatch` warns once when the training loss has not fallen by CHECK_SHARE of a run's steps.
"""

import logging
import math

import ml_collections

from wyjax.models import EncoderConfig

# The embedded default (configs/pretrain/deberta_tiny.py: 2 layers of 128 / 256), and the best rate of
# benchmarks/learning_rate_sweep.py on TLC and CCPM's Match (docs/benchmarks.md).
TINY_SIZE, TINY_LEARNING_RATE = 264_960, 1e-3
BASE_SIZE = 85_054_464  # BERT-base, DeBERTa-base: 12 layers of 768 / 3072


def layer_parameters(model: EncoderConfig) -> int:
  """The encoder's transformer-layer parameters, L × (4H² + 2HI + 9H + I): not the embeddings.

  Per layer: Q, K, V and output projections with biases (4H² + 4H), the feed-forward pair
  (2HI + I + H) and two layer norms (4H).
  """
  h, i = model.hidden_size, model.intermediate_size
  return model.num_hidden_layers * (4 * h * h + 2 * h * i + 9 * h + i)


def rate_for(size: int, base_learning_rate: float) -> float:
  """The learning rate for a model of `size` layer parameters whose base-sized rate is base_learning_rate.

  TINY_LEARNING_RATE at most TINY_SIZE, base_learning_rate at least BASE_SIZE; in between
  log-linear in the size, log r = log r_tiny + t · (log r_base − log r_tiny) with
  t = log(N / N_tiny) / log(N_base / N_tiny), rounded to two significant digits.
  """
  if size >= BASE_SIZE:
    return base_learning_rate
  if size <= TINY_SIZE:
    return TINY_LEARNING_RATE
  t = math.log(size / TINY_SIZE) / math.log(BASE_SIZE / TINY_SIZE)
  rate = math.exp(math.log(TINY_LEARNING_RATE) + t * (math.log(base_learning_rate) - math.log(TINY_LEARNING_RATE)))
  return float(f"{rate:.2g}")


def describe(size: int) -> str:
  return f"{size / 1e6:.2f} M layer parameters"


def resolved(config: ml_collections.ConfigDict, model: EncoderConfig) -> ml_collections.ConfigDict:
  """A copy of config with learning_rate set, logged: the config's own, else chosen by the model's size (rate_for)."""
  config = ml_collections.ConfigDict(config.to_dict())
  size = layer_parameters(model)
  if config.learning_rate is None:
    config.learning_rate = rate_for(size, config.base_learning_rate)
    logging.info(
      "learning rate %g, chosen for a model of %s (base_learning_rate %g is for a base-sized model of "
      "%s; --config.learning_rate sets another)",
      config.learning_rate,
      describe(size),
      config.base_learning_rate,
      describe(BASE_SIZE),
    )
  else:
    logging.info("learning rate %g, as configured (a model of %s)", config.learning_rate, describe(size))
  return config


CHECK_SHARE = 0.2  # of the run's steps: the first logged loss after this is compared with the first one
FLAT_RATIO = 0.95  # not fallen: the latest logged losses' mean ≥ this × the first logged loss
LATEST = 3  # logged losses averaged (the first one apart)


class LossWatch:
  """Warns once when the training loss has not fallen.

  The check is at the first log point at or past CHECK_SHARE of `total_steps` (with two losses
  logged): the mean of the LATEST logged losses after the first, against the first.
  """

  def __init__(self, total_steps: int, learning_rate: float, model: EncoderConfig):
    self.check_at = CHECK_SHARE * total_steps
    self.total_steps, self.learning_rate, self.size = total_steps, learning_rate, layer_parameters(model)
    self.losses = []  # (step, loss) as logged
    self.done = False

  def push(self, step: int, loss: float) -> str | None:
    """Records a logged loss; returns the warning (also logged) when it fires, else None."""
    self.losses.append((step, loss))
    if self.done or step < self.check_at or len(self.losses) < 2:
      return None
    self.done = True
    (first_step, first), latest = self.losses[0], [loss for _, loss in self.losses[1:][-LATEST:]]
    current = sum(latest) / len(latest)
    if not math.isfinite(current) or current < FLAT_RATIO * first:
      return None
    advice = "a smaller" if current > (2 - FLAT_RATIO) * first else "a larger"  # risen 5%: too large; flat: small
    mean = f" (mean of the latest {len(latest)} logged)" if len(latest) > 1 else ""
    message = (
      f"the training loss has not fallen: {first:.4f} at step {first_step}, {current:.4f} at step {step} "
      f"of {self.total_steps}{mean}, with learning rate "
      f"{self.learning_rate:g} for a model of {describe(self.size)}. Try {advice} --config.learning_rate "
      "(or leave it unset: chosen from the model's size), more steps, or a pretrained --config.init; "
      "check that the labels are learnable (docs/finetuning.md)"
    )
    logging.warning("%s", message)
    return message

"""The two reasons a loop stops early, on their own: stop signals (scoped to the loop) and
non-finite steps (skipped inside the step, counted on the host)."""

import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from wyjax.core import guards, optimizer


def test_stop_signals_are_scoped_to_the_block():
  original = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's Ctrl-C, whatever ran before
  try:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with guards.stop_signals() as stop:
      os.kill(os.getpid(), signal.SIGTERM)  # caught: the loop stops at its next step boundary
      assert stop.signal_at(7) == signal.SIGTERM
    assert {sig: signal.getsignal(sig) for sig in before} == before
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C works again after the loop
      os.kill(os.getpid(), signal.SIGINT)
      signal.sigtimedwait([], 0.1)  # a Python handler runs at the next bytecode; give it one
  finally:
    signal.signal(signal.SIGINT, original)


def test_interrupted_exit_code_is_128_plus_the_signal():
  assert guards.Interrupted(signal.SIGTERM, 5).exit_code == 143
  assert guards.Interrupted(signal.SIGINT, 5).exit_code == 130


def test_a_non_finite_step_keeps_the_state_but_advances_the_step():
  old = {"step": jnp.int32(3), "params": {"w": jnp.ones(3)}, "opt_state": (jnp.int32(2), jnp.zeros(3))}
  new = {"step": jnp.int32(4), "params": {"w": jnp.full(3, 2.0)}, "opt_state": (jnp.int32(3), jnp.ones(3))}
  guard = jax.jit(lambda loss, grads: guards.skip_if_not_finite(old, new, loss, optimizer.global_norm(grads)))
  kept, ok = guard(jnp.float32(1.0), {"w": jnp.ones(3)})
  assert bool(ok) and float(kept["params"]["w"][0]) == 2.0 and int(kept["opt_state"][0]) == 3
  for loss, grads in (
    (jnp.float32(jnp.inf), {"w": jnp.ones(3)}),
    (jnp.float32(1.0), {"w": jnp.array([1.0, jnp.nan, 1.0])}),
    (jnp.float32(1.0), {"w": jnp.array([1.0, -jnp.inf, 1.0])}),
    (jnp.float32(1.0), {"w": jnp.full(3, 1e20)}),
  ):  # finite, but its squares overflow: skipped too
    kept, ok = guard(loss, grads)
    assert not bool(ok) and int(kept["step"]) == 4
    np.testing.assert_array_equal(kept["params"]["w"], old["params"]["w"])
    assert int(kept["opt_state"][0]) == 2  # the optimizer's count (its schedule) does not advance
  # Large but finite values are finite: all_finite reduces isfinite, not a norm that would overflow.
  assert bool(guards.all_finite({"w": jnp.full(1000, 3e38)}))


def test_adamw_from_finite_inputs_stays_finite_and_bounded():
  """Why the guard reads no new parameter: from a finite state, gradients whose norm is finite
  (however large) move each parameter by at most lr × (max_grad_norm / eps + weight_decay × |p|),
  and the moments stay finite."""
  tx, _ = optimizer.adamw(learning_rate=1e-2, warmup_steps=0, total_steps=10, max_grad_norm=1.0)
  params = {"w": jnp.array([3e38, -1.0, 0.0]), "bias": jnp.zeros(2)}
  state = tx.init(params)
  for grads in (
    {"w": jnp.array([1e18, -1e18, 0.0]), "bias": jnp.array([1e-30, 0.0])},
    {"w": jnp.array([0.0, 0.0, 1e-45]), "bias": jnp.array([-1e19, 1e19])},
  ):
    updates, state = tx.update(grads, state, params, grad_norm=optimizer.global_norm(grads))
    new = optax.apply_updates(params, updates)
    assert bool(guards.all_finite((new, state)))
    step = np.abs(np.asarray(new["w"]) - np.asarray(params["w"]))
    assert np.all(step <= 1e-2 * (1.0 / 1e-6 + 0.01 * np.abs(np.asarray(params["w"]))) * (1 + 1e-6)), step
    params = new


def test_the_global_norm_takes_one_reduction_per_stack_of_like_leaves():
  """global_norm over a tree of 2 x 3 leaves (two shapes, float32 and bfloat16) and an integer
  leaf: exact, not finite wherever a NaN or Inf is, and one reduction per stack (shape, dtype) in
  the compiled program, not one per leaf."""
  rng = np.random.default_rng(0)
  tree = {
    f"layer_{i}": {
      "kernel": rng.normal(size=(8, 4)).astype(np.float32),
      "bias": rng.normal(size=(4,)).astype(jnp.bfloat16),
    }
    for i in range(3)
  }
  tree["count"] = np.int32(7)
  expected = np.sqrt(
    sum(
      np.sum(np.square(np.asarray(x, np.float64)))
      for x in jax.tree_util.tree_leaves(tree)
      if not isinstance(x, np.int32)
    )
  )
  np.testing.assert_allclose(optimizer.global_norm(tree), expected, rtol=1e-6)
  for name, leaf in (("layer_2", "kernel"), ("layer_0", "bias")):
    for bad in (np.nan, np.inf, -np.inf):
      broken = jax.tree_util.tree_map(np.array, tree)
      broken[name][leaf].flat[3] = bad
      assert not np.isfinite(optimizer.global_norm(broken)) and not bool(guards.all_finite(broken))
  assert jax.jit(optimizer.global_norm).lower(tree).as_text().count("stablehlo.reduce") == 2


def test_non_finite_steps_counted_one_step_late_and_stopped_in_a_row():
  guard = guards.NonFiniteSteps(max_in_a_row=2)
  guard.push(1, jnp.bool_(False))
  assert guard.in_a_row == 0  # read when the next step is pushed, not before
  guard.push(2, jnp.bool_(True))
  guard.push(3, jnp.bool_(False))
  guard.push(4, jnp.bool_(False))
  guard.check()  # step 4 is still pending: 1 in a row so far
  guard.flush()
  assert guard.take_skipped() == 3 and guard.take_skipped() == 0
  with pytest.raises(guards.NonFiniteError, match="steps 3-4: .* not finite 2 times in a row"):
    guard.check()

"""An encoder + MLM head run as a prefix LM (UniLM): WYWMT's translation model and its decoding.

- Layout: [CLS] source [SEP] target [SEP], token types 0 … 0 | 1 … 1. The source sees the whole source, each
  target token the source and the targets up to itself; the logits at position i predict token i + 1.
- Decoding runs the same `MaskedLM` incrementally on sources left-padded into one block
  [pad … pad [CLS] source [SEP]] (every row's next token goes to the same cache slot), encoded once into a
  key/value cache; position ids count from each row's [CLS], so it computes what the training layout
  computes. `use_cache=False` re-runs the full forward pass at every step instead (the reference).
"""

import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from wyjax.models.heads import MaskedLM

# Per-layer relative projections in the cache: computed once, shared by every row.
_SHARED_CACHE_ENTRIES = ("cached_pos_key", "cached_pos_query")


def attention_mask(token_type_ids, padding_mask) -> jax.Array:
  """[batch, query, key] boolean prefix-LM mask from [batch, length] token types and padding."""
  level = jnp.cumsum(token_type_ids, axis=-1)
  return (level[:, None, :] <= level[:, :, None]) & padding_mask[:, None, :].astype(bool)


def _position_ids(prefix, total: int, model: MaskedLM):
  """[batch, total] position ids of the left-padded layout: each row counts from its [CLS] (first_position)."""
  cfg = model.config
  pads = jnp.sum(prefix == cfg.pad_token_id, axis=1, keepdims=True)
  return jnp.maximum(jnp.arange(total) - pads, 0) + cfg.first_position


def _full_forward(model, params, ids, valid, positions, slot, prefix_length: int):
  """Logits [batch, vocab] at `slot` from the whole sequence, without a cache."""
  types = jnp.broadcast_to(jnp.arange(ids.shape[1]) >= prefix_length, ids.shape).astype(jnp.int32)
  logits = model.apply(
    {"params": params},
    ids,
    attention_mask(types, valid),
    types,
    positions,
    predict_positions=jnp.full((ids.shape[0], 1), slot),
  )
  return logits[:, 0]


def encode_prefix(model: MaskedLM, params, prefix, max_new: int, *, use_cache: bool = True):
  """Runs the left-padded prefix block [batch, P].

  Returns:
    (the first target token's logits [batch, vocab], the decoding state with room for max_new tokens).
  """
  batch, length = prefix.shape
  total = length + max_new
  valid = jnp.pad(prefix != model.config.pad_token_id, ((0, 0), (0, max_new)))
  positions = _position_ids(prefix, total, model)
  state = {"valid": valid, "positions": positions}
  if not use_cache:
    ids = jnp.pad(prefix, ((0, 0), (0, max_new)), constant_values=model.config.pad_token_id)
    return _full_forward(model, params, ids, valid, positions, length - 1, length), {**state, "ids": ids}
  mask = jnp.broadcast_to(valid[:, None, :], (batch, length, total))
  logits, variables = model.apply(
    {"params": params},
    prefix,
    mask,
    jnp.zeros_like(prefix),
    positions[:, :length],
    predict_positions=jnp.full((batch, 1), length - 1),
    cache_start=0,
    mutable=["cache"],
  )
  return logits[:, 0], {**state, "cache": variables["cache"]}


def decode_step(model: MaskedLM, params, state: dict, token, slot, prefix_length: int):
  """Feeds token [batch] (a target token, type 1) at cache slot `slot`.

  Returns:
    (the next token's logits [batch, vocab], the new state).
  """
  valid = state["valid"].at[:, slot].set(True)
  position = jax.lax.dynamic_slice_in_dim(state["positions"], slot, 1, axis=1)
  if "ids" in state:
    ids = state["ids"].at[:, slot].set(token)
    return (
      _full_forward(model, params, ids, valid, state["positions"], slot, prefix_length),
      {**state, "ids": ids, "valid": valid},
    )
  logits, variables = model.apply(
    {"params": params, "cache": state["cache"]},
    token[:, None],
    valid[:, None, :],
    jnp.ones_like(token)[:, None],
    position,
    cache_start=slot,
    mutable=["cache"],
  )
  return logits[:, 0], {**state, "cache": variables["cache"], "valid": valid}


def _map_rows(fn, state: dict) -> dict:
  """fn over every state array that has a batch axis."""
  return jax.tree_util.tree_map_with_path(
    lambda path, x: x if getattr(path[-1], "key", None) in _SHARED_CACHE_ENTRIES else fn(x), state
  )


def _constrain(logits, t, limits, sep_id: int, banned_ids: tuple[int, ...]):
  """The logits with the tokens banned at step t at -inf.

  No special token but [SEP]; [SEP] not first (a translation is never empty, unless its limit is 1) and
  the only choice as a row's limits-th token.
  """
  logits = logits.at[:, jnp.asarray(banned_ids, jnp.int32)].set(-jnp.inf)
  is_sep = jnp.arange(logits.shape[-1]) == sep_id
  must_end = (t + 1 >= limits)[:, None]
  too_soon = ((t == 0) & (limits > 1))[:, None]
  return jnp.where((must_end & ~is_sep) | (too_soon & is_sep), -jnp.inf, logits)


def _greedy(step, logits, state, limits, *, max_new: int, sep_id: int, pad_id: int, banned_ids):
  """The most probable token at each step, until every row has its [SEP]."""
  batch = logits.shape[0]

  def body(carry):
    t, state, logits, tokens, done = carry
    token = jnp.argmax(_constrain(logits, t, limits, sep_id, banned_ids), -1).astype(jnp.int32)
    token = jnp.where(done, pad_id, token)
    logits, state = step(state, token, t)
    return t + 1, state, logits, tokens.at[:, t].set(token), done | (token == sep_id)

  def keep_going(carry):
    t, _, _, _, done = carry
    return (t < max_new) & ~jnp.all(done)

  init = (jnp.int32(0), state, logits, jnp.full((batch, max_new), pad_id, jnp.int32), jnp.zeros(batch, bool))
  return jax.lax.while_loop(keep_going, body, init)[3]


def _beam_search(
  step,
  logits,
  state,
  limits,
  *,
  max_new: int,
  sep_id: int,
  pad_id: int,
  banned_ids,
  beam_size: int,
  length_penalty: float,
):
  """Beam search: each row's best finished hypothesis [batch, max_new].

  A finished hypothesis scores log p / ((5 + length) / 6) ** length_penalty (GNMT's penalty; length counts
  the [SEP]). A row stops when no live beam can still beat its beam_size-th finished one.
  """
  batch, vocab = logits.shape
  k = beam_size
  penalty = lambda length: ((5.0 + length) / 6.0) ** length_penalty
  state = _map_rows(lambda x: jnp.repeat(x, k, axis=0), state)
  logits = jnp.repeat(logits, k, axis=0)
  beam_limits = jnp.repeat(limits, k)
  neg_inf = jnp.full((batch, k), -jnp.inf)
  alive_lp = neg_inf.at[:, 0].set(0.0)  # the k copies of the prefix expand as one beam
  no_tokens = jnp.full((batch, k, max_new), pad_id, jnp.int32)

  def body(carry):
    t, state, logits, alive_lp, alive, finished, finished_score = carry
    log_probs = jax.nn.log_softmax(_constrain(logits, t, beam_limits, sep_id, banned_ids)).reshape(batch, k, vocab)
    candidate_lp, flat = jax.lax.top_k((alive_lp[:, :, None] + log_probs).reshape(batch, k * vocab), 2 * k)
    origin, token = flat // vocab, flat % vocab
    sequences = jnp.take_along_axis(alive, origin[:, :, None], axis=1).at[:, :, t].set(token)
    ends = token == sep_id  # at most one per beam, so k of the 2k candidates live on
    pool_score = jnp.concatenate([finished_score, jnp.where(ends, candidate_lp / penalty(t + 1.0), -jnp.inf)], 1)
    finished_score, best = jax.lax.top_k(pool_score, k)
    finished = jnp.take_along_axis(jnp.concatenate([finished, sequences], 1), best[:, :, None], axis=1)
    alive_lp, live = jax.lax.top_k(jnp.where(ends, -jnp.inf, candidate_lp), k)
    alive = jnp.take_along_axis(sequences, live[:, :, None], axis=1)
    rows = (jnp.arange(batch)[:, None] * k + jnp.take_along_axis(origin, live, axis=1)).reshape(-1)
    state = _map_rows(lambda x: x[rows], state)
    logits, state = step(state, jnp.take_along_axis(token, live, axis=1).reshape(-1), t)
    return t + 1, state, logits, alive_lp, alive, finished, finished_score

  def keep_going(carry):
    t, _, _, alive_lp, _, _, finished_score = carry
    best_possible = alive_lp.max(1) / jnp.maximum(penalty(t + 1.0), penalty(limits.astype(jnp.float32)))
    done = (finished_score.min(1) >= best_possible) | (t >= limits)
    return (t < max_new) & ~jnp.all(done)

  init = (jnp.int32(0), state, logits, alive_lp, no_tokens, no_tokens, neg_inf)
  return jax.lax.while_loop(keep_going, body, init)[5][:, 0]


@functools.partial(
  jax.jit, static_argnames=("model", "max_new", "sep_id", "banned_ids", "beam_size", "length_penalty", "use_cache")
)
def generate(
  model: MaskedLM,
  params,
  prefix,
  limits,
  *,
  max_new: int,
  sep_id: int,
  banned_ids: tuple[int, ...],
  beam_size: int = 1,
  length_penalty: float = 0.6,
  use_cache: bool = True,
):
  """Target tokens [batch, max_new] for a left-padded prefix block [batch, P]; beam_size 1 is greedy.

  Each row has at least one token before [SEP], ends with [SEP] (forced as its limits[row]-th token) and is
  padded after it.
  """
  prefix_length = prefix.shape[1]
  logits, state = encode_prefix(model, params, prefix, max_new, use_cache=use_cache)
  step = lambda state, token, t: decode_step(model, params, state, token, prefix_length + t, prefix_length)
  kwargs = dict(max_new=max_new, sep_id=sep_id, pad_id=model.config.pad_token_id, banned_ids=banned_ids)
  if beam_size == 1:
    return _greedy(step, logits, state, limits, **kwargs)
  return _beam_search(step, logits, state, limits, beam_size=beam_size, length_penalty=length_penalty, **kwargs)


def _round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def translate(
  model: MaskedLM,
  params,
  tokenizer,
  sources: Sequence[np.ndarray],
  *,
  max_length: int = 512,
  max_ratio: float = 2.0,
  max_extra: int = 32,
  batch_size: int = 32,
  beam_size: int = 1,
  length_penalty: float = 0.6,
  use_cache: bool = True,
) -> list[np.ndarray]:
  """Target token ids (without [SEP]) for each source (token ids without specials).

  A source of n tokens gets at most ceil(max_ratio · n) + max_extra target tokens, and
  [CLS] source [SEP] target [SEP] stays within max_length. Sources are batched by length;
  prefix and target lengths are rounded up to multiples of 32, so few shapes compile.
  """
  too_long = [i for i, s in enumerate(sources) if len(s) + 3 > max_length]
  if too_long:
    raise ValueError(f"sources {too_long[:5]} leave no room for a target within {max_length} tokens")
  banned = tuple(sorted({tokenizer.pad_id, tokenizer.cls_id, tokenizer.mask_id, tokenizer.unk_id}))
  out = [None] * len(sources)
  order = np.argsort([len(s) for s in sources], kind="stable")
  for begin in range(0, len(order), batch_size):
    indices = order[begin : begin + batch_size]
    rows = [np.concatenate([[tokenizer.cls_id], sources[i], [tokenizer.sep_id]]) for i in indices]
    limits = [min(math.ceil(max_ratio * (len(r) - 2)) + max_extra, max_length - len(r)) for r in rows]
    prefix_length = _round_up(max(map(len, rows)), 32)
    max_new = _round_up(max(limits), 32)
    prefix = np.full((batch_size, prefix_length), tokenizer.pad_id, np.int32)
    prefix[:, -2:] = [tokenizer.cls_id, tokenizer.sep_id]  # filler rows: an empty source, limit 1
    for row, ids in enumerate(rows):
      prefix[row, prefix_length - len(ids) :] = ids
    limits = np.array(limits + [1] * (batch_size - len(rows)), np.int32)
    tokens = np.asarray(
      generate(
        model,
        params,
        jnp.asarray(prefix),
        jnp.asarray(limits),
        max_new=max_new,
        sep_id=tokenizer.sep_id,
        banned_ids=banned,
        beam_size=beam_size,
        length_penalty=length_penalty,
        use_cache=use_cache,
      )
    )
    for row, i in enumerate(indices):
      ends = np.flatnonzero(tokens[row] == tokenizer.sep_id)
      out[i] = tokens[row, : ends[0] if len(ends) else max_new]
  return out

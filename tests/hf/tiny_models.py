"""Random tiny transformers models, built from configs (no downloads), for parity tests."""

import numpy as np
import torch
import transformers

TINY = dict(
  vocab_size=97,
  hidden_size=32,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=48,
  max_position_embeddings=64,
  hidden_dropout_prob=0.0,
  attention_probs_dropout_prob=0.0,
)

# The layouts the Foundation issue names, each a DebertaV2Config.
DEBERTA_LAYOUTS = {
  # bozhou/DeBERTa-base: buckets 128 (scaled down to 16 here with max 64 positions).
  "bozhou": dict(
    relative_attention=True,
    position_buckets=16,
    max_relative_positions=-1,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    pos_att_type="p2c|c2p",
    position_biased_input=False,
    type_vocab_size=0,
    layer_norm_eps=1e-7,
  ),
  "v3": dict(
    relative_attention=True,
    position_buckets=32,
    max_relative_positions=-1,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    pos_att_type=["p2c", "c2p"],
    position_biased_input=False,
    type_vocab_size=0,
    layer_norm_eps=1e-7,
  ),
  "separate_keys": dict(
    relative_attention=True,
    position_buckets=0,
    max_relative_positions=24,
    share_att_key=False,
    norm_rel_ebd="none",
    pos_att_type="c2p|p2c",
    position_biased_input=True,
    type_vocab_size=2,
    layer_norm_eps=1e-7,
  ),
  "embed_proj": dict(
    relative_attention=True,
    position_buckets=16,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    pos_att_type="p2c|c2p",
    position_biased_input=False,
    type_vocab_size=0,
    embedding_size=24,
    layer_norm_eps=1e-7,
  ),
  "c2p_only": dict(
    relative_attention=True,
    position_buckets=16,
    share_att_key=False,
    pos_att_type=["c2p"],
    position_biased_input=True,
    type_vocab_size=0,
  ),
  "absolute_only": dict(relative_attention=False, pos_att_type=None, position_biased_input=True, type_vocab_size=2),
}


def deberta(layout: str, *, legacy: bool = True, seed: int = 0):
  torch.manual_seed(seed)
  config = transformers.DebertaV2Config(**TINY, **DEBERTA_LAYOUTS[layout], legacy=legacy)
  return _randomize(transformers.DebertaV2ForMaskedLM(config).eval(), seed)


def bert(seed: int = 0):
  torch.manual_seed(seed)
  config = transformers.BertConfig(**TINY, type_vocab_size=2)
  return _randomize(transformers.BertForMaskedLM(config).eval(), seed)


def roberta(seed: int = 0):
  torch.manual_seed(seed)
  config = transformers.RobertaConfig(
    **{**TINY, "max_position_embeddings": 66}, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5
  )
  return _randomize(transformers.RobertaForMaskedLM(config).eval(), seed)


def electra(seed: int = 0, embedding_size: int = 24):
  """A random ElectraForMaskedLM (a generator), its embeddings projected to hidden_size."""
  torch.manual_seed(seed)
  config = transformers.ElectraConfig(**TINY, embedding_size=embedding_size, type_vocab_size=2)
  return _randomize(transformers.ElectraForMaskedLM(config).eval(), seed)


def electra_discriminator(embedding_size: int = 24, seed: int = 0):
  """A random ElectraForPreTraining (a discriminator and its head); embedding_size 32 has no projection."""
  torch.manual_seed(seed)
  config = transformers.ElectraConfig(**TINY, embedding_size=embedding_size, type_vocab_size=2)
  return _randomize(transformers.ElectraForPreTraining(config).eval(), seed)


def _randomize(model, seed):
  """Non-trivial LayerNorm and bias values, so a swapped or dropped tensor shows."""
  gen = torch.Generator().manual_seed(seed + 1)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
        p.add_(0.1 * torch.randn(p.shape, generator=gen))
  return model


def padded_batch(vocab_size: int, lengths=(23, 64, 9), pad_id: int = 0, seed: int = 0):
  """input_ids with ids avoiding pad, right-padded to the longest, and the 2-D mask."""
  rng = np.random.default_rng(seed)
  length = max(lengths)
  ids = np.full((len(lengths), length), pad_id, np.int64)
  mask = np.zeros((len(lengths), length), np.int64)
  for row, n in enumerate(lengths):
    choices = np.setdiff1d(np.arange(vocab_size), [pad_id])
    ids[row, :n] = rng.choice(choices, n)
    mask[row, :n] = 1
  return ids, mask


def torch_outputs(model, ids, mask, token_type_ids=None):
  with torch.no_grad():
    kwargs = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), output_hidden_states=True)
    if token_type_ids is not None:
      kwargs["token_type_ids"] = torch.tensor(token_type_ids)
    out = model(**kwargs)
  return out.hidden_states[-1].numpy(), out.logits.numpy()

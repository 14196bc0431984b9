"""Pretraining continued from a checkpoint (wyjax.train.continuing).

The init is read on the host in one pass; the loss at step 0 is the checkpoint's in transformers; a
transplanted vocabulary starts far below random weights; a frozen first stage leaves the encoder bit
for bit; the result exports as the checkpoint's family and reproduces it when nothing was learned.
"""

import functools
import json
import pathlib
import signal
import subprocess
import sys

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from tests import checkpoint_files
from tests.hf import tiny_models
from tests.train import pretrain_config
from tests.train.conftest import REPO_ROOT, losses, pretrain_command, pretrain_env, run_pretrain
from tests.train.pretrain_test import _wait_until
from wyjax.core import checkpoints
from wyjax.data import prepare, vocab_map
from wyjax.data import tokenizer as tk
from wyjax.models import EncoderConfig, stack_layers, unstack_layers
from wyjax.train import continuing, mlm, pretraining, pretraining_config, pretraining_steps, program

FAMILIES = ("bert", "roberta", "deberta")


def _hf_model(family: str):
  return tiny_models.deberta("bozhou") if family == "deberta" else getattr(tiny_models, family)()


@pytest.fixture(scope="module")
def hf_folders(tiny_corpus, tmp_path_factory) -> dict[str, pathlib.Path]:
  """A random tiny transformers *ForMaskedLM of each family saved with a vocab.txt of the
  corpus's most frequent characters (RoBERTa's with [PAD] at its pad id, 1)."""
  corpus_vocab = tk.Tokenizer.load(tiny_corpus / "tokenizer").vocab
  folders = {}
  for family in FAMILIES:
    model = _hf_model(family)
    vocab = corpus_vocab[: model.config.vocab_size]
    if model.config.pad_token_id == 1:
      vocab[0], vocab[1] = vocab[1], vocab[0]
    folders[family] = tmp_path_factory.mktemp(family)
    model.save_pretrained(folders[family])
    tk.Tokenizer(vocab).save(folders[family])
  return folders


@pytest.mark.parametrize("vocabulary", ("own", "transplanted"))
@pytest.mark.parametrize("family", FAMILIES)
def test_the_loss_at_step_zero_is_the_checkpoints_in_transformers(family, vocabulary, hf_folders):
  """The run's own evaluation step on params as the run starts them, against the *ForMaskedLM's
  loss on the same masked batch, scored positions and attention mask. Transplanted: the same
  tokens in another order, [PAD] first (RoBERTa's positions then move with its pad id), fed to
  transformers as the checkpoint's ids."""
  folder = str(hf_folders[family])
  config = pretrain_config.get_config()
  config.init = folder
  checkpoint_vocab = tk.Tokenizer.load(folder).vocab
  vocab = (
    checkpoint_vocab
    if vocabulary == "own"
    else list(tk.SPECIAL_TOKENS) + sorted(set(checkpoint_vocab) - set(tk.SPECIAL_TOKENS), reverse=True)
  )
  tokenizer = tk.Tokenizer(vocab)
  run = pretraining.build(config, tokenizer, 64, architecture=continuing.architecture(folder, config))
  params, rows = continuing.initial_params(folder, run.model_config, tokenizer.vocab, config.seed)
  assert rows.endswith(f"{len(vocab)} rows copied, 0 mapped by OpenCC (simplified/traditional), 0 new"), rows
  ids, attention = tiny_models.padded_batch(len(vocab), lengths=(64, 40, 17), pad_id=tokenizer.pad_id)
  ids[:, 0] = tokenizer.cls_id
  state = run.program.place(run.objective.from_checkpoint(params, run.program))
  sums = jax.device_get(run.eval_step(state["params"], ids.astype(np.int32), 0))

  key = jax.random.fold_in(jax.random.key(config.seed + 1), 0)  # the evaluation's masks, drawn as the step draws them
  inputs, targets, weights = map(np.asarray, mlm.mask_tokens(key, ids, **pretraining_steps.masking(config, tokenizer)))
  scored = (weights > 0) & (np.cumsum(weights, -1) <= mlm.max_predictions(64, config.masking.rate))
  old_id = np.array([checkpoint_vocab.index(token) for token in vocab])
  with torch.no_grad():
    theirs = _hf_model(family)(
      input_ids=torch.tensor(old_id[inputs]),
      attention_mask=torch.tensor(attention),
      labels=torch.tensor(np.where(scored, old_id[targets], -100)),
    ).loss.item()
  assert sums["weight"] == scored.sum() > 10
  np.testing.assert_allclose(sums["loss_sum"] / sums["weight"], theirs, rtol=1e-4)


def _layer(encoder: dict, i: int) -> dict:
  """Layer i's params, of per-layer or stacked (scan_layers) encoder params."""
  return jax.tree_util.tree_map(lambda x: x[i], encoder["layers"]) if "layers" in encoder else encoder[f"layer_{i}"]


@pytest.mark.parametrize("scan_layers", (False, True))
def test_the_init_is_read_converted_and_stacked_on_the_host_in_one_pass(scan_layers, tmp_path):
  """The run's params at step 0, read from a transformers folder, then from a wyjax workdir in the
  other layout, with no device transfer (the guard refuses one; an inference model puts every param
  on the device): each is the tensor saved, laid out by hand here from the PyTorch state dict, as
  numpy, stacked where the run scans."""
  hf_model, folder, workdir = tiny_models.bert(), tmp_path / "hf", tmp_path / "workdir"
  hf_model.save_pretrained(folder)
  tokenizer = tk.placeholder(hf_model.config.vocab_size)
  tokenizer.save(folder)
  model_config = EncoderConfig(
    **{
      **continuing.architecture(str(folder), pretrain_config.get_config()),
      "pad_token_id": tokenizer.pad_id,
      "scan_layers": scan_layers,
    }
  )
  theirs = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  layer = lambda i, name: theirs[f"bert.encoder.layer.{i}.{name}"]
  expected_layers = [
    {
      ("attention", "query", "kernel"): layer(i, "attention.self.query.weight").T.reshape(32, 4, 8),
      ("attention", "value", "bias"): layer(i, "attention.self.value.bias").reshape(4, 8),
      ("attention", "out", "kernel"): layer(i, "attention.output.dense.weight").T.reshape(4, 8, 32),
      ("attention_norm", "scale"): layer(i, "attention.output.LayerNorm.weight"),
      ("mlp", "wi", "kernel"): layer(i, "intermediate.dense.weight").T,
      ("mlp_norm", "bias"): layer(i, "output.LayerNorm.bias"),
    }
    for i in range(2)
  ]
  expected = {
    ("encoder", "embeddings", "word_embeddings", "embedding"): theirs["bert.embeddings.word_embeddings.weight"],
    ("encoder", "embeddings", "position_embeddings", "embedding"): theirs["bert.embeddings.position_embeddings.weight"],
    ("mlm_head", "dense", "kernel"): theirs["cls.predictions.transform.dense.weight"].T,
    ("mlm_head", "bias"): theirs["cls.predictions.bias"],
  }
  for init in (folder, workdir):
    with jax.transfer_guard("disallow_explicit"):
      params, rows = continuing.initial_params(str(init), model_config, tokenizer.vocab, seed=0)
    assert rows.endswith("97 rows copied, 0 mapped by OpenCC (simplified/traditional), 0 new"), rows
    assert all(type(leaf) is np.ndarray for leaf in jax.tree_util.tree_leaves(params))
    assert ("layers" in params["encoder"]) == scan_layers and ("layer_0" in params["encoder"]) != scan_layers
    for path, value in expected.items():
      np.testing.assert_array_equal(functools.reduce(dict.get, path, params), value, err_msg=str(path))
    for i, layer in enumerate(expected_layers):
      for path, value in layer.items():
        np.testing.assert_array_equal(
          functools.reduce(dict.get, path, _layer(params["encoder"], i)), value, err_msg=f"layer {i} {path}"
        )
    if init == folder:  # next, these params as the workdir of a run in the other layout
      other = unstack_layers(params["encoder"]) if scan_layers else stack_layers(params["encoder"])
      other_config = model_config.replace(scan_layers=not scan_layers)
      checkpoint_files.save_params(workdir, 1, {**params, "encoder": other}, other_config, tokenizer)


def test_a_typed_model_field_that_contradicts_the_checkpoint_is_refused(hf_folders):
  """The config file's model (the test config's, a DeBERTa of hidden size 32) is not read; a typed
  field is checked against the checkpoint's, but for the dropout, which the run chooses."""
  folder = str(hf_folders["bert"])
  config = pretrain_config.get_config()
  config.model.hidden_size, config.model.hidden_dropout_prob = 64, 0.3
  with pytest.raises(
    Exception,
    match=r"^--config.model.hidden_size=64 contradicts --config.init .*whose hidden_size "
    r"is 32: the architecture is the checkpoint's; drop the flag$",
  ):
    continuing.architecture(folder, config, ("model.hidden_size",))
  config.model.hidden_size = 32
  same = continuing.architecture(folder, config, ("model.hidden_size", "model.hidden_dropout_prob"))
  assert same["hidden_size"] == 32 and same["hidden_dropout_prob"] == 0.3 and same["model_type"] == "bert"
  assert continuing.architecture(folder, config)["hidden_dropout_prob"] == 0.0  # the checkpoint's, untyped


def test_a_continued_roberta_exports_as_roberta_and_reproduces_its_checkpoint(
  hf_folders, shared_data, tmp_path, caplog
):
  """Its own vocabulary (prepare-corpus --vocab), learning rate 0: after two steps the export is a
  RobertaForMaskedLM whose logits are the checkpoint's, with the same tokenizer."""
  folder = hf_folders["roberta"]
  corpus, extended = tmp_path / "corpus", tmp_path / "extended"
  said = []
  for out, extend in ((corpus, False), (extended, True)):
    prepare.prepare_corpus(
      out,
      prepare.Options(
        source=f"daizhige:{shared_data / 'daizhige_sample'}",
        sequence_length=64,
        valid_fraction=0.2,
        extend_vocab=extend,
      ),
      vocab_dir=folder,
      workers=1,
      progress=False,
      log=said.append,
    )
  warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "[UNK]" in r.getMessage()]
  assert len(warned) == 1 and float(warned[0].split()[3].rstrip("%")) > 20, warned  # its 92 characters of thousands
  assert warned[0].endswith("[UNK]; --extend_vocab appends what it lacks"), warned
  stated = [line for line in said if "[UNK]" in line]  # the extended vocabulary's share, stated
  assert len(stated) == 1 and stated[0].startswith("the vocabulary leaves 0.00% of the text's "), stated
  checkpoint_vocab, extended_vocab = (tk.Tokenizer.load(p).vocab for p in (folder, extended / "tokenizer"))
  assert extended_vocab[:97] == checkpoint_vocab and len(extended_vocab) > 1000  # old ids in place, new ones after
  assert vocab_map.kind(checkpoint_vocab, extended_vocab).startswith("the checkpoint's extended by")
  workdir, out = tmp_path / "run", tmp_path / "hf"
  result = run_pretrain(
    workdir, corpus, f"--config.init={folder}", "--config.learning_rate=0", "--config.num_train_steps=2"
  )
  assert "vocabulary the checkpoint's own, 97 tokens" in result.stdout, result.stdout
  export = subprocess.run(
    [sys.executable, "-m", "wyjax.export", f"--workdir={workdir}", f"--out={out}"],
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert export.returncode == 0, export.stderr[-2000:]
  assert json.loads((out / "config.json").read_text())["architectures"] == ["RobertaForMaskedLM"]
  assert (out / "vocab.txt").read_text() == (folder / "vocab.txt").read_text()
  ids, mask = tiny_models.padded_batch(97, pad_id=1)
  with torch.no_grad():
    before = transformers.AutoModelForMaskedLM.from_pretrained(folder)(
      input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)
    ).logits
    after = transformers.AutoModelForMaskedLM.from_pretrained(out)(
      input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)
    ).logits
  assert isinstance(transformers.AutoModelForMaskedLM.from_pretrained(out), transformers.RobertaForMaskedLM)
  np.testing.assert_allclose(after.numpy()[mask == 1], before.numpy()[mask == 1], atol=1e-5, rtol=0)


def _valid_loss_at_step_zero(workdir) -> float:
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  return next(r["valid_loss"] for r in records if r["step"] == 0 and "valid_loss" in r)


def test_a_transplant_starts_far_below_random_weights_and_its_frozen_stage_keeps_the_encoder(
  shared_data, tiny_corpus, tmp_path
):
  """A tiny model pretrained on the Daizhige sample converted to simplified characters, continued
  on the same books with their traditional characters kept (another vocabulary: rows copied where a
  character is in both, mapped through OpenCC where only its simplified form was seen): its
  validation loss at step 0 is far below random weights'; after its 2 frozen steps the encoder is
  the checkpoint's bit for bit, the embeddings are not; and a run stopped just after the boundary
  resumes exactly."""
  checkpoint, traditional = tmp_path / "modern", tmp_path / "traditional"
  run_pretrain(
    checkpoint,
    tiny_corpus,
    "--config.num_train_steps=40",
    "--config.learning_rate=3e-3",
    "--config.checkpoint_every=40",
  )
  prepare.prepare_corpus(
    traditional,
    prepare.Options(
      source=f"daizhige:{shared_data / 'daizhige_sample'}", sequence_length=64, valid_fraction=0.2, t2s=False
    ),
    workers=1,
    progress=False,
    log=lambda *_: None,
  )
  continued = (
    "--config.num_train_steps=8",
    f"--config.init={checkpoint}",
    "--config.freeze_encoder_steps=2",
    "--config.keep_checkpoints=5",
  )
  straight = run_pretrain(tmp_path / "straight", traditional, *continued)
  random = run_pretrain(tmp_path / "random", traditional, "--config.num_train_steps=0")

  old, new = (tk.Tokenizer.load(path / "tokenizer").vocab for path in (checkpoint, traditional))
  copied = len(set(old) & set(new))
  sources = vocab_map.row_sources(old, new)
  assert sources.copied == copied and sources.mapped > 20 and sources.copied + sources.mapped + sources.new == len(new)
  assert f"continuing {checkpoint}: vocabulary the corpus's own (transplanted), {len(new):,} tokens" in straight.stdout
  assert sources.describe() in straight.stdout
  assert "continuing" not in random.stdout
  assert _valid_loss_at_step_zero(tmp_path / "straight") < _valid_loss_at_step_zero(tmp_path / "random") - 1.0

  _, start = checkpoints.restore_model(checkpoint)
  _, frozen = checkpoints.restore_model(tmp_path / "straight" / "checkpoints" / "2")
  for name in ("layer_0", "layer_1", "rel_embeddings", "rel_norm"):
    jax.tree_util.tree_map(np.testing.assert_array_equal, frozen["encoder"][name], start["encoder"][name])
  assert not np.array_equal(
    frozen["encoder"]["embeddings"]["norm"]["scale"], start["encoder"]["embeddings"]["norm"]["scale"]
  )
  _, later = checkpoints.restore_model(tmp_path / "straight" / "checkpoints" / "4")
  assert not np.array_equal(
    later["encoder"]["layer_0"]["mlp"]["wi"]["kernel"], start["encoder"]["layer_0"]["mlp"]["wi"]["kernel"]
  )

  stopped = tmp_path / "stopped"
  process = subprocess.Popen(
    pretrain_command(stopped, traditional, *continued),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  # Stopped as its second step is logged: in the second stage or at its start, with steps left (a tiny step
  # takes milliseconds: waiting for checkpoint 2's files let a loaded machine's run reach its end first).
  _wait_until(lambda: (stopped / "metrics.jsonl").exists() and 2 in losses(stopped), process, "step 2")
  process.send_signal(signal.SIGTERM)
  process.communicate(timeout=120)
  assert process.returncode == 128 + signal.SIGTERM and max(losses(stopped)) < 8
  run_pretrain(stopped, traditional, *continued)
  assert losses(stopped) == losses(tmp_path / "straight")
  rates = {
    r["step"]: r["learning_rate"]
    for r in map(json.loads, (stopped / "metrics.jsonl").read_text().splitlines())
    if "learning_rate" in r
  }  # each step's rate; 2 warm-up steps in each stage, the second starting afresh
  np.testing.assert_allclose([rates[s] for s in (1, 2, 3, 4)], [0, 5e-4, 0, 5e-4], rtol=1e-6)

  (checkpoint / "model.json").write_text((checkpoint / "model.json").read_text() + "\n")  # another init, by content
  refused = subprocess.run(
    pretrain_command(stopped, traditional, *continued),
    env=pretrain_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
  )
  assert refused.returncode == 1 and "init: model.json changed" in refused.stderr, refused.stderr[-2000:]


def test_the_frozen_stage_clips_by_the_norm_of_what_learns():
  """In the frozen first steps the gradient norm (the clip's, the guard's, the logged one) leaves
  the frozen params' gradients out; from the first step after them it holds all."""
  config = pretraining_config.base_config()
  prog = program.build(
    lambda rng: flax.linen.Dense(2).init(rng, jnp.zeros((1, 3)))["params"],
    config,
    warmup_steps=0,
    total_steps=4,
    frozen_steps=1,
    trainable=lambda path: path == ("bias",),
  )
  grads = {"kernel": jnp.full((3, 2), 2.0), "bias": jnp.full((2,), 1.0)}
  step = jax.jit(lambda state: prog.apply_gradients(state, grads, jnp.float32(0.0)))
  state, frozen = step(prog.init_state(jax.random.key(0)))
  _, thawed = step(state)
  assert float(frozen["grad_norm"]) == pytest.approx(np.sqrt(2.0))
  assert float(thawed["grad_norm"]) == pytest.approx(np.sqrt(2.0 + 6 * 4.0))

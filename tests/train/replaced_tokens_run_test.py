"""Replaced-token detection pretraining end to end: a tiny run stopped and resumed to the same rows, its
exports loaded by transformers, and a run continued from an ELECTRA folder."""

import numpy as np
import pytest
import torch
import transformers

from tests.hf import tiny_models
from tests.train.stop_anywhere_test import Stop, _pretraining_config, _rows, _stopped_runs, _train_loss_write, tlc
from wyjax import export
from wyjax.core import checkpoints, guards
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.hf import export_folder, loading
from wyjax.train import pretraining, probes

REL_TOL = 1e-4  # issue 83's parity target
__all__ = ["tlc"]  # the fixture, shared with stop_anywhere_test


def _relative_error(theirs, ours, mask) -> float:
  real = mask.astype(bool)
  return float(np.abs(theirs[real] - ours[real]).max() / np.abs(theirs[real]).max())


def _outputs(model, ids, mask):
  with torch.no_grad():
    return model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))


def test_a_stopped_rtd_run_resumes_to_the_same_rows_and_exports_as_transformers_loads_it(tiny_corpus, tlc, tmp_path):
  """GDES, two micro-batches a step and a probe: stopped after a step, in a probe and in a save, the run
  resumes to the uninterrupted run's rows; the discriminator exports as DebertaV2Model, the generator as
  DebertaV2ForMaskedLM, each equal to wyjax's outputs."""
  config = _pretraining_config(tiny_corpus, tlc)
  config.objective, config.grad_accum_steps = "rtd", 2
  run = lambda workdir: lambda: pretraining.train_and_evaluate(config, workdir)
  run(tmp_path / "straight")()
  expected = _rows(tmp_path / "straight")
  train_rows = [r for r in expected if "loss" in r]
  assert {"generator_loss", "discriminator_precision", "discriminator_recall", "replaced_fraction"} <= set(
    train_rows[0]
  )
  assert all(0 < r["replaced_fraction"] <= 1 and np.isfinite(r["loss"]) for r in train_rows)
  evaluations = [r for r in expected if "valid_loss" in r]
  assert [r["step"] for r in evaluations] == [0, 2, 4] and "probe/tlc/accuracy" in evaluations[0]
  stops = [
    Stop("after train step 1", pretraining.run_metrics.MetricWriter, "write", 1, _train_loss_write(1), after=True),
    Stop("in step 2's probe", probes, "_store", 1),
    Stop("in step 3's checkpoint save", checkpoints.Writer, "save", 1, lambda self, step, *a, **k: step == 3),
  ]
  interrupted = _stopped_runs(run(tmp_path / "stopped"), stops)
  assert [e.step for _, e in interrupted] == [1, 2, 4]  # (a signal in a save is acted on at the next step)
  assert _rows(tmp_path / "stopped") == expected

  ids, mask = tiny_models.padded_batch(64, lengths=(23, 40, 9))
  for generator, hf_class, output in (
    (False, transformers.AutoModel, "last_hidden_state"),
    (True, transformers.AutoModelForMaskedLM, "logits"),
  ):
    model = loading.load(tmp_path / "straight", generator=generator)
    training, _ = export_folder.run_info(tmp_path / "straight")  # the card's training section
    out = export_folder.export(model, tmp_path / f"hf_generator_{generator}", training=training)
    hf_model = hf_class.from_pretrained(out).eval()
    ours = model.mlm_logits(ids, mask) if generator else model.encode(ids, mask)
    assert type(hf_model).__name__ == ("DebertaV2ForMaskedLM" if generator else "DebertaV2Model")
    assert model.config.num_hidden_layers == (1 if generator else 2)
    assert _relative_error(getattr(_outputs(hf_model, ids, mask), output).numpy(), ours, mask) <= REL_TOL
    diff, compared = export.verify(model, out)  # --verify's check, on its own batch
    assert diff < 1e-4 and compared == ("logit" if generator else "hidden state")
  card = (tmp_path / "hf_generator_False" / "README.md").read_text(encoding="utf-8")
  assert "pipeline_tag: feature-extraction" in card and "model = AutoModel.from_pretrained" in card
  assert "replaced-token detection, ELECTRA's and DeBERTa-v3's objective: gdes embedding sharing" in card
  with pytest.raises(guards.RunError, match="holds no generator"):
    loading.load(tmp_path / "hf_generator_False", generator=True)


def test_a_run_continued_from_an_electra_folder_at_learning_rate_0_exports_its_discriminator(tiny_corpus, tmp_path):
  """An ELECTRA discriminator (embeddings projected 24 → 32) with the corpus's vocabulary continued by RTD at
  learning rate 0: the export is an ElectraForPreTraining whose logits are the folder's own."""
  vocab = tokenizer_lib.Tokenizer.load(tiny_corpus / "tokenizer").vocab
  electra = tiny_models.electra_discriminator(24)
  electra.resize_token_embeddings(len(vocab))
  folder = tmp_path / "electra"
  electra.save_pretrained(folder)
  (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
  config = _pretraining_config(tiny_corpus, None)
  config.objective, config.init, config.learning_rate, config.num_train_steps = "rtd", str(folder), 0.0, 2
  pretraining.train_and_evaluate(config, tmp_path / "run")
  out = export_folder.export(loading.load(tmp_path / "run"), tmp_path / "export")
  exported = transformers.AutoModelForPreTraining.from_pretrained(out).eval()
  assert type(exported).__name__ == "ElectraForPreTraining"
  ids, mask = tiny_models.padded_batch(len(vocab), lengths=(23, 40, 9))
  theirs = _outputs(electra, ids, mask).logits.numpy()
  assert _relative_error(theirs, _outputs(exported, ids, mask).logits.numpy(), mask) <= REL_TOL

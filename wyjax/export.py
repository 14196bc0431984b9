"""Export a wyjax checkpoint (or re-export a transformers folder) as a transformers folder.

    python -m wyjax.export --checkpoint=WORKDIR --out=HF_DIR [--verify] [--push_to_hub=ORG/NAME]
    python -m wyjax.export --checkpoint=FINETUNING_RUN --out=HF_DIR --verify
    python -m wyjax.export --random_init=pretrain/deberta_base.py --out=HF_DIR --verify

A pretraining workdir (or a transformers folder) becomes transformers' *ForMaskedLM; a replaced-token
detection run's (--config.objective=rtd) its discriminator, as deberta-v3-base is: a DeBERTa-v2 one
DebertaV2Model (what AutoModel and the task classes load), a BERT one ElectraForPreTraining (its
discriminator head kept); --part=generator its generator as *ForMaskedLM. Its model
card tells how it was trained (its run_config.json and the step exported) and, from --results
or a leaderboard.json in the checkpoint's folder, its benchmark scores as a Hub model-index.

A fine-tuning run (its workdir: the best seed; or one seed_<k> folder; or a folder exported
from one) becomes the transformers task model its head computes (*ForSequenceClassification,
*ForTokenClassification, *ForMultipleChoice, *ForQuestionAnswering; WYWMT's prefix LM:
*ForMaskedLM), with the task's labels and wyjax's wyjax_task / wyjax_max_length in config.json
(wyjax.hf.task_models.load reads it back) and a card with the seed's dev and test scores. A
head transformers has no class for (XuCi's, CCPM's pair and match heads) is refused with the
reason, before anything is written.

--verify reloads the folder with transformers (PyTorch) and compares its logits (a base model's
hidden states) with wyjax's on a padded batch. --push_to_hub reads HF_TOKEN (and HF_ENDPOINT) from
the environment. Every path may be a bucket (gs://…): the export is then fetched to a temporary folder for --verify
and --push_to_hub. A non-empty --out is refused unless --overwrite, and without it no file is
replaced, not even one that appeared meanwhile; an --out that is the folder read, or lies inside
it, is always refused.
"""

import logging
import tempfile

import jax
import numpy as np
from absl import app, flags
from etils import epath

from wyjax.core import cli, config_files, guards, io_paths, locks, logs, storage
from wyjax.data import tokenizer as tokenizer_lib
from wyjax.hf import card, export_folder, hub, loading, task_models
from wyjax.models import EncoderConfig

_CHECKPOINT = flags.DEFINE_string("checkpoint", None, "wyjax workdir (or one step) or transformers folder.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Same as --checkpoint.")
_RANDOM_INIT = config_files.DEFINE_config(
  "random_init", None, "A config (name or file) whose `model` describes a randomly initialised model to export."
)
_OUT = flags.DEFINE_string("out", None, "Output folder.", required=True)
_LEGACY = flags.DEFINE_enum(
  "legacy",
  "auto",
  ["auto", "true", "false"],
  "DeBERTa MLM head layout: cls.predictions (true) or lm_predictions (false).",
)
_NAME = flags.DEFINE_string("name", None, "Model name in the card (default: the Hub repo or folder name).")
_LICENSE = flags.DEFINE_string("license", "apache-2.0", "Licence in the model card.")
_RESULTS = flags.DEFINE_string(
  "results",
  None,
  "leaderboard.json whose scores go into the card (default: the checkpoint folder's leaderboard.json, if any).",
)
_TASK_DATA = flags.DEFINE_string(
  "task_data",
  None,
  "The corpus the --results tasks were derived from, when they are "
  "not the benchmarks' own data (the demo's: chinese-poetry).",
)
_BASE_MODEL = flags.DEFINE_string(
  "base_model", None, "Hub id of the model the run started from (default: the run config's init when it is a Hub id)."
)
_PART = flags.DEFINE_enum(
  "part", "encoder", ["encoder", "generator"], "A replaced-token detection run's part: its encoder or its generator."
)
_VERIFY = flags.DEFINE_bool("verify", False, "Reload with transformers and compare logits.")
_PUSH = flags.DEFINE_string("push_to_hub", None, "Upload to this Hub repo (ORG/NAME).")
_PRIVATE = flags.DEFINE_bool("private", False, "Create the Hub repo as private.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace the exported files in a non-empty --out.")


def random_model(config) -> loading.Model:
  """A random model with a placeholder vocabulary: the first CJK Unified Ideographs."""
  model_config = EncoderConfig(**config.model.to_dict())
  params = loading.init_params(model_config, jax.random.key(config.get("seed", 0)))
  return loading.Model(model_config, params, tokenizer_lib.placeholder(model_config.vocab_size))


def verify(model: loading.Model, folder) -> tuple[float, str]:
  """(max |difference|, what was compared) of wyjax's and transformers' outputs on a padded batch of real tokens.

  The outputs of the folder's architecture: MLM logits, the discriminator's logits ("logit"), or a base
  model's hidden states ("hidden state").
  """
  import torch
  import transformers

  (architecture,) = storage.read_json(epath.Path(folder) / "config.json")["architectures"]
  if architecture.endswith("ForMaskedLM"):
    hf_class, output, ours_of = transformers.AutoModelForMaskedLM, "logits", model.mlm_logits
  elif architecture == card.DISCRIMINATOR:
    hf_class, output, ours_of = transformers.ElectraForPreTraining, "logits", model.rtd_logits
  else:
    hf_class, output, ours_of = transformers.AutoModel, "last_hidden_state", model.encode
  hf_model = hf_class.from_pretrained(str(folder)).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
  batch = tokenizer(["學而時習之，不亦說乎？", "有朋自遠方來"], padding=True, return_tensors="np")
  with torch.no_grad():
    outputs = hf_model(input_ids=torch.tensor(batch["input_ids"]), attention_mask=torch.tensor(batch["attention_mask"]))
  theirs = outputs[output].numpy()
  ours = ours_of(batch["input_ids"], batch["attention_mask"])
  real = batch["attention_mask"].astype(bool)
  compared = "hidden state" if output == "last_hidden_state" else "logit"
  return float(np.abs(theirs[real] - ours[real]).max()), compared


def main(argv):
  del argv
  logs.to_file(None, "export")
  path = _CHECKPOINT.value or _WORKDIR.value
  if (path is None) == (_RANDOM_INIT.value is None):
    raise app.UsageError("give exactly one of --checkpoint (or --workdir) and --random_init")
  task = task_models.task_of(path) if path else None
  if task and (reason := task_models.unexportable(task)):
    raise guards.RunError(reason)
  if _PART.value == "generator" and (path is None or task):
    raise app.UsageError("--part=generator exports a replaced-token detection run's generator: give its --checkpoint")
  if task and (_RESULTS.value or _TASK_DATA.value):
    raise app.UsageError("--results and --task_data are for encoders; a fine-tuned model's card has its run's scores")
  io_paths.check_folder("--out", _OUT.value)
  io_paths.check_apart({"--out": _OUT.value}, {"--checkpoint" if _CHECKPOINT.value else "--workdir": path}, "export")
  with locks.held(_OUT.value, "export"):  # one command writes a folder
    _export(path, task)


def _export(path, task):
  """Exports `path` (None: --random_init) to --out, then verifies and pushes it as asked."""
  export_folder.check_out(_OUT.value, _OVERWRITE.value)  # before the (slow) load
  if _VERIFY.value:
    _check_verify_can_run()
  if _PUSH.value:  # a network, endpoint or token problem ends the command before anything is written
    hub.create_repo(_PUSH.value, private=_PRIVATE.value)
  legacy = None if _LEGACY.value == "auto" else _LEGACY.value == "true"
  name = _NAME.value or _PUSH.value or _OUT.value.rstrip("/").split("/")[-1]
  write, check, described = (_fine_tuned if task else _encoder)(path, legacy, name)
  if _VERIFY.value:
    _verify(write, check)
  out = write(_OUT.value, _OVERWRITE.value)
  print(f"exported {described} to {out}")
  logging.info("wrote %s", out)
  if _PUSH.value:
    _push(out)


def _encoder(path, legacy, name):
  """A pretrained (or random) encoder as *ForMaskedLM: (its writer, its --verify check, what it is).

  The writer takes (out, overwrite) and returns the folder.
  """
  model = random_model(_RANDOM_INIT.value) if path is None else loading.load(path, generator=_PART.value == "generator")
  training, results = (None, None) if path is None else export_folder.run_info(path)
  if _RESULTS.value:
    results = storage.read_json(_RESULTS.value)
  base_model = _BASE_MODEL.value or (storage.hub_id(training["config"].get("init")) if training else None)
  write = lambda out, overwrite: export_folder.export(
    model,
    out,
    legacy=legacy,
    name=name,
    license=_LICENSE.value,
    results=results,
    training=training,
    base_model=base_model,
    task_data=_TASK_DATA.value,
    overwrite=overwrite,
  )
  return (
    write,
    lambda local: verify(model, local),
    f"{model.config.model_type} ({model.config.num_hidden_layers} layers, hidden {model.config.hidden_size})",
  )


def _fine_tuned(path, legacy, name):
  """A fine-tuned run as its transformers task model: (its writer, its --verify check, what it is)."""
  model = task_models.load(path)
  write = lambda out, overwrite: task_models.export(
    model, out, name=name, license=_LICENSE.value, legacy=legacy, base_model=_BASE_MODEL.value, overwrite=overwrite
  )
  return (
    write,
    lambda local: (task_models.verify(model, local), "logit"),
    f"{model.task.name} as {task_models.hf_config(model, legacy)['architectures'][0]} "
    f"({model.model_config.num_hidden_layers} layers, hidden {model.model_config.hidden_size})",
  )


def _check_verify_can_run() -> None:
  """--verify's libraries, before anything is loaded or written."""
  try:
    import torch  # noqa: F401
    import transformers  # noqa: F401
  except ImportError as e:
    raise guards.RunError(
      f"--verify needs PyTorch and transformers ({e}); install them (pip install -c "
      "constraints.txt torch transformers) or leave out --verify"
    ) from None


def _verify(write, check) -> None:
  """Verifies the export in a temporary folder, before --out is written.

  A failed verification leaves --out as it was, and the rerun needs no --overwrite.
  """
  with tempfile.TemporaryDirectory() as tmp:
    diff, compared = check(write(f"{tmp}/export", False))
  print(f"transformers reload: max |{compared} difference| = {diff:.2e}")
  if diff > 1e-4:
    raise guards.RunError(
      f"verification failed: {compared}s differ by {diff:.2e} (> 1e-4); nothing written to {_OUT.value}"
    )


def _push(out) -> None:
  with tempfile.TemporaryDirectory() as tmp:
    local = out if storage.is_local(out) else storage.staged(out, export_folder.FILES, tmp)
    commit = hub.push(local, _PUSH.value, private=_PRIVATE.value)
  print(f"pushed to {_PUSH.value}: {commit}")


if __name__ == "__main__":
  cli.run(main)

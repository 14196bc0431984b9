"""The model card (README.md) of an exported pretrained encoder; a fine-tuned task model's is task_card's.

Its front matter and model-index are built with huggingface_hub's ModelCardData / EvalResult (so the Hub
reads back what we meant); its body gives usage in transformers and wyjax, the training and the results.
"""

import json

from huggingface_hub import EvalResult, ModelCardData

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks.registry import TASKS

# Pretraining corpus sources (`corpus.source` before the colon) as dataset names; `text:` files have none.
CORPORA = {"daizhige": "daizhige", "poetry": "chinese-poetry"}
DISCRIMINATOR = "ElectraForPreTraining"  # the architecture of a BERT-family replaced-token detector
# What an exported encoder is, by its architecture (`_kind`): its Hub tag, and its head in the card's first line.
KINDS = {
  "mlm": ("fill-mask", "with its masked-language-model head"),
  "rtd": ("replaced-token-detection", "with its replaced-token-detection head"),
  "encoder": ("feature-extraction", "without a head: the discriminator of replaced-token detection, to fine-tune"),
}


def model_card(
  hf_config: dict,
  tokenizer: Tokenizer,
  *,
  name: str,
  license: str,
  results: dict | None = None,
  training: dict | None = None,
  base_model: str | None = None,
  task_data: str | None = None,
) -> str:
  """README.md: YAML front matter, then what the model is, usage, training and results.

  A leaderboard whose tasks all failed gives no results.
  """
  results = results if results and results.get("tasks") else None
  data = card_data(
    hf_config,
    name=name,
    license=license,
    results=results,
    training=training,
    base_model=base_model,
    task_data=task_data,
  )
  body = _about(hf_config, name, training, base_model) + _usage(hf_config, tokenizer, name)
  if training:
    body += _training(training)
  if results:
    body += _results(results, task_data)
  return f"---\n{data.to_yaml()}\n---\n\n{body}"


def card_data(
  hf_config: dict,
  *,
  name: str,
  license: str,
  results: dict | None,
  training: dict | None,
  base_model: str | None,
  task_data: str | None,
) -> ModelCardData:
  """The front matter; `datasets` names the pretraining corpus and the benchmarks scored."""
  datasets = [corpus_name(training["config"])] if training else []
  if results:
    datasets += [_task(task, task_data)[1] for task in results["tasks"]]
  datasets = list(dict.fromkeys(d for d in datasets if d))
  tag = KINDS[_kind(hf_config)][0]
  return ModelCardData(
    language=["lzh", "zh"],
    license=license,
    library_name="transformers",
    pipeline_tag=None if tag == "replaced-token-detection" else tag,  # no Hub pipeline has that name
    tags=["wyjax", "classical-chinese", "wenyanwen", hf_config["model_type"], tag],
    datasets=datasets or None,
    base_model=base_model or None,
    model_name=name,
    eval_results=eval_results(results, task_data) if results else None,
  )


def _kind(hf_config: dict) -> str:
  """A key of KINDS: "rtd" for ElectraForPreTraining, "encoder" for a base model (DebertaV2Model), else "mlm"."""
  architecture = (hf_config.get("architectures") or [""])[0]
  return "rtd" if architecture == DISCRIMINATOR else "encoder" if architecture.endswith("Model") else "mlm"


def corpus_name(run_config: dict) -> str | None:
  """The pretraining corpus of a run config as a dataset name (None: unknown or a local text file)."""
  source = run_config.get("corpus", {}).get("source", "")
  return CORPORA.get(source.partition(":")[0])


def _corpus(run_config: dict) -> str:
  return corpus_name(run_config) or "a local text corpus"


def _task(task: str, task_data: str | None) -> tuple[str, str, str, str]:
  """(task type, benchmark, dataset name, dataset type) of a leaderboard task, from its Task's Hub fields.

  A task wyjax does not know is type "other". With `task_data` the task was derived from that corpus in
  the benchmark's format (the demo's), and says so.
  """
  known = TASKS.get(task)
  kind = known.hub_task_type if known else "other"
  if task_data:
    return kind, task_data, f"{task.upper()} derived from {task_data}", task_data
  if not known:
    return kind, "", task.upper(), task
  return kind, known.benchmark, *known.hub_dataset


def metrics_of(results: dict, task: str) -> list[tuple[str, float]]:
  """(metric, value) of a task, its main metric first."""
  metrics = results["tasks"][task]
  main = results.get("main_metric", {}).get(task)
  return sorted(((m, float(v)) for m, v in metrics.items()), key=lambda mv: mv[0] != main)


def eval_results(results: dict, task_data: str | None = None) -> list[EvalResult]:
  """One EvalResult per task and metric of a leaderboard.json.

  The dataset config is the task, so that tasks sharing a dataset (CCPM's variants) stay apart.
  """
  evals = []
  for task in results["tasks"]:
    kind, _, dataset, dataset_type = _task(task, task_data)
    evals += [
      EvalResult(
        task_type=kind,
        task_name=task.upper(),
        dataset_name=dataset,
        dataset_type=dataset_type,
        dataset_config=task,
        dataset_split=results.get("split", "dev"),
        metric_type=metric,
        metric_value=value,
      )
      for metric, value in metrics_of(results, task)
    ]
  return evals


def _about(hf_config: dict, name: str, training: dict | None, base_model: str | None) -> str:
  size = (
    f"{hf_config['num_hidden_layers']} layers, hidden {hf_config['hidden_size']}, "
    f"{hf_config['num_attention_heads']} heads, vocabulary {hf_config['vocab_size']}"
  )
  origin = [f"initialised from [{base_model}](https://huggingface.co/{base_model})"] if base_model else []
  if training:
    origin.append(f"pretrained on {_corpus(training['config'])} for {training['step']} steps")
  history = f" It was {', then '.join(origin)}." if origin else ""
  return f"""# {name}

A classical Chinese (文言文) `{hf_config['model_type']}` encoder {KINDS[_kind(hf_config)][1]}
({size}), exported by wyjax (JAX/Flax).{history}
"""


def _usage(hf_config: dict, tokenizer: Tokenizer, name: str) -> str:
  repo = json.dumps(name, ensure_ascii=False)
  text = "学而时[MASK]之，不亦说乎？" if tokenizer.t2s else "學而時[MASK]之，不亦說乎？"
  t2s = (
    "Inputs are expected in simplified characters: wyjax converts traditional text with "
    "OpenCC `t2s` before tokenisation (`wyjax.data.tokenizer.normalize`)."
    if tokenizer.t2s
    else "The tokenizer applies no traditional→simplified conversion."
  )
  kind = _kind(hf_config)
  imports, model_class = "AutoModelForMaskedLM, AutoTokenizer, pipeline", "AutoModelForMaskedLM"
  run = f'fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer)\nprint(fill_mask("{text}"))'
  ours = "logits = model.mlm_logits([ids])  # [1, length, vocabulary]"
  if kind != "mlm":  # a text as it is: no [MASK] to fill
    text = text.replace("[MASK]", "习" if tokenizer.t2s else "習")
    inputs = f'**tokenizer("{text}", return_tensors="pt")'
  if kind == "rtd":
    imports, model_class = "AutoTokenizer, ElectraForPreTraining", DISCRIMINATOR
    run = f"print(model({inputs}).logits)  # > 0: a token looks replaced"
    ours = "logits = model.rtd_logits([ids])  # [1, length]"
  elif kind == "encoder":  # AutoModelForSequenceClassification and the other task classes load it too
    imports, model_class = "AutoModel, AutoTokenizer", "AutoModel"
    run = f"print(model({inputs}).last_hidden_state.shape)  # [1, length, hidden]"
    ours = "hidden = model.encode([ids])  # [1, length, hidden]"
  return f"""
## Usage

In `transformers` (PyTorch), without custom code:

```python
from transformers import {imports}

tokenizer = AutoTokenizer.from_pretrained({repo})
model = {model_class}.from_pretrained({repo})  # {hf_config['architectures'][0]}
{run}
```

In wyjax (JAX), from a local copy of this folder (`huggingface_hub.snapshot_download` fetches one):

```python
import wyjax.hf

model = wyjax.hf.load({repo})
ids = model.tokenizer.encode("{text}").ids
{ours}
```

The tokenizer is a character-level `BertTokenizer`: every Chinese character and punctuation
mark is one token. {t2s} Private-use code points (rare glyphs) map to `[UNK]`.
"""


def _training(training: dict) -> str:
  config = training["config"]
  corpus, planned = config.get("corpus", {}), config.get("num_train_steps")
  facts = {
    "corpus": _corpus(config),
    "steps": f"{training['step']}" + (f" of {planned} planned" if planned and planned != training["step"] else ""),
    "batch size": config.get("batch_size") and f"{config['batch_size']} sequences",
    "sequence length": corpus.get("sequence_length") and f"{corpus['sequence_length']} tokens",
    "peak learning rate": config.get("learning_rate")
    and f"{config['learning_rate']} (AdamW, {config.get('warmup_steps', 0)} warmup steps)",
  }
  config_json = json.dumps(config, indent=2, ensure_ascii=False)
  return f"""
## Training

Pretrained with `python -m wyjax.pretrain` ({_objective(config)}):

{listing(facts, config_json)}"""


def _objective(run_config: dict) -> str:
  """The run's pretraining objective in words."""
  if run_config.get("objective", "mlm") == "mlm":
    return "masked language modelling"
  rtd = run_config["rtd"]
  return (
    f"replaced-token detection, ELECTRA's and DeBERTa-v3's objective: {rtd['embedding_sharing']} embedding "
    f"sharing, discriminator weight {rtd['discriminator_weight']:g}"
  )


def _results(results: dict, task_data: str | None) -> str:
  source = f"tasks derived from {task_data} in the benchmarks' formats" if task_data else "benchmark tasks"
  rows = "".join(
    f"| {task.upper()} | {metric} | {value:.4f} |\n"
    for task in results["tasks"]
    for metric, value in metrics_of(results, task)
  )
  return f"""
## Results

{results.get('split', 'dev').capitalize()} scores of this model fine-tuned on each of the {source}
(`python -m wyjax.benchmark`); the main metric of a task comes first.

| task | metric | value |
|---|---|---|
{rows}"""


def listing(facts: dict, config_json: str) -> str:
  """The Training section's facts (those known) and the run's whole config, folded."""
  listing = "\n".join(f"- {what}: {value}" for what, value in facts.items() if value)
  return (
    f"{listing}\n\n<details>\n<summary>The run's config (run_config.json)</summary>\n\n"
    f"```json\n{config_json}\n```\n\n</details>\n"
  )

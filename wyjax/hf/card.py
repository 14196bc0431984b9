"""The model card (README.md) of an exported folder, a pretrained encoder's or a fine-tuned task model's.

Its front matter and model-index are built with huggingface_hub's ModelCardData / EvalResult (so the Hub
reads back what we meant); its body gives usage in transformers and wyjax, the training and the results.
"""

import json

from huggingface_hub import EvalResult, ModelCardData

from wyjax.data.tokenizer import Tokenizer
from wyjax.tasks.registry import TASKS
from wyjax.tasks.task import Task

# Pretraining corpus sources (`corpus.source` before the colon) as dataset names; `text:` files have none.
CORPORA = {"daizhige": "daizhige", "poetry": "chinese-poetry"}
DISCRIMINATOR = "ElectraForPreTraining"  # the architecture of a replaced-token detector; other exports are *ForMaskedLM


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
  tag = "replaced-token-detection" if DISCRIMINATOR in hf_config.get("architectures", ()) else "fill-mask"
  return ModelCardData(
    language=["lzh", "zh"],
    license=license,
    library_name="transformers",
    pipeline_tag=tag if tag == "fill-mask" else None,
    tags=["wyjax", "classical-chinese", "wenyanwen", hf_config["model_type"], tag],
    datasets=datasets or None,
    base_model=base_model or None,
    model_name=name,
    eval_results=eval_results(results, task_data) if results else None,
  )


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


def _metrics(results: dict, task: str) -> list[tuple[str, float]]:
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
      for metric, value in _metrics(results, task)
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
  head = "replaced-token-detection" if DISCRIMINATOR in hf_config.get("architectures", ()) else "masked-language-model"
  return f"""# {name}

A classical Chinese (文言文) `{hf_config['model_type']}` encoder with its {head} head
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
  imports, model_class, outputs = "AutoModelForMaskedLM, AutoTokenizer, pipeline", "AutoModelForMaskedLM", "mlm"
  run = f'fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer)\nprint(fill_mask("{text}"))'
  if DISCRIMINATOR in hf_config.get("architectures", ()):  # a text as it is: no [MASK] to fill
    text = text.replace("[MASK]", "习" if tokenizer.t2s else "習")
    imports, model_class, outputs = "AutoTokenizer, ElectraForPreTraining", DISCRIMINATOR, "rtd"
    run = f'print(model(**tokenizer("{text}", return_tensors="pt")).logits)  # > 0: a token looks replaced'
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
logits = model.{outputs}_logits([ids])  # {"[1, length, vocabulary]" if outputs == "mlm" else "[1, length]"}
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

Pretrained with `python -m wyjax.pretrain` (masked language modelling):

{_listing(facts, config_json)}"""


def _results(results: dict, task_data: str | None) -> str:
  source = f"tasks derived from {task_data} in the benchmarks' formats" if task_data else "benchmark tasks"
  rows = "".join(
    f"| {task.upper()} | {metric} | {value:.4f} |\n"
    for task in results["tasks"]
    for metric, value in _metrics(results, task)
  )
  return f"""
## Results

{results.get('split', 'dev').capitalize()} scores of this model fine-tuned on each of the {source}
(`python -m wyjax.benchmark`); the main metric of a task comes first.

| task | metric | value |
|---|---|---|
{rows}"""


# --- a fine-tuned task model's card ------------------------------------------------------------------

# Per Hub pipeline_tag: what the model's outputs are, and a snippet that runs it ({repo}: the
# model's name as a string literal; a Python one runs after `simplify` is defined: OpenCC t2s,
# or nothing, as the tokenizer expects).
_PREDICTS = {
  "text-classification": "one of its labels for a text (id2label in config.json)",
  "token-classification": "a label for each character (id2label in config.json)",
  "multiple-choice": "a score for each option of a question; the highest is the answer",
  "question-answering": "the start and end of the answer to a question in a context",
  "translation": "modern Chinese for a classical sentence, generated with wyjax's prefix-LM attention mask",
}
_SNIPPETS = {
  "text-classification": (
    "python",
    """from transformers import pipeline

classify = pipeline("text-classification", model={repo})
print(classify(simplify("學而時習之，不亦說乎？")))""",
  ),
  "token-classification": (
    "python",
    """from transformers import pipeline

tag = pipeline("token-classification", model={repo})
print(tag(simplify("學而時習之不亦說乎")))  # the characters whose label is not O""",
  ),
  # transformers 5 has no question-answering pipeline: the answer is the best span of the context.
  "question-answering": (
    "python",
    """import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained({repo})
model = AutoModelForQuestionAnswering.from_pretrained({repo})
question, context = simplify("何者不亦樂乎？"), simplify("有朋自遠方來，不亦樂乎？")
batch = tokenizer(question, context, return_tensors="pt", return_offsets_mapping=True)
offsets = batch.pop("offset_mapping")[0]
outside = torch.tensor([s != 1 for s in batch.sequence_ids(0)])  # not a context token
with torch.no_grad():
  out = model(**batch)
start = int(out.start_logits[0].masked_fill(outside, -1e9).argmax())
end = start + int(out.end_logits[0, start:].masked_fill(outside[start:], -1e9).argmax())
print(context[offsets[start][0]:offsets[end][1]])""",
  ),
  "multiple-choice": (
    "python",
    """import torch
from transformers import AutoModelForMultipleChoice, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained({repo})
model = AutoModelForMultipleChoice.from_pretrained({repo})
question, options = simplify("學而時習之，不亦說乎？"), [simplify("學習"), simplify("遊戲")]
batch = tokenizer([question] * len(options), options, padding=True, return_tensors="pt")
with torch.no_grad():
  scores = model(**{{k: v[None] for k, v in batch.items()}}).logits[0]  # one per option
print(options[int(scores.argmax())])""",
  ),
  # transformers loads the weights (AutoModelForMaskedLM) but has no prefix-LM mask to generate with.
  "translation": ("sh", "echo 學而時習之 | python -m wyjax.translate --init=FOLDER  # a local copy of it"),
}


def task_model_card(
  hf_config: dict,
  tokenizer: Tokenizer,
  task: Task,
  *,
  pipeline_tag: str,
  name: str,
  license: str,
  max_length: int,
  run: dict | None = None,
  run_config: dict | None = None,
  base_model: str | None = None,
) -> str:
  """README.md of a fine-tuned task model: front matter, what it predicts, usage, training and scores.

  Its model-index holds the run's dev (and test) scores.

  Args:
    run: the seed's run.json ({"seed", "best_step", "dev", "test"}).
    run_config: its fine-tuning run's run_config.json.
  """
  scores = {split: run[split] for split in ("dev", "test") if run and run.get(split)}
  data = ModelCardData(
    language=["lzh", "zh"],
    license=license,
    library_name="transformers",
    pipeline_tag=pipeline_tag,
    tags=["wyjax", "classical-chinese", "wenyanwen", hf_config["model_type"], pipeline_tag],
    datasets=[task.benchmark] if task.benchmark else None,
    base_model=base_model or None,
    model_name=name,
    eval_results=[e for split, metrics in scores.items() for e in eval_results(_board(task, split, metrics))] or None,
  )
  body = _task_about(hf_config, task, name, pipeline_tag, base_model)
  body += _task_usage(tokenizer, name, pipeline_tag, max_length)
  if run_config:
    body += _fine_tuning(task, run_config, run)
  if scores:
    body += _task_results(task, scores)
  return f"---\n{data.to_yaml()}\n---\n\n{body}"


def _board(task: Task, split: str, metrics: dict) -> dict:
  """One split's scores of one task, shaped like a leaderboard.json (eval_results reads them)."""
  return {"split": split, "tasks": {task.name: metrics}, "main_metric": {task.name: task.main_metric}}


def _task_about(hf_config: dict, task: Task, name: str, pipeline_tag: str, base_model: str | None) -> str:
  size = (
    f"{hf_config['num_hidden_layers']} layers, hidden {hf_config['hidden_size']}, vocabulary {hf_config['vocab_size']}"
  )
  origin = f", from [{base_model}](https://huggingface.co/{base_model})" if base_model else ""
  labels = ""
  if "id2label" in hf_config:
    shown = list(hf_config["id2label"].values())
    labels = f"\n\nLabels ({len(shown)}): {', '.join(shown[:20])}{', …' if len(shown) > 20 else ''}."
  benchmark = f" ({task.benchmark})" if task.benchmark else ""
  return f"""# {name}

A classical Chinese (文言文) `{hf_config['model_type']}` encoder ({size}) fine-tuned on
{task.column}{benchmark} by wyjax (JAX/Flax){origin}, exported as `{hf_config['architectures'][0]}`.
It predicts {_PREDICTS[pipeline_tag]}.{labels}
"""


def _task_usage(tokenizer: Tokenizer, name: str, pipeline_tag: str, max_length: int) -> str:
  language, snippet = _SNIPPETS[pipeline_tag]
  repo = json.dumps(name, ensure_ascii=False)
  snippet = snippet.format(repo=repo)
  if tokenizer.t2s:
    simplify = "from wyjax.data.normalize import to_simplified as simplify  # OpenCC t2s, one character for one"
    t2s = (
      "wyjax converts traditional characters to simplified (OpenCC `t2s`) before tokenising; transformers "
      "does not, so simplify the text first, as above. `to_simplified` keeps the text's length: "
      "per-character labels and answer offsets still index the original text (without wyjax: OpenCC "
      "`t2s` applied character by character)."
    )
  else:
    simplify = "simplify = lambda text: text  # this tokenizer reads the text as it is"
    t2s = "The tokenizer applies no traditional→simplified conversion."
  if language == "python":
    snippet = f"{simplify}\n{snippet}"
  return f"""
## Usage

```{language}
{snippet}
```

{t2s} The tokenizer is a character-level `BertTokenizer`; the model was fine-tuned on inputs of
at most {max_length} tokens.

In wyjax (JAX), from a local copy of this folder (`huggingface_hub.snapshot_download` fetches one):

```python
from wyjax.hf import task_models

model = task_models.load({repo})  # its task, params (the head's layout), tokenizer and max_length
```
"""


def _fine_tuning(task: Task, run_config: dict, run: dict | None) -> str:
  facts = {
    "initialised from": run_config.get("init") or "a fresh, randomly initialised model",
    "training": (
      f"{run_config['num_train_steps']} steps"
      if run_config.get("num_train_steps")
      else f"{run_config.get('num_epochs')} epochs"
    ),
    "batch size": run_config.get("batch_size"),
    "peak learning rate": run_config.get("learning_rate"),
    "max length": run_config.get("max_length") or task.max_length,
    "exported": run
    and (
      f"seed {run['seed']}, its parameters at the end of training (step {run['best_step']})"
      if run_config.get("keep_checkpoint") == "last"
      else f"seed {run['seed']}, its best dev {task.main_metric} at step {run['best_step']}"
    ),
  }
  config_json = json.dumps(run_config, indent=2, ensure_ascii=False)
  return f"""
## Training

Fine-tuned with `python -m wyjax.finetune --config={task.config_name}.py` on {task.column}'s train split:

{_listing(facts, config_json)}"""


def _task_results(task: Task, scores: dict) -> str:
  rows = "".join(
    f"| {split} | {metric} | {value:.4f} |\n"
    for split, metrics in scores.items()
    for metric, value in _metrics(_board(task, split, metrics), task.name)
  )
  return f"""
## Results

Scores of this model on {task.column}'s splits (wyjax's metrics; the main metric first):

| split | metric | value |
|---|---|---|
{rows}"""


def _listing(facts: dict, config_json: str) -> str:
  """The Training section's facts (those known) and the run's whole config, folded."""
  listing = "\n".join(f"- {what}: {value}" for what, value in facts.items() if value)
  return (
    f"{listing}\n\n<details>\n<summary>The run's config (run_config.json)</summary>\n\n"
    f"```json\n{config_json}\n```\n\n</details>\n"
  )

"""The model card (README.md) of an exported fine-tuned task model: its predictions, usage, fine-tuning, results."""

import json

from huggingface_hub import ModelCardData

from wyjax.data.tokenizer import Tokenizer
from wyjax.hf.card import eval_results, listing, metrics_of
from wyjax.tasks.task import Task

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

{listing(facts, config_json)}"""


def _task_results(task: Task, scores: dict) -> str:
  rows = "".join(
    f"| {split} | {metric} | {value:.4f} |\n"
    for split, metrics in scores.items()
    for metric, value in metrics_of(_board(task, split, metrics), task.name)
  )
  return f"""
## Results

Scores of this model on {task.column}'s splits (wyjax's metrics; the main metric first):

| split | metric | value |
|---|---|---|
{rows}"""

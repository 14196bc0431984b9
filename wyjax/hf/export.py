"""Write a transformers folder: config.json, model.safetensors, tokenizer files, model card."""
import json

import yaml
from etils import epath
from safetensors.numpy import save

from wyjax.data.tokenizer import Tokenizer
from wyjax.hf import configs, weights
from wyjax.hf.loading import Model

# Benchmark tasks as Hub model-index task types.
TASK_TYPES = {
    "punc": "token-classification", "glner": "token-classification",
    "gjc": "text-classification", "tlc": "text-classification", "fspc": "text-classification",
    "xuci": "text-classification", "irc": "multiple-choice", "wywrc": "multiple-choice",
    "wywmt": "translation", "ccpm": "multiple-choice", "ccpm_match": "multiple-choice",
    "cclue_ner": "token-classification", "cclue_re": "text-classification", "aceval": "multiple-choice",
}
# (name, type) of the datasets outside WYWEB.
DATASETS = {"ccpm": ("CCPM", "ccpm"), "ccpm_match": ("CCPM", "ccpm"), "cclue_ner": ("C-CLUE NER", "c-clue-ner"),
            "cclue_re": ("C-CLUE relations", "c-clue-re"), "aceval": ("AC-EVAL", "ac-eval")}


# Every file `export` writes (the tokenizer's four included): what a Hub upload sends.
FILES = ("config.json", "model.safetensors", "README.md", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json")


def check_out(out, overwrite: bool) -> epath.Path:
  """`out` (a folder or gs://…) as a Path; FileExistsError when it holds anything and
  `overwrite` is not set."""
  out = epath.Path(out)
  if out.exists() and any(out.iterdir()) and not overwrite:
    raise FileExistsError(f"{out} is not empty ({len(list(out.iterdir()))} entries); choose an empty or new "
                          "folder, or pass --overwrite to replace the exported files in it")
  return out


def export(model: Model, out, *, legacy: bool | None = None, name: str = "wyjax-model",
           license: str = "apache-2.0", results: dict | None = None, overwrite: bool = False) -> epath.Path:
  """Writes `out`; the folder loads with transformers.AutoModelForMaskedLM unchanged.

  results: {"split": "dev", "tasks": {"tlc": {"accuracy": 0.81, ...}, ...}} (a leaderboard.json)
  puts a model-index into the card. A folder that already holds files is refused unless
  `overwrite` (then the exported files replace theirs; other files are left alone).
  """
  out = check_out(out, overwrite)
  if not model.has_mlm:
    raise ValueError("export writes *ForMaskedLM folders; this model has no MLM head")
  if model.tokenizer is None:
    raise ValueError("export needs the model's tokenizer (vocab.txt beside the checkpoint)")
  if len(model.tokenizer) != model.config.vocab_size:
    raise ValueError(f"tokenizer has {len(model.tokenizer)} tokens but the model's vocab_size is "
                     f"{model.config.vocab_size}")
  config = model.config.replace(dtype="float32")
  hf_config = configs.to_hf(config, legacy=legacy)
  if hf_config.get("legacy") is False and config.embed_dim != config.hidden_size:
    raise ValueError("legacy=False needs embedding_size == hidden_size: transformers' "
                     "lm_predictions head maps hidden→hidden before the tied decoder")
  out.mkdir(parents=True, exist_ok=True)
  state_dict = weights.to_hf(model.params, config, legacy=hf_config.get("legacy", True))
  (out / "model.safetensors").write_bytes(save(state_dict, metadata={"format": "pt"}))
  (out / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
  model.tokenizer.save(out)
  (out / "README.md").write_text(model_card(hf_config, model.tokenizer, name=name, license=license,
                                            results=results))
  return out


def model_card(hf_config: dict, tokenizer: Tokenizer, *, name: str, license: str,
               results: dict | None) -> str:
  metadata = {
      "language": ["lzh"],
      "license": license,
      "library_name": "transformers",
      "pipeline_tag": "fill-mask",
      "tags": ["wyjax", "classical-chinese", "wenyanwen", hf_config["model_type"], "fill-mask"],
  }
  if results:
    metadata["model-index"] = [{"name": name, "results": _model_index(results)}]
  front = yaml.safe_dump(metadata, allow_unicode=True, sort_keys=False)
  arch = hf_config["architectures"][0]
  size = (f"{hf_config['num_hidden_layers']} layers, hidden {hf_config['hidden_size']}, "
          f"{hf_config['num_attention_heads']} heads, vocabulary {hf_config['vocab_size']}")
  t2s = ("Inputs are expected in simplified characters: wyjax converts traditional text with "
         "OpenCC `t2s` before tokenisation (`wyjax.data.tokenizer.normalize`)."
         if tokenizer.t2s else "The tokenizer applies no traditional→simplified conversion.")
  body = f"""# {name}

A classical Chinese (文言文) `{hf_config['model_type']}` encoder ({size}), exported by wyjax
(JAX/Flax). It loads in `transformers` without custom code:

```python
from transformers import AutoModelForMaskedLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("{name}")
model = AutoModelForMaskedLM.from_pretrained("{name}")  # {arch}
```

The tokenizer is a character-level `BertTokenizer`: every Chinese character and punctuation
mark is one token. {t2s} Private-use code points (rare glyphs) map to `[UNK]`.
"""
  if results:
    body += "\n## Results\n\n| task | metric | value |\n|---|---|---|\n"
    for task, metrics in results["tasks"].items():
      for metric, value in metrics.items():
        body += f"| {task} | {metric} | {value:.4f} |\n"
  return f"---\n{front}---\n\n{body}"


def _model_index(results: dict) -> list[dict]:
  split = results.get("split", "dev")
  entries = []
  for task, metrics in results["tasks"].items():
    name, kind = DATASETS.get(task, (f"WYWEB {task.upper()}", f"wyweb-{task}"))
    entries.append({
        "task": {"type": TASK_TYPES.get(task, "other"), "name": task.upper()},
        "dataset": {"name": name, "type": kind, "split": split},
        "metrics": [{"type": metric, "value": float(value)} for metric, value in metrics.items()],
    })
  return entries

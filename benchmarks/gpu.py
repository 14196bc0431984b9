"""wyjax on a GPU beside transformers on the same GPU: one command, one markdown table.

On your own GPU, from a clone: install torch and wyjax with the CUDA extra that matches your
driver (or, on an image that ships jax and torch, wyjax alone), then run it with your data
folder; on the CPU, --smoke runs every part with tiny sizes (a test):

    pip install torch==2.13.0 && pip install -c constraints.txt -e '.[cuda13]'   # or '.[cuda12]'
    pip install --no-deps -e .                     # instead, beside a GPU image's jax and torch
    python benchmarks/gpu.py --data=DATA [--profile=TRACES]
    JAX_PLATFORMS=cpu python benchmarks/gpu.py --smoke --data=DATA

DATA holds wyweb/tlc/ (the WYWEB TLC task's files) and daizhige_sample/ (text to punctuate); the
pretrain and attention parts read nothing. Each part runs in a process of its own under its own
time budget (--budgets, about 10 minutes in all); one that overruns or fails prints a row saying
why, and the next part runs. A row of wyjax's rate over transformers' (above 1: wyjax is faster)
follows each pair.

  pretrain   DeBERTa-base (each --attentions), DeBERTa-v3-base's replaced-token detection (each
             --rtd_attentions: no transformers step to compare) and BERT-base (each
             --bert_attentions) steps, 32 × 512 (--length), bf16: wyjax's train step vs
             transformers' *ForMaskedLM under autocast bf16 with fused AdamW: tokens/s, MFU
             (wyjax's FLOP count over the chip's peak, for both), memory, wyjax's compile time;
             beside each wyjax step its predicted
             time from the same compile (a "wyjax, predicted" row, wyjax.aot.gpu_step_time).
  finetune   TLC: wyjax's whole command (`python -m wyjax.finetune`) vs the PyTorch loop of
             benchmarks/finetune_step.py on the same exported model (the demo's tiny model, --init,
             else random weights of its architecture, then a random DeBERTa-base): wall time,
             seconds per step, dev accuracy.
  predict    punctuating --chars characters: wyjax.predict's Predictor vs transformers'
             token-classification pipeline, on the same exported tiny model: characters/s.
  attention  DeBERTa's disentangled attention alone (benchmarks/attention.py's gpu_rows).

Random weights cost what trained ones do, so timings hold for any checkpoint. --profile=DIR
profiles two more steps of each side of the pretrain and predict parts (never the timed ones)
into DIR/<part>-<model>-<side>/, then prints each trace's top kernels
(benchmarks/profile_traces.py) and, on a GPU, each wyjax step's profile against its prediction
(benchmarks/profile_vs_prediction.py).
"""

import argparse
import contextlib
import importlib.metadata
import json
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
# Seconds, 9.5 minutes in all. On an H200 (docs/benchmarks.md, "GPU") DeBERTa-base's step compiled in
# about 60 s per attention and BERT-base's in 35; the attention part reached L = 1024 in 80 s.
BUDGETS = "pretrain=240,finetune=220,predict=30,attention=80"
SMOKE_BUDGETS = "pretrain=600,finetune=900,predict=300,attention=300"  # a shared 2-core CPU
TOKENS = 16_384  # a pretraining step's: 32 × 512, or 4 × 4,096 with --length=4096
PROFILED_STEPS = 2  # --profile: the steps each profiled side runs under its profiler
# --profile: a GPU step is profiled from a compile without command buffers (CUDA graphs): a kernel
# a graph launches is named in jax's trace by its graph ("command_buffer_59"), not by its HLO op,
# where the join with its prediction needs the op.
PROFILED_COMPILE = {"xla_gpu_enable_command_buffer": ""}
GiB = 2**30


def row(part: str, measurement: str, by: str, result: str, memory: str = "", notes: str = "") -> None:
  print(f"| {part} | {measurement} | {by} | {result} | {memory} | {notes} |", flush=True)


def speedup_row(part: str, measurement: str, their_seconds: float, our_seconds: float, what: str) -> None:
  """wyjax's rate over transformers' (above 1: wyjax is faster)."""
  row(part, measurement, "wyjax ÷ transformers", f"**{their_seconds / our_seconds:.2f}×** {what}")


# --- the parent: one process per part, each under its budget -------------------------------------


def versions() -> str:
  def version(name):
    try:
      return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      return "absent"

  gpu = (
    shutil.which("nvidia-smi")
    and subprocess.run(
      ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
      capture_output=True,
      text=True,
    ).stdout.strip()
  )
  packages = ", ".join(f"{name} {version(name)}" for name in ("jax", "jaxlib", "flax", "torch", "transformers"))
  return f"{gpu or 'no GPU (CPU)'}; Python {sys.version.split()[0]}, {packages}; {time.strftime('%Y-%m-%d')}"


def relay(part: str, budget: float, argv: list[str]) -> None:
  """Runs `part` in a child process, printing its rows as they come.

  Past `budget` seconds (or on a failure) the child and its own children are stopped and a row says
  why, with the child's last error line (its whole stderr: $TMPDIR/wyjax-gpu-<part>.log).
  """
  env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
  with open(pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"wyjax-gpu-{part}.log", "w+") as stderr:
    child = subprocess.Popen(
      [sys.executable, __file__, f"--part={part}", f"--budget_s={budget}", *argv],
      stdout=subprocess.PIPE,
      stderr=stderr,
      text=True,
      env=env,
      start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()

    def pump():  # the child's stdout, line by line, then None
      for line in child.stdout:
        lines.put(line)
      lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    start = time.monotonic()
    while (line := _next(lines, start + budget)) is not None:
      if line is _OVERRUN:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        row(part, "–", "–", f"stopped: over its budget of {budget:.0f} s", notes=_last_error(stderr))
        return
      print(line, end="", flush=True)
    if child.wait():
      row(
        part,
        "–",
        "–",
        f"failed (exit {child.returncode}) after {time.monotonic() - start:.0f} s",
        notes=_last_error(stderr),
      )


_OVERRUN = object()


def _next(lines: queue.Queue, deadline: float):
  try:
    return lines.get(timeout=max(0.0, deadline - time.monotonic()))
  except queue.Empty:
    return _OVERRUN


def _last_error(log) -> str:
  """The log's last line that names an error, else its last line, after the log's name."""
  log.flush()
  log.seek(0)
  lines = [line.strip() for line in log.read().splitlines() if line.strip()]
  errors = [line for line in lines if "rror" in line]
  return f"{log.name}: {(errors or lines)[-1][:200]}" if lines else ""


# --- pretrain ---------------------------------------------------------------------------------------


def pretrain_part(args) -> None:
  """Times every wyjax step first, then every transformers step.

  torch's profiler holds CUPTI to the end of the process, so a jax trace taken after it has no GPU
  kernels (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
  """
  import numpy as np

  from wyjax.aot.accelerators import peak_flops_per_device
  from wyjax.core import config_files

  tokens, steps = (256, 2) if args.smoke else (TOKENS, 10)
  length = args.length or (64 if args.smoke else 512)
  batch = max(1, tokens // length)
  peak = peak_flops_per_device()
  models = [
    (name, config_name, attentions)
    for name, config_name, attentions in (
      ("DeBERTa-base", "pretrain/deberta_base.py", args.attentions),
      ("DeBERTa-v3-base", "pretrain/deberta_v3_base.py", args.rtd_attentions),
      ("BERT-base", "pretrain/bert_base.py", args.bert_attentions),
    )
    if attentions
  ]
  measured = []  # (name, measurement, config, ids, FLOPs, {attention: wyjax's seconds})
  for name, config_name, attentions in models:
    config = config_files.load(config_name)
    if args.smoke:
      config.model.update(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    config.batch_size = batch
    ids = np.random.default_rng(0).integers(5, config.model.vocab_size, (batch, length), np.int32)
    size = " (smoke: 2 layers of 64)" if args.smoke else ""
    measurement = f"{name}{size} pretraining step, {batch} × {length}, bf16"
    seconds = {}
    configured = config.model.to_dict()
    for attention in attentions:  # "auto/attention_dropout=0": config.attention "auto", that dropout
      config.attention, _, dropout = attention.partition("/attention_dropout=")
      config.model = {**configured, **({"attention_probs_dropout_prob": float(dropout)} if dropout else {})}
      trace = f"pretrain-{name}-wyjax-{attention.replace('/', '-')}"
      seconds[attention], flops, memory, compile_s, predicted = wyjax_pretrain(
        config, ids, steps, jax_profile(args, trace) if args.profile else None
      )
      row(
        "pretrain",
        measurement,
        "wyjax",
        _throughput(batch * length, seconds[attention], flops, peak),
        _memory(memory),
        f"attention={attention}; compile {compile_s:.1f} s",
      )
      if predicted:
        low, high = predicted.band()
        row(
          "pretrain",
          measurement,
          "wyjax, predicted",
          _throughput(batch * length, predicted.seconds, flops, peak),
          notes=f"attention={attention}: measured ÷ predicted **{seconds[attention] / predicted.seconds:.2f}**; "
          f"band {low * 1e3:.1f}–{high * 1e3:.1f} ms, uncalibrated {predicted.uncalibrated * 1e3:.1f} ms "
          "(wyjax.aot.gpu_step_time.predict on this compile)",
        )
        if args.profile:  # for benchmarks/profile_vs_prediction.py
          (pathlib.Path(args.profile) / trace).mkdir(parents=True, exist_ok=True)
          (pathlib.Path(args.profile) / trace / "prediction.json").write_text(
            json.dumps(
              {
                "card": predicted.card.name,
                "steps": PROFILED_STEPS,
                "measured_step_seconds": seconds[attention],
                "batch": batch,
                "length": length,
                "kernels": predicted.kernel_records(),
              }
            )
          )
    measured.append((name, measurement, config, ids, flops, seconds))
  for name, measurement, config, ids, flops, seconds in measured:
    if config.objective != "mlm":  # transformers has no replaced-token detection step
      continue
    theirs, memory = torch_pretrain(
      config, ids, steps, args.torch_device, torch_profile(args, f"pretrain-{name}-transformers")
    )
    their_attention = "sdpa" if config.model.model_type == "bert" else "eager"
    fused = "fused AdamW" if args.torch_device == "cuda" else "AdamW"
    row(
      "pretrain",
      measurement,
      "transformers",
      _throughput(batch * length, theirs, flops, peak),
      _memory(memory),
      f"{their_attention} attention, autocast bf16, {fused}",
    )
    for attention, ours in seconds.items():
      speedup_row("pretrain", measurement, theirs, ours, f"tokens/s (attention={attention})")


def _throughput(tokens: int, seconds: float, flops: float, peak: float | None) -> str:
  mfu = f", MFU {flops / seconds / peak:.1%}" if peak else ""
  return f"{seconds:.3f} s/step, {tokens / seconds:,.0f} tokens/s{mfu}"


def _memory(size: int | None) -> str:
  if not size:
    return "–"
  return f"{size / GiB:.1f} GiB" if size >= GiB else f"{size / 2**20:.0f} MiB"


def wyjax_pretrain(config, ids, steps: int, profile=None):
  """Times the pretraining run's own jitted step (wyjax.train.pretraining.build) on `ids`, after a warm-up step.

  Returns (seconds per step, FLOPs per step, memory or None, compile seconds, prediction or None).
  Memory: what XLA's buffer assignment gives the compiled step (state, batch, temporaries; the
  donated state counted once), since the device's peak does not reset between models. Prediction:
  on a GPU card wyjax.aot knows, the step this compile built, every kernel costed and calibrated
  (a wyjax.aot.gpu_step_time.Prediction). Then, under `profile` (a context), PROFILED_STEPS more
  steps; on a GPU those of the step compiled again with PROFILED_COMPILE, whose kernels are the
  timed compile's by name (XLA forms its graphs after fusion; the autotuning results are reused).
  """
  import jax

  from wyjax.aot import gpu_step_time, report
  from wyjax.aot.accelerators import GPU_CARDS, chip_of
  from wyjax.core.host_memory import buffer_bytes
  from wyjax.data import tokenizer as tokenizer_lib
  from wyjax.train import pretraining

  run = pretraining.build(config, tokenizer_lib.placeholder(config.model.vocab_size), ids.shape[1])
  state = run.program.init_state(jax.random.key(0))
  batch = jax.device_put(ids, run.program.data_sharding)
  start = time.perf_counter()
  compiled = report.compile_step(run.train_step, state, batch, topology="local")
  compile_seconds = time.perf_counter() - start
  step = compiled.compiled
  chip = chip_of("local", jax.devices()[0])
  predicted = gpu_step_time.predict(compiled.gpu, GPU_CARDS[chip]) if compiled.gpu else None
  memory = step.memory_analysis()
  if memory is not None:
    memory = buffer_bytes(memory)
  state, out = step(state, batch)
  jax.block_until_ready(out)
  start = time.perf_counter()
  for _ in range(steps):
    state, out = step(state, batch)
  jax.block_until_ready(out)
  seconds = (time.perf_counter() - start) / steps
  if profile is not None:
    if compiled.gpu is not None:
      try:
        step = run.train_step.lower(state, batch).compile(compiler_options=PROFILED_COMPILE)
      except jax.errors.JaxRuntimeError as e:  # a jaxlib that refuses the option: the timed step's graphs
        print(f"profiling the timed compile ({PROFILED_COMPILE} refused: {e})", file=sys.stderr)
    with profile:
      for _ in range(PROFILED_STEPS):
        state, out = step(state, batch)
      jax.block_until_ready(out)
  return seconds, run.train_flops_per_step, memory, compile_seconds, predicted


def torch_pretrain(config, ids, steps: int, device_name: str, profile):
  """(seconds per step, peak memory or None) of transformers' *ForMaskedLM of the same architecture.

  Autocast bf16, fused AdamW, 15% of the positions predicted; then PROFILED_STEPS more steps under
  `profile` (a context).
  """
  import torch
  import transformers

  from wyjax.hf import configs
  from wyjax.models import EncoderConfig

  hf = configs.to_hf(EncoderConfig(**config.model.to_dict()))
  attention = "sdpa" if hf["model_type"] == "bert" else "eager"
  device = torch.device(device_name)
  model = (
    transformers.AutoModelForMaskedLM.from_config(
      transformers.AutoConfig.for_model(**hf), attn_implementation=attention
    )
    .to(device)
    .train()
  )
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
  inputs = torch.as_tensor(ids, dtype=torch.long, device=device)
  labels = inputs.masked_fill(torch.rand(inputs.shape, device=device) > 0.15, -100)

  def step():
    with torch.autocast(device.type, dtype=torch.bfloat16):
      loss = model(input_ids=inputs, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
  if device.type == "cuda":
    torch.cuda.reset_peak_memory_stats()
  step()
  synchronize()
  start = time.perf_counter()
  for _ in range(steps):
    step()
  synchronize()
  seconds = (time.perf_counter() - start) / steps
  peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
  with profile:
    for _ in range(PROFILED_STEPS):
      step()
    synchronize()
  return seconds, peak


# --- finetune ----------------------------------------------------------------------------------------


def finetune_part(args) -> None:
  import finetune_step  # benchmarks/, beside this file

  out = pathlib.Path(args.out)
  tlc = _first_lines(args.data / "wyweb" / "tlc", out / "tlc", 256) if args.smoke else args.data / "wyweb" / "tlc"
  # (name, exported model, steps, learning rate, rerun with the compilation cache the first run filled);
  # --smoke: the tiny model, 12 steps (past the 10 the timing leaves out)
  tiny = tiny_model(args, tlc, out / "hf_tiny")
  runs = (
    [("tiny", tiny, 12, 1e-3, False)]
    if args.smoke
    else [("tiny", tiny, 300, 1e-3, True), ("base", base_model(tlc, out / "hf_base"), 150, 5e-5, False)]
  )
  for name, hf_dir, steps, learning_rate, warm_rerun in runs:
    settings = argparse.Namespace(
      steps=steps,
      learning_rate=learning_rate,
      batch_size=32,
      seed=0,
      sort_window=1,
      torch_sort_window=1,
      torch_device=args.torch_device,
    )
    task, dev_examples, dev_features = finetune_step.featurize("tlc", str(tlc), hf_dir, out / f"{name}.pkl")
    measurement = f"TLC fine-tuning, {name} model, {steps} steps, batch 32"
    cache = out / f"{name}_xla_cache"
    shutil.rmtree(cache, ignore_errors=True)
    ours = finetune_step.run_wyjax("tlc", str(tlc), hf_dir, out / f"{name}_wyjax", cache, settings)
    _finetune_row(measurement, "wyjax", ours, "the whole command, compilation cache empty")
    theirs = finetune_step.run_torch(task, dev_examples, dev_features, out / f"{name}.pkl", hf_dir, out, settings)
    _finetune_row(
      measurement, "transformers", theirs, "the PyTorch loop (its process, reading features written beforehand)"
    )
    speedup_row("finetune", measurement, theirs["wall"], ours["wall"], "wall time, compilation cache empty")
    if warm_rerun:
      warm = finetune_step.run_wyjax("tlc", str(tlc), hf_dir, out / f"{name}_wyjax", cache, settings)
      _finetune_row(measurement, "wyjax", warm, "the whole command again, compilation cache warm")
      speedup_row("finetune", measurement, theirs["wall"], warm["wall"], "wall time, compilation cache warm")
    speedup_row("finetune", measurement, theirs["step"], ours["step"], "steps/s")


def _finetune_row(measurement: str, by: str, run: dict, notes: str) -> None:
  row(
    "finetune",
    measurement,
    by,
    f"{run['wall']:.1f} s wall, {run['step']:.4f} s/step ({1 / run['step']:.1f} steps/s), dev {100 * run['dev']:.2f}",
    notes=notes,
  )


def _first_lines(folder: pathlib.Path, out: pathlib.Path, count: int) -> pathlib.Path:
  """A copy of a task folder with the first `count` lines of each file (--smoke)."""
  out.mkdir(parents=True, exist_ok=True)
  for path in folder.iterdir():
    (out / path.name).write_bytes(b"\n".join(path.read_bytes().split(b"\n")[:count]))
  return out


def _tlc_tokenizer(tlc: pathlib.Path):
  from wyjax.data import tokenizer as tokenizer_lib
  from wyjax.tasks import datasets
  from wyjax.tasks.registry import TASKS
  from wyjax.train import task_model

  examples = datasets.load_splits(TASKS["tlc"].files, str(tlc))["train"]
  return tokenizer_lib.Tokenizer(
    tokenizer_lib.build_vocab([text for example in examples for text in task_model.example_texts(example)])
  )


def _export_random(config_fields: dict, tlc: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  import jax

  from wyjax.hf import export_folder, loading
  from wyjax.models import EncoderConfig

  tokenizer = _tlc_tokenizer(tlc)
  config = EncoderConfig(**{**config_fields, "vocab_size": len(tokenizer)})
  model = loading.Model(config, loading.init_params(config, jax.random.key(0)), tokenizer)
  return export_folder.export(model, out, overwrite=True)


def tiny_model(args, tlc: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  """The demo's pretrained model exported (--init), else random weights of its architecture."""
  from wyjax.hf import export_folder, loading
  from wyjax.train import task_model

  if args.init:
    return export_folder.export(loading.load(args.init), out, overwrite=True)
  return _export_random(task_model.FRESH_TINY_MODEL, tlc, out)


def base_model(tlc: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
  """A random DeBERTa-base (configs/pretrain/deberta_base.py's architecture)."""
  from wyjax.core import config_files

  return _export_random(config_files.load("pretrain/deberta_base.py").model.to_dict(), tlc, out)


# --- predict -----------------------------------------------------------------------------------------


def predict_part(args) -> None:
  import predict  # benchmarks/, beside this file
  import torch
  import transformers

  from wyjax.hf import task_models
  from wyjax.train import inference

  chars = 2_000 if args.smoke else args.chars
  lines = predict.text_lines(args.data / "daizhige_sample", chars, 500)
  folder = task_models.export(predict.punc_model(lines, 512), pathlib.Path(args.out) / "punc", overwrite=True)
  measurement = f"punctuating {chars:,} characters, tiny PUNC model, batch 32"
  predictor = inference.Predictor(task_models.load(folder), batch_size=32)
  ours = predict.timed(lambda batch: list(predictor.outputs(batch)), lines)
  with jax_profile(args, "predict-wyjax"):
    list(predictor.outputs(lines[:128]))
  row("predict", measurement, "wyjax", f"{chars / ours:,.0f} characters/s", notes="wyjax.predict's Predictor")
  pipe = transformers.pipeline("token-classification", model=str(folder), device=torch.device(args.torch_device))
  theirs = predict.timed(lambda batch: list(pipe(batch, batch_size=32)), lines)
  with torch_profile(args, "predict-transformers"):
    list(pipe(lines[:128], batch_size=32))
  row(
    "predict", measurement, "transformers", f"{chars / theirs:,.0f} characters/s", notes="token-classification pipeline"
  )
  speedup_row("predict", measurement, theirs, ours, "characters/s")


# --- profiles ----------------------------------------------------------------------------------------


def jax_profile(args, name: str):
  """jax's profiler over a block, into <--profile>/<name>/ (nothing without --profile)."""
  if not args.profile:
    return contextlib.nullcontext()
  import jax

  return jax.profiler.trace(str(pathlib.Path(args.profile) / name), create_perfetto_trace=True)


@contextlib.contextmanager
def torch_profile(args, name: str):
  """torch's profiler over a block (CPU and, where there is one, CUDA), into <--profile>/<name>/trace.json."""
  if not args.profile:
    yield
    return
  import torch

  kinds = torch.profiler.ProfilerActivity
  activities = [kinds.CPU, kinds.CUDA] if torch.cuda.is_available() else [kinds.CPU]
  with torch.profiler.profile(activities=activities) as profiler:
    yield
  out = pathlib.Path(args.profile) / name
  out.mkdir(parents=True, exist_ok=True)
  profiler.export_chrome_trace(str(out / "trace.json"))


# --- attention ---------------------------------------------------------------------------------------


def attention_part(args) -> None:
  import attention  # benchmarks/, beside this file

  for line in attention.gpu_rows(smoke=args.smoke, budget_s=args.budget_s - 15):  # 15 s: start-up, torch's import
    print(line, flush=True)


PARTS = {"pretrain": pretrain_part, "finetune": finetune_part, "predict": predict_part, "attention": attention_part}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--data",
    type=pathlib.Path,
    help="your data folder: wyweb/tlc/ (the TLC task's files) and daizhige_sample/ (text to punctuate), "
    "for the finetune and predict parts",
  )
  parser.add_argument("--smoke", action="store_true", help="every part with tiny sizes (on the CPU: a test)")
  parser.add_argument("--parts", default=",".join(PARTS), help="which parts, in order")
  parser.add_argument(
    "--budgets", help=f"seconds per part: name=seconds,… (default {BUDGETS}; --smoke: {SMOKE_BUDGETS})"
  )
  parser.add_argument(
    "--attentions",
    default="auto,auto/attention_dropout=0.1",
    help="DeBERTa-base's config.attention values to time, each optionally with "
    "/attention_dropout=RATE (default: the config's 0). On a GPU at 512 keys \"auto\" trains "
    "without attention dropout through cuDNN (the relative terms as its bias), with it through XLA, "
    "\"pallas\" through the GPU kernel (measured on an H200: slower than XLA, docs/benchmarks.md); "
    "empty: no DeBERTa-base step",
  )
  parser.add_argument(
    "--rtd_attentions",
    default="",
    help="configs/pretrain/deberta_v3_base.py's (DeBERTa-base trained by replaced-token detection: its "
    "6-layer generator and 12-layer discriminator in one step), the same way; no transformers row; "
    "empty (the default): no such step",
  )
  parser.add_argument(
    "--bert_attentions",
    default="auto",
    help="BERT-base's, the same way (its config's attention dropout is 0.1: \"auto\" trains through "
    "XLA below 2,048 keys, \"pallas\" through the GPU kernel); empty: no BERT-base step (past its "
    "512 positions)",
  )
  parser.add_argument(
    "--length",
    type=int,
    help=f"tokens a sequence of the pretrain part, its batch {TOKENS:,} tokens "
    "(default 512: 32 × 512; at 4,096 \"auto\" trains DeBERTa through the GPU kernel; --smoke: 64 "
    "of 256)",
  )
  parser.add_argument(
    "--init",
    default="",
    help="the demo's pretrained model (a wyjax workdir or transformers "
    "folder) for the tiny fine-tuning run; default: random weights of its architecture",
  )
  parser.add_argument("--chars", type=int, default=300_000, help="characters the predict part punctuates")
  parser.add_argument("--out", default="/tmp/wyjax-gpu-bench")
  parser.add_argument(
    "--profile",
    default="",
    help="a folder for the profilers' traces of the pretrain and predict "
    "parts; a table of their top kernels prints at the end",
  )
  parser.add_argument("--part", help="internal: run this part here")
  parser.add_argument("--budget_s", type=float, help="internal: the part's budget")
  args = parser.parse_args()
  args.attentions, args.rtd_attentions, args.bert_attentions = (
    [a for a in value.split(",") if a] for value in (args.attentions, args.rtd_attentions, args.bert_attentions)
  )
  if args.part:
    import torch

    args.torch_device = "cuda" if torch.cuda.is_available() else "cpu"
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    return PARTS[args.part](args)

  if args.data is None and {"finetune", "predict"} & set(args.parts.split(",")):
    parser.error("--data=DIR is required for the finetune and predict parts (or choose --parts)")
  budgets = args.budgets or (SMOKE_BUDGETS if args.smoke else BUDGETS)
  budgets = {name: float(seconds) for name, seconds in (item.split("=") for item in budgets.split(","))}
  print(f"# {versions()}{' (smoke: tiny sizes)' if args.smoke else ''}\n")
  print("| part | measurement | by | result | peak memory | notes |\n|---|---|---|---|---|---|", flush=True)
  forwarded = [a for a in sys.argv[1:] if not a.startswith(("--parts", "--budgets"))]
  for part in args.parts.split(","):
    relay(part, budgets[part], forwarded)
  if args.profile:
    import profile_traces  # benchmarks/, beside this file
    import profile_vs_prediction

    print(f"\n## Top kernels by time ({args.profile})\n\n{profile_traces.table(args.profile)}", flush=True)
    print(f"\n## Profile against prediction ({args.profile})\n", flush=True)
    profile_vs_prediction.main(args.profile)


if __name__ == "__main__":
  main()

"""Apply a fine-tuned model to your own text: one output line per input line, in order.

    python -m wyjax.predict --model=RUN --input=book.txt --output=book.punctuated.txt
    echo '{"context": "…", "question": "…"}' | python -m wyjax.predict --model=CMRC_RUN

--model is a fine-tuning workdir (its best-dev run), one of its seed_<k> runs, or a folder
`wyjax.export` wrote from one. What an input line is depends on the run's task (its
`Task.inputs`): a line of text for a one-text task (PUNC, NER, TLC, GJC, FSPC, TNEWS, …), else
a JSON object of its fields, e.g. {"context", "question", "options"} (IRC, WYWRC, C³). Outputs:
punctuated text (PUNC; marks already in the input are removed first unless --keep_marks),
{"text", "entities": [{"text", "type", "start", "end"}]} (NER; texts of any length, windowed),
the label and class probabilities (classification), the chosen option (choice tasks), the
answer, its characters and score (CMRC 2018), the translation (WYWMT).

Input is streamed (memory stays flat on a large file) and batched by length; a progress bar
goes to stderr. Only `\n` ends a line (`\r\n` too, as one ending): a lone `\r` stays inside its
line, so output line k always answers input line k. A bad line (invalid UTF-8 among them) is an
error naming its file and line; with --skip_bad_lines it is reported, counted and left empty in
the output. --output appears only once complete (a failure or Ctrl-C leaves nothing); without
--overwrite it never replaces a file, not even one that appeared while predict ran (another
predict's). No output, --output or standard output, is ever the input file, --input or standard
input, or lies inside the --model folder, even with --overwrite; a pipe or a device (/dev/null)
is written as a stream, and a symbolic link through to its target. --model must be a fine-tuned
task model (checked from its JSON files before its weights are read).
"""

import contextlib
import os
import sys

import tqdm
from absl import flags
from etils import epath

from wyjax.core import cli, guards, io_paths, logs, storage
from wyjax.core.compilation_cache import use_compilation_cache
from wyjax.hf import task_models
from wyjax.tasks import user_inputs
from wyjax.train import inference

_MODEL = flags.DEFINE_string(
  "model", None, "Fine-tuning workdir, seed run or exported task-model folder.", required=True
)
_INPUT = flags.DEFINE_string("input", "-", "Input file ('-': stdin).")
_OUTPUT = flags.DEFINE_string("output", "-", "Output file ('-': stdout).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sequences per batch.", lower_bound=1)
_BEAM = flags.DEFINE_integer("beam", 4, "Beam size of a translation model (1: greedy).", lower_bound=1)
_KEEP_MARKS = flags.DEFINE_bool(
  "keep_marks",
  False,
  "Keep the punctuation already in the input (PUNC); by default it is removed and the model punctuates the bare text.",
)
_SKIP_BAD_LINES = flags.DEFINE_bool("skip_bad_lines", False, "Report bad lines and leave them empty.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing --output file.")


def _check_output(source: str, output: str, overwrite: bool) -> None:
  """Refuses an --output file that exists unless `overwrite`, and always an output that is the input file.

  An existing file is a local one or one in a bucket. The input file is the same device and inode:
  the same path, a link to it, a hard link, or the file on standard input, `< in.txt`, or output,
  `> in.txt`. A pipe or a device (/dev/null) is written as a stream, as stdout is.
  """
  if storage.same_file(source, output):
    written = f"--output {output}" if output != "-" else "standard output"
    read = f"the input file {source}" if source != "-" else "the file on standard input"
    raise guards.RunError(
      f"{written} is {read}; writing it would destroy the input (--overwrite never does): "
      f"{'choose another --output' if output != '-' else 'write to another file with --output'}"
    )
  if output != "-" and not overwrite and epath.Path(output).is_file():
    raise guards.RunError(f"{output} exists; choose another --output or pass --overwrite")


def main(argv):
  del argv
  logs.to_file(None, "predict")
  use_compilation_cache()  # a second run loads its programs (on a GPU, its autotuning too)
  _check_output(_INPUT.value, _OUTPUT.value, _OVERWRITE.value)
  io_paths.check_apart({"--output": _OUTPUT.value}, {"--model": _MODEL.value}, "predict")
  task_models.check_fine_tuned(_MODEL.value, "--model")
  fine_tuned = task_models.load(_MODEL.value)
  predictor = inference.Predictor(
    fine_tuned,
    batch_size=_BATCH_SIZE.value,
    beam_size=_BEAM.value,
    keep_marks=_KEEP_MARKS.value,
    skip_bad_lines=_SKIP_BAD_LINES.value,
  )
  name = "stdin" if _INPUT.value == "-" else _INPUT.value
  source = sys.stdin.buffer if _INPUT.value == "-" else open(_INPUT.value, "rb")
  total = None if _INPUT.value == "-" else os.path.getsize(_INPUT.value)
  progress = tqdm.tqdm(
    total=total, unit="B", unit_scale=True, desc=f"{fine_tuned.task.name} predict", file=sys.stderr, disable=None
  )

  def counted(lines):
    for line in lines:
      progress.update(len(line) + 1)
      yield line

  sink = (
    contextlib.nullcontext(sys.stdout)
    if _OUTPUT.value == "-"
    else storage.written_whole(_OUTPUT.value, encoding="utf-8", replace=_OVERWRITE.value)
  )
  try:
    with source, sink as out:
      for output in predictor.outputs(counted(user_inputs.lines(source)), name):
        out.write(output + "\n")
  except storage.FormatError as e:  # a bad line
    raise guards.RunError(
      f"{e}\n(an input line is {user_inputs.describe(fine_tuned.task)}; --skip_bad_lines reports and skips bad lines)"
    ) from None
  except FileExistsError as e:
    if e.filename != os.fspath(epath.Path(_OUTPUT.value)):  # (not the rename's: storage.written_whole)
      raise
    raise guards.RunError(
      f"--output {_OUTPUT.value} appeared while predict ran (another command wrote it) and was "
      "not replaced; choose another --output, or pass --overwrite"
    ) from None
  finally:
    progress.close()
  counts = predictor.counts
  if counts.truncated:
    print(
      f"{counts.truncated} characters of inputs longer than the model's {predictor.max_length} tokens were cut",
      file=sys.stderr,
    )
  if counts.bad:
    print(f"{counts.bad} bad line(s) of {counts.lines} left empty", file=sys.stderr)


if __name__ == "__main__":
  cli.run(main)

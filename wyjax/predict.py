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
goes to stderr. A bad line is an error naming its file and line; with --skip_bad_lines it is
reported, counted and left empty in the output.
"""
import os
import sys

import tqdm
from absl import flags

from wyjax.core import cli, guards, logs
from wyjax.hf import task_models
from wyjax.tasks import user_inputs
from wyjax.train import inference

_MODEL = flags.DEFINE_string("model", None, "Fine-tuning workdir, seed run or exported task-model folder.",
                             required=True)
_INPUT = flags.DEFINE_string("input", "-", "Input file ('-': stdin).")
_OUTPUT = flags.DEFINE_string("output", "-", "Output file ('-': stdout).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sequences per batch.")
_BEAM = flags.DEFINE_integer("beam", 4, "Beam size of a translation model (1: greedy).")
_KEEP_MARKS = flags.DEFINE_bool("keep_marks", False, "Keep the punctuation already in the input (PUNC); by default "
                                "it is removed and the model punctuates the bare text.")
_SKIP_BAD_LINES = flags.DEFINE_bool("skip_bad_lines", False, "Report bad lines and leave them empty.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing --output file.")


def _lines(stream):
  for line in stream:
    yield line.rstrip("\r\n")


def main(argv):
  del argv
  logs.to_file(None, "predict")
  if _OUTPUT.value != "-" and os.path.exists(_OUTPUT.value) and not _OVERWRITE.value:
    raise guards.RunError(f"{_OUTPUT.value} exists; choose another --output or pass --overwrite")
  fine_tuned = task_models.load(_MODEL.value)
  predictor = inference.Predictor(fine_tuned, batch_size=_BATCH_SIZE.value, beam_size=_BEAM.value,
                                  keep_marks=_KEEP_MARKS.value, skip_bad_lines=_SKIP_BAD_LINES.value)
  name = "stdin" if _INPUT.value == "-" else _INPUT.value
  source = sys.stdin if _INPUT.value == "-" else open(_INPUT.value, encoding="utf-8")
  total = None if _INPUT.value == "-" else os.path.getsize(_INPUT.value)
  sink = sys.stdout if _OUTPUT.value == "-" else open(_OUTPUT.value, "w", encoding="utf-8")
  progress = tqdm.tqdm(total=total, unit="B", unit_scale=True, desc=f"{fine_tuned.task.name} predict",
                       file=sys.stderr, disable=None)

  def counted(lines):
    for line in lines:
      progress.update(len(line.encode("utf-8")) + 1)
      yield line

  try:
    with source, sink:
      for output in predictor.outputs(counted(_lines(source)), name):
        sink.write(output + "\n")
  except ValueError as e:  # a bad line (tasks.files.FormatError)
    raise guards.RunError(f"{e}\n(an input line is {user_inputs.describe(fine_tuned.task)}; "
                          "--skip_bad_lines reports and skips bad lines)") from None
  finally:
    progress.close()
  counts = predictor.counts
  if counts.truncated:
    print(f"{counts.truncated} characters of inputs longer than the model's {predictor.max_length} tokens were cut",
          file=sys.stderr)
  if counts.bad:
    print(f"{counts.bad} bad line(s) of {counts.lines} left empty", file=sys.stderr)


if __name__ == "__main__":
  cli.run(main)

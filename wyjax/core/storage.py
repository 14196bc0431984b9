"""Local folders and cloud buckets (gs://) behind one path type, `etils.epath.Path`.

Every user-given path goes through `epath`, so a workdir, a prepared corpus or an export can
live in a bucket. Two libraries need local files: ArrayRecord readers and writers (a host
reads its corpus from a staged local copy; pods may mount the bucket with gcsfuse instead) and
transformers/huggingface_hub (an exported folder is staged before verifying or pushing).
"""

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import pathlib
import re
import stat
import sys

from etils import epath


def is_local(path) -> bool:
  return "://" not in os.fspath(path)


def place(path):
  """What `path` names, for comparing paths: `tlc/`, `./tlc` and `/home/me/tlc` are one folder.

  A local path becomes absolute, its links and `..` resolved, without a trailing slash; one in a bucket
  loses its trailing slash; a value that names no path (empty, not a string) is itself.
  """
  if not isinstance(path, str) or not path:
    return path
  return os.path.realpath(path) if is_local(path) else path.rstrip("/")


def hub_id(value) -> str | None:
  """`value` when it names a Hub model (ORG/NAME) rather than a local path or a bucket's; else None."""
  looks_like_id = isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value)
  return value if looks_like_id and not epath.Path(value).exists() else None


def upload(local_dir, remote_dir, *, last: str | None = None) -> None:
  """Copies every file under local_dir to remote_dir (overwriting); `last` (a file name) goes after all others."""
  local_dir, remote_dir = pathlib.Path(local_dir), epath.Path(remote_dir)
  files = sorted((p for p in local_dir.rglob("*") if p.is_file()), key=lambda p: (p.name == last, str(p)))
  for path in files:
    target = remote_dir / path.relative_to(local_dir).as_posix()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(path.read_bytes())


def staged(remote_dir, names, local_dir) -> pathlib.Path:
  """local_dir holding a copy of remote_dir's files `names` (relative paths).

  A file already there with the remote size is kept, so local_dir must name the content (e.g. by a
  fingerprint). Each file appears atomically: processes sharing a host may stage at once.
  """
  remote_dir, local_dir = epath.Path(remote_dir), pathlib.Path(local_dir)
  for name in names:
    source, target = remote_dir / name, local_dir / name
    if target.exists() and target.stat().st_size == source.stat().length:
      continue
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    partial.write_bytes(source.read_bytes())
    partial.rename(target)
  return local_dir


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, quota or file-size limit


def same_file(source: str, output: str) -> bool:
  """Whether writing `output` would write the file `source` is read from (the same device and inode).

  '-' is standard input's file for `source`, standard output's for `output`. Pipes, devices and files in
  a bucket are never the same file.
  """
  found = _regular_file(source, 0), _regular_file(output, 1)
  return all(found) and os.path.samestat(*found)


def _regular_file(path: str, fd: int) -> os.stat_result | None:
  try:
    found = os.fstat(fd) if path == "-" else os.stat(path) if is_local(path) else None
  except OSError:
    return None
  return found if found and stat.S_ISREG(found.st_mode) else None


@contextlib.contextmanager
def written_whole(path, mode: str = "w", *, replace: bool = True, **open_kwargs):
  """An open file that appears at `path` only once complete: written_together's one file."""
  with written_together([path], mode, replace=replace, **open_kwargs) as (f,):
    yield f


@contextlib.contextmanager
def written_together(paths, mode: str = "w", *, replace: bool = True, **open_kwargs):
  """Open files, one for each of `paths`, that appear there only once all are complete.

  - Each is written under a temporary name beside its path; when the block ends without an exception
    all are closed, then renamed over their paths. On any exception (a full disk, Ctrl-C) the
    temporary files are removed: nothing half-written is left.
  - Without `replace`, a file that appeared at a path while the block ran is never replaced:
    FileExistsError names it, and the files already renamed are removed again (rename_new).
  - A symbolic link is written through; a path that is no regular file (a FIFO, /dev/null) is
    written as it is.
  - A full disk's error names the file (with several files, a write's names their folder, unless the
    caller writes within `named`).
  """
  paths = [epath.Path(p) for p in paths]
  targets = [epath.Path(os.path.realpath(p)) if is_local(p) else p for p in paths]
  partials = [None if _is_stream(t) else t.with_name(_partial_name(t.name)) for t in targets]
  files, closing, renamed = [], None, []
  try:
    for path, target, partial in zip(paths, targets, partials):
      with _as(partial, path):
        files.append((partial or target).open(mode, **open_kwargs))
    yield files
    for path, f in zip(paths, files):
      closing = path
      f.close()
    closing = None
    for path, target, partial in zip(paths, targets, partials):
      if partial:
        with _as(partial, path), _as(target, path):
          if replace:
            partial.replace(target)
          else:
            rename_new(partial, target)
        renamed.append(target)
  except BaseException:
    for f in files:
      with contextlib.suppress(OSError):
        f.close()
    for partial in partials:
      if partial:
        partial.unlink(missing_ok=True)
    if not replace:  # renamed as new files: never one that was there
      for target in renamed:
        target.unlink(missing_ok=True)
    with named(closing or (paths[0] if len(paths) == 1 else paths[0].parent)):
      raise


_AT_FDCWD, _RENAME_NOREPLACE = -100, 1  # <fcntl.h>, <linux/fs.h>
_NO_RENAMEAT2 = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)  # a kernel or file system without it
_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK)  # a file system without hard links (vfat, some FUSE)


def rename_new(source, target) -> None:
  """Renames `source` to `target` unless `target` exists, which raises FileExistsError naming it.

  Atomic by Linux's renameat2 (RENAME_NOREPLACE), else by a hard link then an unlink; where the file
  system has neither (or in a bucket), a check then a rename.
  """
  source, target = os.fspath(source), os.fspath(target)
  if is_local(target):
    try:
      _renameat2(source, target)
      return
    except OSError as e:
      if e.errno not in _NO_RENAMEAT2:
        raise
    try:
      os.link(source, target)
      os.unlink(source)
      return
    except OSError as e:
      if e.errno not in _NO_LINKS:
        raise
  if epath.Path(target).exists():
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
  epath.Path(source).rename(target)


def _renameat2(source: str, target: str) -> None:
  renameat2 = getattr(_libc(), "renameat2", None)
  if renameat2 is None:  # not Linux, or a C library before glibc 2.28
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
  if renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) != 0:
    code = ctypes.get_errno()
    raise OSError(code, os.strerror(code), target)


@functools.cache
def _libc() -> ctypes.CDLL:
  return ctypes.CDLL(None, use_errno=True)


_NAME_MAX = 255  # bytes of one file name on Linux's and macOS's file systems


def _partial_name(name: str) -> str:
  """`.<name>.<pid>.partial`, the temporary name beside `name`; cut (and told apart by a hash) when too long."""
  suffix = f".{os.getpid()}.partial"
  if len(f".{name}{suffix}".encode()) <= _NAME_MAX:
    return f".{name}{suffix}"
  suffix = f"~{hashlib.sha256(name.encode()).hexdigest()[:8]}{suffix}"
  room = _NAME_MAX - 1 - len(suffix)
  return f".{name.encode()[:room].decode(errors='ignore')}{suffix}"


@contextlib.contextmanager
def _as(partial, path):
  """In the block, an error naming `partial` (the temporary file, or the resolved target) names `path` instead."""
  try:
    yield
  except OSError as e:
    if partial is not None and e.filename == os.fspath(partial):
      raise type(e)(e.errno, e.strerror, os.fspath(path)) from None
    raise


def _is_stream(path: epath.Path) -> bool:
  """Whether `path` is there, local and no regular file (a FIFO, a device, a socket, a folder)."""
  try:
    return is_local(path) and not stat.S_ISREG(os.stat(path).st_mode)
  except FileNotFoundError:
    return False


@contextlib.contextmanager
def named(path):
  """In the block, a full disk's error that names no file (a write's) names `path`."""
  try:
    yield
  except OSError as e:
    if e.errno in NO_ROOM and e.filename is None:
      raise OSError(e.errno, e.strerror, os.fspath(path)) from e
    raise


def file_sha256(path) -> str:
  """The SHA-256 of a file's bytes (local or in a bucket), read a few MiB at a time."""
  digest = hashlib.sha256()
  with epath.Path(path).open("rb") as f:
    while chunk := f.read(1 << 22):
      digest.update(chunk)
  return digest.hexdigest()


def lines_sha256(lines) -> str:
  """The SHA-256 of `lines` as a file holds them, each ended by a newline (a vocabulary's tokens, in order)."""
  return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def write_json(path, value) -> None:
  """Writes `value` as JSON at `path`, which appears only once complete (written_whole)."""
  with written_whole(path, encoding="utf-8") as f:
    f.write(json.dumps(value, indent=2, ensure_ascii=False))


def cache_dir() -> pathlib.Path:
  """wyjax's cache (corpora, TFDS builds, compiled programs, logs): $WYJAX_CACHE or ~/.cache/wyjax."""
  return pathlib.Path(os.environ.get("WYJAX_CACHE", pathlib.Path.home() / ".cache" / "wyjax"))


class FormatError(ValueError):
  """A malformed file: the message starts with `file:line:`."""

  def __init__(self, path, line: int, message: str):
    self.path, self.line, self.message = path, line, message
    super().__init__(f"{path}:{line}: {message}")

  def __reduce__(self):  # rebuilt from its arguments, not its message: it crosses from worker processes
    return type(self), (self.path, self.line, self.message), self.__dict__


def read_text(path) -> str:
  """UTF-8 (a BOM is dropped); undecodable bytes are an error naming the file and line."""
  data = epath.Path(path).read_bytes()
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data[: e.start].count(b"\n") + 1
    raise FormatError(path, line, f"not valid UTF-8 ({e.reason} at byte {e.start})") from e


def read_json(path, kind: type = dict):
  """A JSON file (read as read_text reads it) whose top level is a `kind` (dict: an object; object: anything).

  Raises:
    FormatError: it fails to parse, or has another top level; naming the file and line (json_errors).
  """
  text = read_text(path)
  with json_errors(path, text):
    value = json.loads(text)
  if not isinstance(value, kind):
    line = text.count("\n", 0, len(text) - len(text.lstrip())) + 1
    raise FormatError(path, line, f"expected {_JSON_KINDS[kind]}, not {_JSON_KINDS[type(value)]}")
  return value


_JSON_KINDS = {
  dict: "a JSON object",
  list: "an array",
  str: "a string",
  int: "a number",
  float: "a number",
  bool: "true or false",
  type(None): "null",
}


@contextlib.contextmanager
def json_errors(path, text: str, *, start: int = 0, first_line: int = 1):
  """Inside the block, a failed parse of `text` is a FormatError naming the file and line.

  `text` holds JSON from offset `start`; its first line is `first_line` of `path`. Covered: invalid JSON,
  nesting deeper than Python's recursion limit, an integer of more digits than Python converts.
  """
  line_at = lambda offset: first_line + text.count("\n", 0, offset)
  try:
    yield
  except json.JSONDecodeError as e:
    raise FormatError(path, first_line + e.lineno - 1, f"invalid JSON ({e.msg}: column {e.colno})") from e
  except RecursionError:
    depth, offset = _deepest(text, start)
    raise FormatError(
      path, line_at(offset), f"JSON nested {depth} levels deep, more than Python's parser takes"
    ) from None
  except ValueError as e:
    if "integer string conversion" not in str(e):
      raise
    limit = sys.get_int_max_str_digits()
    number = next(
      (
        m
        for m in _JSON_TOKENS.finditer(text, start)
        if m.group().lstrip("-").isdigit() and len(m.group().lstrip("-")) > limit
      ),
      None,
    )
    if number is None:
      raise
    raise FormatError(
      path,
      line_at(number.start()),
      f"an integer of {len(number.group().lstrip('-'))} digits (Python reads at most {limit})",
    ) from e


# JSON's strings (skipped whole), brackets and numbers.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _deepest(text: str, start: int) -> tuple[int, int]:
  """(depth, offset) where the nesting of the JSON in text[start:] first reaches its deepest."""
  depth = deepest = at = 0
  for m in _JSON_TOKENS.finditer(text, start):
    bracket = m.group()
    if bracket in ("[", "{"):
      depth += 1
      if depth > deepest:
        deepest, at = depth, m.start()
    elif bracket in ("]", "}"):
      depth -= 1
  return deepest, at

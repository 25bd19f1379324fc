"""Writing outputs so that nothing is lost: every file kvroof writes goes to a temporary file
in its own folder and is renamed into place only when complete; a folder of outputs (the
report) is built apart and moved into place as a whole; a folder kvroof made carries a marker
file, and a non-empty folder without one is left alone unless the user says ``--force``.

- :func:`write_text`, :func:`write_bytes` and :func:`replacing` (several files that belong
  together, renamed together): an error or Ctrl-C while writing leaves the previous file as
  it was and no temporary file behind.
- :func:`staged_folder`: the report's folder. The new content is built in a hidden folder
  (beside the target when the target does not exist yet, inside it otherwise, so that it is
  on the same file system); when it is complete it is renamed to the target, or its files are
  moved into the existing target, which then loses only the files the previous run listed in
  its marker (the previous report's figures) and keeps every other file.
- :class:`OutputFolder`: a folder that fills up over time (``kvroof measure``): checked before
  anything runs, each pair of files added with :func:`replacing`, the marker's list kept up
  to date.
- :func:`interrupts_deferred`: the renames that publish a result happen with Ctrl-C and
  SIGTERM held back until they are done, so an interrupted command leaves either the old
  outputs or the new ones.
- Temporary names carry the writing process's id: a run removes the temporaries that a
  process no longer running left beside its targets (one killed with SIGKILL, which nothing
  can catch), and never another live run's.

The marker is :data:`MARKER`, a small JSON file listing what kvroof wrote there.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Final

from kvroof._version import __version__
from kvroof.errors import KvroofError, SpecError

__all__ = [
    "MARKER",
    "OutputFolder",
    "check_output_folder",
    "interrupts_deferred",
    "read_marker",
    "remove_stale_temporaries",
    "replacing",
    "staged_folder",
    "write_bytes",
    "write_text",
]

MARKER: Final = ".kvroof-output"
"""The file that marks a folder as kvroof's (JSON: the command and the files it wrote)."""

_TEMP_TAG: Final = ".kvroof-tmp"
_MAX_MARKER_BYTES: Final = 1 << 20


_HELD: Final = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM back for the duration of the block, then raise what
    they would have done: the handler that was in place is called (the command line's raises
    :class:`~kvroof.errors.Terminated` for a SIGTERM and KeyboardInterrupt for Ctrl-C); without
    one, Ctrl-C raises KeyboardInterrupt and SIGTERM ends the process as by default. A signal
    the process ignores stays ignored. Only in the main thread,
    where Python delivers signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {number: signal.getsignal(number) for number in _HELD}
    for number, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(number, hold)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        for number in _HELD[::-1]:  # SIGTERM first: it ends the command either way
            if number not in received:
                continue
            handler = previous[number]
            if callable(handler):
                handler(number, None)  # the command line's: raises Terminated or KeyboardInterrupt
            elif number == signal.SIGTERM and handler == signal.SIG_DFL:
                signal.raise_signal(number)  # what SIGTERM would have done
            if number == signal.SIGINT:
                raise KeyboardInterrupt


def _temp_path(target: Path, kind: str = "") -> Path:
    return target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{kind}{_TEMP_TAG}"


_TEMP_RE: Final = re.compile(r"(\d+)-[0-9a-f]{8}(?:-new)?" + re.escape(_TEMP_TAG))


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid we can ask about: leave it
    return True


def remove_stale_temporaries(folder: str | Path, prefix: str) -> list[Path]:
    """Remove kvroof's temporary files and folders in ``folder`` whose names start with
    ``prefix`` and whose writing process is no longer running; return what was removed.
    Nothing else is touched: only names of the form kvroof gives its temporaries."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        match = _TEMP_RE.fullmatch(name, len(prefix))
        if match is None or _running(int(match.group(1))):
            continue
        path = Path(folder) / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
        except OSError:
            pass  # cannot be removed: left as it is, nothing is lost
    return removed


def _cannot_write(path: Path, error: OSError) -> KvroofError:
    return KvroofError(f"{path}: cannot write: {error.strerror or error}")


@contextmanager
def replacing(*targets: str | Path) -> Iterator[list[Path]]:
    """Temporary paths, one beside each target, for the caller to write (create them with
    mode ``"x"``); when the block ends normally they are renamed onto the targets, all
    together, with Ctrl-C deferred. On an error or an interrupt inside the block they are
    removed and the targets are left as they were."""
    finals = [Path(t) for t in targets]
    for final in finals:
        if final.is_dir():
            raise KvroofError(f"{final}: is a folder; give a file name")
        if not final.parent.is_dir():
            raise KvroofError(f"{final}: folder {final.parent} does not exist")
    for final in finals:
        remove_stale_temporaries(final.parent, f".{final.name}.")
    temps = [_temp_path(final) for final in finals]
    try:
        yield temps
        with interrupts_deferred():
            for temp, final in zip(temps, finals, strict=True):
                try:
                    os.replace(temp, final)
                except OSError as error:
                    raise _cannot_write(final, error) from None
    finally:
        for temp in temps:
            try:
                temp.unlink()
            except FileNotFoundError:
                pass
            except OSError:  # pragma: no cover - e.g. a read-only folder; nothing to lose
                pass


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file renamed into place."""
    target = Path(path)
    with replacing(target) as (temp,):
        try:
            with open(temp, "xb") as handle:
                handle.write(data)
        except OSError as error:
            raise _cannot_write(target, error) from None
    return target


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file renamed into place."""
    return write_bytes(path, text.encode("utf-8"))


# -- folders ------------------------------------------------------------------------------------


def _safe_relative(name: object) -> str | None:
    """``name`` if it is a plain relative path inside a folder (no ``..``, not absolute)."""
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        return None
    return name


def read_marker(folder: str | Path) -> list[str] | None:
    """The files the marker in ``folder`` lists, or None when there is no valid marker (the
    marker is read as untrusted input: small, JSON, plain relative paths only)."""
    from kvroof.files.reading import read_bytes_file

    try:
        raw = read_bytes_file(Path(folder) / MARKER, _MAX_MARKER_BYTES, "kvroof's marker files")
    except SpecError:  # unreadable or too large: not a marker kvroof wrote
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("written_by") != "kvroof":
        return None
    files = data.get("files")
    if not isinstance(files, list):
        return None
    names = [_safe_relative(name) for name in files]
    if any(name is None for name in names):
        return None
    return [name for name in names if name is not None]


def _marker_text(command: str, files: list[str]) -> str:
    return json.dumps({
        "written_by": "kvroof",
        "kvroof_version": __version__,
        "command": command,
        "note": "kvroof writes into this folder again without --force because of this file; "
                "it replaces the files listed here and keeps any others.",
        "files": sorted(set(files)),
    }, indent=1) + "\n"


def _entries(folder: Path) -> list[str]:
    """What ``folder`` holds, leaving out kvroof's own temporary files."""
    return [name for name in os.listdir(folder) if not name.endswith(_TEMP_TAG)]


def check_output_folder(folder: str | Path, *, force: bool, flag: str = "",
                        parents: bool = False) -> bool:
    """Check that kvroof may write into ``folder``: it is a folder or does not exist yet (its
    parent must exist unless ``parents``), and it is empty, or holds kvroof's marker, or
    ``force`` is given. Returns whether the folder exists. Errors start with ``flag`` (the
    command-line flag that named the folder, if any)."""
    path = Path(folder)
    where = f"{flag} {path}" if flag else str(path)
    if path.exists() and not path.is_dir():
        raise KvroofError(f"{where}: exists and is not a folder")
    if not path.exists():
        if not parents and not path.parent.is_dir():
            raise KvroofError(f"{where}: parent folder {path.parent} does not exist")
        return False
    try:
        entries = _entries(path)
    except OSError as error:
        raise KvroofError(f"{where}: cannot read: {error.strerror or error}") from None
    if entries and read_marker(path) is None and not force:
        raise KvroofError(
            f"{where}: not empty and not made by kvroof (no valid {MARKER} file in it); use "
            "--force (force=True in Python) to write into it anyway: files of the same names "
            "are replaced, others are kept"
        )
    return True


def _files_under(folder: Path) -> list[str]:
    files = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            files.append((Path(root) / name).relative_to(folder).as_posix())
    return sorted(files)


def _remove_stale(folder: Path, name: str) -> None:
    """Remove ``folder/name`` (a file a previous run wrote) if it is a file inside ``folder``."""
    path = folder / name
    try:
        inside = Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(folder))
        if inside and (path.is_symlink() or path.is_file()):
            path.unlink()
    except OSError:
        pass  # a file that cannot be removed stays; nothing is lost


def _install(staging: Path, target: Path, command: str, exists: bool) -> None:
    files = [f for f in _files_under(staging) if f != MARKER]
    (staging / MARKER).write_text(_marker_text(command, files), encoding="utf-8")
    if not exists:
        with interrupts_deferred():
            try:
                os.rename(staging, target)
            except OSError as error:
                raise _cannot_write(target, error) from None
        return
    previous = read_marker(target) or []
    for name in files:  # check every destination before moving anything
        destination = target / name
        if destination.is_dir() and not destination.is_symlink():
            raise KvroofError(f"{destination}: is a folder where kvroof writes a file; move it")
        for parent in PurePosixPath(name).parents:
            holder = target / parent
            if str(parent) != "." and holder.exists() and not holder.is_dir():
                raise KvroofError(f"{holder}: is a file where kvroof writes a folder; move it")
    with interrupts_deferred():
        try:
            for name in [*files, MARKER]:
                destination = target / name
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / name, destination)
        except OSError as error:
            raise _cannot_write(target, error) from None
        for name in sorted(set(previous) - set(files) - {MARKER}):
            _remove_stale(target, name)


@contextmanager
def staged_folder(target: str | Path, *, force: bool, command: str,
                  flag: str = "") -> Iterator[Path]:
    """A new, empty folder to build ``target``'s content in. When the block ends normally it
    becomes ``target`` (see the module docstring); on an error or an interrupt it is removed
    and ``target`` is left as it was. :func:`check_output_folder` runs first."""
    final = Path(target)
    exists = check_output_folder(final, force=force, flag=flag)
    remove_stale_temporaries(final.parent, f".{final.name}.")
    if exists:
        remove_stale_temporaries(final, f"{_TEMP_TAG}-")
    staging = (final / f"{_TEMP_TAG}-{os.getpid()}-{secrets.token_hex(4)}{_TEMP_TAG}" if exists
               else _temp_path(final, "-new"))
    try:
        staging.mkdir()
    except OSError as error:
        raise _cannot_write(final, error) from None
    try:
        yield staging
        _install(staging, final, command, exists)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class OutputFolder:
    """A folder kvroof adds files to over a run (``kvroof measure -o DIR``): checked when
    made (see :func:`check_output_folder`), created on :meth:`create`, its marker listing
    every file added with :meth:`add`."""

    def __init__(self, folder: str | Path, *, force: bool, command: str,
                 flag: str = "") -> None:
        self.path = Path(folder)
        self.command = command
        self._exists = check_output_folder(self.path, force=force, flag=flag, parents=True)
        self._files: list[str] = (read_marker(self.path) or []) if self._exists else []

    def create(self) -> None:
        """Make the folder (and its parents) and its marker."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise KvroofError(
                f"{self.path}: cannot create the output folder ({error.strerror or error})"
            ) from None
        write_text(self.path / MARKER, _marker_text(self.command, self._files))

    def add(self, *paths: Path) -> None:
        """Record ``paths`` (written into the folder) in the marker."""
        self._files += [p.relative_to(self.path).as_posix() for p in paths]
        write_text(self.path / MARKER, _marker_text(self.command, self._files))

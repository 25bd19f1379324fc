"""The spec folders: where the built-in specs live (inside the installed wheel, else the
repository) and which files of a folder are spec files.

The registry (:mod:`kvroof.specs.registry`) reads these folders, and the JSON copy of the
built-in specs (:mod:`kvroof.specs.builtin_cache`) is keyed by the same file list.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kvroof.errors import SpecError

__all__ = ["BUILTIN_FOLDERS", "builtin_files", "builtin_spec_dirs", "not_a_file", "spec_files"]

BUILTIN_FOLDERS: Final = ("hardware_specs", "model_specs", "engine_specs")


def builtin_spec_dirs() -> list[Path]:
    """The folders holding the built-in specs (inside the installed package, else the repo)."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_data"
    if (packaged / "hardware_specs").is_dir():
        return [packaged / folder for folder in BUILTIN_FOLDERS]
    repository = package.parent.parent
    dirs = [repository / folder for folder in BUILTIN_FOLDERS]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise SpecError(f"built-in spec folders not found: {', '.join(missing)}")
    return dirs


SPEC_SUFFIXES: Final = (".yaml", ".yml")


def spec_files(folder: Path) -> Iterator[Path]:
    """Every ``*.yaml``/``*.yml`` entry under ``folder`` (recursively, not following links to
    folders), sorted, folders left out. An entry may still be something other than a regular
    file (a FIFO, a device, a broken link, a symlink loop): :func:`not_a_file` says which, and
    the registry skips it with a warning instead of opening it (a FIFO would block)."""
    yield from sorted(p for p in folder.rglob("*")
                      if p.suffix in SPEC_SUFFIXES and not _is_folder(p))


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a symlink loop on some Pythons
        return False


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (following links): ``"a FIFO"``,
    ``"a device"``, ``"a socket"``, ``"a broken link"``, ``"a symlink loop"``; None for a
    regular file (or a link to one)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symlink loop"
        if path.is_symlink():
            return "a broken link"
        return f"unreadable ({error.strerror or error})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def builtin_files() -> list[tuple[str, Path]]:
    """Every built-in spec file, named relative to the spec folders' parent."""
    return [(path.relative_to(folder.parent).as_posix(), path)
            for folder in builtin_spec_dirs() for path in spec_files(folder)
            if not_a_file(path) is None]

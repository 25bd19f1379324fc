"""The spec folders: where the built-in specs live (inside the installed wheel, else the
repository) and which files of a folder are spec files.

The registry (:mod:`kvroof.specs.registry`) reads these folders, and the JSON copy of the
built-in specs (:mod:`kvroof.specs.builtin_cache`) is keyed by the same file list.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kvroof.errors import SpecError

__all__ = ["BUILTIN_FOLDERS", "builtin_files", "builtin_spec_dirs", "spec_files"]

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


def spec_files(folder: Path) -> Iterator[Path]:
    """Every ``*.yaml``/``*.yml`` file under ``folder`` (recursively), sorted."""
    yield from sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def builtin_files() -> list[tuple[str, Path]]:
    """Every built-in spec file, named relative to the spec folders' parent."""
    return [(path.relative_to(folder.parent).as_posix(), path)
            for folder in builtin_spec_dirs() for path in spec_files(folder)]

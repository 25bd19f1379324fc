"""A JSON copy of the built-in spec files, so that the registry reads them without PyYAML.

Parsing the 80-odd built-in YAML files (and importing PyYAML to do it) was about a tenth of the
command line's start-up. The copy, ``builtin_specs.json`` beside this module, holds each file's
parsed data and a digest of every file's name and bytes. The registry reads the YAML files'
bytes anyway (a few milliseconds), and takes their data from the copy only when the digest
matches; otherwise, an edited or added file for instance, it parses the YAML as before, so the
copy can make start-up slower when it is out of date but never wrong.

``python -m kvroof.specs.builtin_cache`` rewrites the copy after a built-in spec changes; the
test suite fails while it is out of date.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Final

__all__ = ["CACHE_FILE", "BuiltinFile", "cached_data", "digest", "survives_json", "write_cache"]

CACHE_FILE: Final = Path(__file__).resolve().with_name("builtin_specs.json")

BuiltinFile = tuple[str, Path]
"""A built-in spec file: its name relative to the spec folders' parent (``model_specs/x.yaml``,
the same in the repository and in an installed wheel) and its path."""


def digest(contents: list[tuple[str, bytes]]) -> str:
    """A BLAKE2b digest of the files' names and bytes, in order."""
    hasher = hashlib.blake2b(digest_size=20)
    for name, data in contents:
        hasher.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


def survives_json(value: Any) -> bool:
    """Whether ``value`` comes back from JSON with the same values and the same key order."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    back = json.loads(text)
    return bool(back == value and json.dumps(back) == text)


def _read(files: list[BuiltinFile], max_bytes: int) -> list[tuple[str, bytes]] | None:
    from kvroof.errors import SpecError
    from kvroof.files.reading import read_bytes_file

    try:
        return [(name, read_bytes_file(path, max_bytes, "spec files")) for name, path in files]
    except SpecError:
        return None  # unreadable or too large: the YAML reader says why


def cached_data(files: list[BuiltinFile], max_bytes: int) -> dict[str, Any] | None:
    """Each file's data by name, from the copy, when it holds exactly these files with these
    bytes (each at most ``max_bytes``); None otherwise (parse the YAML instead)."""
    contents = _read(files, max_bytes)
    if contents is None:
        return None
    try:
        cache = json.loads(CACHE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cache, dict) or cache.get("digest") != digest(contents):
        return None
    data = cache.get("files")
    if not isinstance(data, dict) or set(data) != {name for name, _ in files}:
        return None
    return data


def write_cache(files: list[BuiltinFile], max_bytes: int, target: Path = CACHE_FILE) -> Path:
    """Parse every file's YAML and write the copy (a temporary file renamed into place)."""
    from kvroof.files.yaml_reading import load_packaged_yaml

    contents = _read(files, max_bytes)
    if contents is None:
        raise OSError("a built-in spec file is unreadable or too large")
    data = {name: load_packaged_yaml(path, max_bytes, "spec files") for name, path in files}
    for name, value in data.items():  # same values in the same order (show prints in order)
        if not survives_json(value):
            raise ValueError(f"{name}: its data does not survive JSON unchanged")
    text = json.dumps({"digest": digest(contents), "files": data}, separators=(",", ":"))
    from kvroof.outputs import write_bytes

    write_bytes(target, (text + "\n").encode("utf-8"))
    return target


def main() -> None:
    from kvroof.specs.folders import builtin_files
    from kvroof.specs.loader import MAX_SPEC_BYTES

    files = builtin_files()
    path = write_cache(files, MAX_SPEC_BYTES)
    print(f"wrote {path} ({len(files)} built-in spec files)", file=sys.stderr)


if __name__ == "__main__":
    main()

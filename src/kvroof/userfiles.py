"""Old import path of :mod:`kvroof.files.reading` and :mod:`kvroof.files.yaml_reading`, kept so
that code importing ``kvroof.userfiles`` still works; new code imports from ``kvroof.files``.
The YAML readers load on first use, as before (PyYAML is imported only then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from kvroof.files.reading import (
    ALIAS_NODE_BUDGET,
    MAX_DEPTH,
    DuplicateKeyError,
    capped_lines,
    check_depth,
    format_size,
    load_json_file,
    read_bytes_file,
    read_text_file,
    unique_keys,
)

if TYPE_CHECKING:
    from kvroof.files.yaml_reading import (
        YAML_LOADERS,
        load_packaged_yaml,
        load_yaml_file,
        load_yaml_text,
    )

__all__ = ["ALIAS_NODE_BUDGET", "MAX_DEPTH", "YAML_LOADERS", "DuplicateKeyError", "capped_lines",
           "check_depth", "format_size", "load_json_file", "load_packaged_yaml", "load_yaml_file",
           "load_yaml_text", "read_bytes_file", "read_text_file", "unique_keys"]

_YAML_NAMES: Final = frozenset({"YAML_LOADERS", "load_packaged_yaml", "load_yaml_file",
                                "load_yaml_text"})

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name in _YAML_NAMES:
            from kvroof.files import yaml_reading

            return getattr(yaml_reading, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

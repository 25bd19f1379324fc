"""Field access on a HuggingFace ``config.json`` with one-line errors naming the file and field
(shared by :mod:`kvroof.specs.hf` and :mod:`kvroof.specs.hf_layers`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvroof.errors import SpecError, short_repr

__all__ = ["HFConfig"]


class HFConfig:
    """Field access on a config dict with errors that name the file and field."""

    def __init__(self, data: Mapping[str, Any], path: Path | None, architecture: str,
                 prefix: str = "") -> None:
        self.data = data
        self.path = path
        self.architecture = architecture
        self.prefix = prefix  # "text_config." when the fields come from a wrapper's text model

    def error(self, field: str, message: str) -> SpecError:
        name = field if field in ("architectures", "quantization_config") or \
            field.startswith("quantization_config.") else self.prefix + field
        return SpecError(message, self.path or "<config dict>", name)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, *alternatives: str) -> int:
        for name in (key, *alternatives):
            value = self.data.get(name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise self.error(name, f"expected an integer, got {short_repr(value)}")
                return value
        names = " or ".join(repr(self.prefix + n) for n in (key, *alternatives))
        raise self.error(key, f"missing field ({names} is needed for {self.architecture})")

    def optional_int(self, key: str, default: int | None = None) -> int | None:
        return self.integer(key) if self.has(key) else default

    def flag(self, key: str, default: bool) -> bool:
        """A true/false field (JSON ``true``/``false``), or ``default`` when absent."""
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {short_repr(value)}")
        return value

    def optional_list(self, key: str) -> list[Any] | None:
        """A list field, or None when absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {short_repr(value)}")
        return value

"""Helpers for the workload tests: an exact word counter and file writers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "data"


class WordCounter:
    """One token per whitespace-separated word: makes hand arithmetic in tests exact."""

    name = "words"
    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
def words() -> WordCounter:
    return WordCounter()


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    def write(records: list[Any], name: str = "data.jsonl") -> Path:
        path = tmp_path / name
        path.write_text(
            "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
        )
        return path

    return write


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[..., Path]:
    def write(value: Any, name: str = "data.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(value, indent=1))
        return path

    return write

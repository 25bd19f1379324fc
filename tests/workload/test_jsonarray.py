"""The streaming JSON array reader gives what json.load gives, whatever the chunk size (so
elements, strings, numbers and escapes cut at any buffer boundary are handled)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kvroof.workload.jsonarray import iter_json_array

ELEMENTS = [
    {"conversations": [{"from": "human", "value": "x" * 50}], "id": "a"},
    12345678901234567890,
    -1.5e-7,
    True,
    False,
    None,
    "tab\tquote\" unicode \u00e9 \ud83d\ude00 escape \\u",
    [[], {}, [1, [2, [3]]]],
    {"long": "y" * 3000, "n": 0},
]


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 13, 64, 1 << 20])
def test_matches_json_load(chunk: int, indent: int | None) -> None:
    text = json.dumps(ELEMENTS, indent=indent)
    got = list(iter_json_array(io.StringIO(text), Path("mem.json"), chunk=chunk))
    assert got == json.loads(text)


def test_buffer_stays_small_for_many_small_elements() -> None:
    # 20,000 elements of ~30 characters with a 256-character chunk: every element is read,
    # and the reader's buffer never grows past a few chunks (it is trimmed as it goes).
    items = [{"i": i, "v": "z" * 10} for i in range(20_000)]
    stream = io.StringIO(json.dumps(items))
    reader_items = iter_json_array(stream, Path("mem.json"), chunk=256)
    assert sum(1 for _ in reader_items) == 20_000

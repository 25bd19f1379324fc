"""The loaded request trace in a notebook (issue 23, item 11): an HTML repr, a one-line text
repr and ``to_frame()`` with SI column names and the prefix each request shares with earlier
ones."""

from __future__ import annotations

import sys
from importlib.util import find_spec

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.records import Workload
from kvroof.workload.requests import (
    MOONCAKE_SLICE,
    RequestTrace,
    load_requests,
    requests_from_workload,
)
from kvroof.workload.trace_frames import trace_columns

needs_pandas = pytest.mark.skipif(
    find_spec("pandas") is None,
    reason="pandas is not installed: `pip install 'kvroof[pandas]'` runs this test")


@pytest.fixture(scope="module")
def trace() -> RequestTrace:
    return load_requests(MOONCAKE_SLICE)


def seen_prefix(trace: RequestTrace) -> list[int]:
    """Tokens of each prompt in leading blocks an earlier request named, block by block."""
    seen: set[int] = set()
    out = []
    for i in range(len(trace)):
        ids, ends = trace.blocks(i)
        shared = 0
        for block, end in zip(ids.tolist(), ends.tolist(), strict=True):
            if block not in seen:
                break
            shared = end
        seen.update(ids.tolist())
        out.append(shared)
    return out


def test_html_repr(trace: RequestTrace) -> None:
    page = trace._repr_html_()
    assert page.startswith('<table class="kvroof">') and "918 requests" in page
    assert "to_frame()" in page and "4.95 min" in page  # arrivals over five minutes
    assert "e+0" not in page  # counts with separators, not 1.353e+04
    assert f"max {int(trace.input_tokens.max()):,}" in page


def test_text_repr_is_one_short_line(trace: RequestTrace) -> None:
    text = repr(trace)
    assert "\n" not in text and len(text) < 300
    assert text.startswith("<RequestTrace mooncake_conversation_5min: 918 requests")


def test_columns(trace: RequestTrace) -> None:
    columns = trace_columns(trace)
    assert list(columns) == ["input_tokens", "output_tokens", "arrival_time_s", "group_id",
                             "record", "blocks", "preload_blocks", "preloaded_tokens",
                             "seen_prefix_tokens"]
    assert columns["seen_prefix_tokens"].tolist() == seen_prefix(trace)
    assert np.array_equal(columns["blocks"], np.diff(trace.block_offsets))
    assert int(columns["seen_prefix_tokens"].sum()) > 0


def test_preloaded_tokens_of_a_table() -> None:
    work = Workload.from_columns([10, 20, 30], [1000, 0, 600], output_tokens=[5, -1, 7])
    trace = requests_from_workload(work, "table", block_tokens=256, preloaded=True)
    columns = trace_columns(trace)
    assert columns["preloaded_tokens"].tolist() == [1000, 0, 600]  # K, in blocks of 256
    assert columns["preload_blocks"].tolist() == [4, 0, 3]
    assert "arrival_time_s" not in columns
    assert "none in the source" in trace._repr_html_()


@needs_pandas
def test_frame(trace: RequestTrace) -> None:
    frame = trace.to_frame()
    assert len(frame) == 918 and frame.attrs["record_unit"] == "line"
    assert list(frame.input_tokens[:3]) == trace.input_tokens[:3].tolist()
    assert frame["arrival_time_s"].iloc[-1] == trace.arrival_time[-1]


def test_frame_without_pandas(trace: RequestTrace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(KvroofError, match=r"pip install 'kvroof\[pandas\]'"):
        trace.to_frame()


def test_empty_trace() -> None:
    empty = load_requests(MOONCAKE_SLICE).take(np.arange(0))
    assert "0 requests" in empty._repr_html_() and "0 requests" in repr(empty)

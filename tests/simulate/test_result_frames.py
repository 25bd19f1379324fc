"""SimResult in a notebook (issue 23, item 11): an HTML repr with the summary, a short text repr,
``to_frame("requests" | "iterations" | "summary")`` with SI column names, and the same names
heading ``requests.csv`` and ``iterations.csv``; long runs in hours, not 6.001e+04 s."""

from __future__ import annotations

import csv
import dataclasses
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.simulate import SimSettings, simulate
from kvroof.simulate.metrics import ITERATION_COLUMNS, REQUEST_COLUMNS, SimResult
from kvroof.simulate.output import write_result
from kvroof.simulate.result_frames import summary_lines
from tests.simulate.helpers import REG, mooncake, paper_testbed

needs_pandas = pytest.mark.skipif(
    find_spec("pandas") is None,
    reason="pandas is not installed: `pip install 'kvroof[pandas]'` runs this test")

REQUEST_HEADER = ["request", "replica", "arrival_s", "first_token_s", "finish_s",
                  "input_tokens", "output_tokens", "prompt_tokens", "hbm_hit_tokens",
                  "host_hit_tokens", "tier_hit_tokens", "split_recomputed_tokens",
                  "computed_tokens", "preemptions", "ttft_s", "tpot_s", "e2e_s"]
ITERATION_HEADER = ["replica", "start_s", "duration_s", "iterations", "prefill_tokens",
                    "decode_tokens", "prefill_chunks", "load_s", "busy_s", "flops", "power_w"]


@pytest.fixture(scope="module")
def result() -> SimResult:
    dep = paper_testbed()
    return simulate(mooncake(60), [dep, dep], SimSettings(), registry=REG)


def test_html_repr_shows_the_summary(result: SimResult) -> None:
    page = result._repr_html_()
    assert page.startswith('<table class="kvroof">')
    assert "60 requests" in page and "to_frame(" in page
    assert "TTFT" in page and "tokens per iteration" in page
    assert "2 x llama-3.1-70b" in page


def test_text_repr_is_one_short_line(result: SimResult) -> None:
    text = repr(result)
    assert "\n" not in text and len(text) < 300
    assert "60 requests" in text and "2 replicas" in text


@needs_pandas
def test_frames_have_si_names(result: SimResult) -> None:
    requests = result.to_frame()
    assert list(requests.columns) == REQUEST_HEADER and len(requests) == 60
    assert np.array_equal(requests["ttft_s"].to_numpy(), result.requests["ttft"])
    assert requests["hbm_hit_tokens"].dtype.kind == "i"
    iterations = result.to_frame("iterations")
    assert list(iterations.columns) == ITERATION_HEADER
    assert iterations["iterations"].dtype.kind == "i"
    assert int(iterations["iterations"].sum()) == result.summary["iterations"]
    summary = result.to_frame("summary")
    assert len(summary) == 1 and summary.loc[0, "label"] == result.label
    assert summary.loc[0, "ttft_s_p50"] == result.summary["ttft_s"]["p50"]


def test_frame_kinds_are_checked(result: SimResult) -> None:
    with pytest.raises(KvroofError, match="to_frame: expected one of 'requests'"):
        result.to_frame("request")


def test_frame_without_pandas(result: SimResult, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(KvroofError, match=r"pip install 'kvroof\[pandas\]'"):
        result.to_frame("summary")


def test_csv_headers_carry_units(result: SimResult, tmp_path: Path) -> None:
    requests, iterations, _ = write_result(tmp_path, result)
    with requests.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == REQUEST_HEADER and len(rows) == 60
    assert float(rows[0]["ttft_s"]) == result.requests["ttft"][0]
    assert iterations.read_text().splitlines()[0].split(",") == ITERATION_HEADER
    # every column of the library is in the files, under its name with units
    assert len(REQUEST_HEADER) == len(REQUEST_COLUMNS)
    assert len(ITERATION_HEADER) == len(ITERATION_COLUMNS)


def test_long_runs_read_in_hours(result: SimResult) -> None:
    summary = {**result.summary, "makespan_s": 60_010.0,
               "ttft_s": {**result.summary["ttft_s"], "p99": 98.0}}
    lines = dict(summary_lines(dataclasses.replace(result, summary=summary)))
    assert "completed in 16.7 h" in lines["requests"]
    assert lines["simulated"].startswith("16.7 h in ")
    assert "p99 1.63 min" in lines["TTFT"]
    assert "e+0" not in "".join(lines.values())

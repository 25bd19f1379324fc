"""Every trace shipped with kvroof (the sample files under ``examples/`` and the package's
``workload/data``) loads and replays in a small simulation (issue 24, item 12)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.simulate import prepare_trace, simulate
from kvroof.specs.registry import Registry
from kvroof.workload.requests import MOONCAKE_SLICE, load_requests
from kvroof.workload.tokens import ApproximateTokensWarning

from .conftest import REPO, SAMPLES

REG = Registry(use_env=False)
PACKAGE_DATA = MOONCAKE_SLICE.parent
SHIPPED = sorted(
    [path for path in (REPO / "examples").rglob("*sample*") if path.is_file()]
    + [path for path in PACKAGE_DATA.iterdir()
       if path.is_file() and path.name not in ("README.md", "LICENSE-APACHE")]
)
REQUESTS = 40
"""At most this many requests of each trace are simulated (the Mooncake slice has 918)."""


def test_the_shipped_traces_are_found() -> None:
    names = {path.name for path in SHIPPED}
    assert names >= {"sharegpt_sample.json", "docqa_sample.jsonl", "mooncake_sample.jsonl",
                     "table_sample.csv", MOONCAKE_SLICE.name}, names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_every_shipped_trace_replays(path: Path) -> None:
    """Its own arrival times and output lengths where it has them (checked: times that go
    backwards are an error); a request rate and output lengths where it has none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximateTokensWarning)  # text counted by heuristic
        trace = load_requests(path)
    assert len(trace) > 0 and trace.skipped == 0
    trace = trace.take(range(min(REQUESTS, len(trace))))
    timed = trace.arrival_time is not None
    if timed:
        trace.check_times()
    trace = prepare_trace(trace, rps=None if timed else 2.0,
                          output_tokens=None if trace.output_known.all() else "exp:20")
    dep = deployment("llama-3.1-8b", system="dgx-h100", registry=REG)
    result = simulate(trace, [dep], check=True)
    assert result.summary["requests"] == len(trace)


def test_table_sample_replays_as_is(capsys: pytest.CaptureFixture[str]) -> None:
    """The table sample has times and output lengths: ``kvroof simulate`` replays it with no
    arrival or output flag (its timestamps went backwards: "row 4: arrival time 1.5 s is
    earlier than the one before it")."""
    code = main(["simulate", str(SAMPLES / "table_sample.csv"), "--model", "llama-3.1-8b",
                 "--system", "dgx-h100", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary["requests"] == 8 and summary["skipped"] == 0

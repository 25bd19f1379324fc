"""Routing is observable: per-replica requests and hit rates in the result, the text output,
--json, and the flags' one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvroof.cli import main
from kvroof.simulate.result_frames import summary_lines
from kvroof.simulate.runner import prepare_trace, simulate
from kvroof.simulate.settings import ROUTERS, SimSettings
from tests.simulate.helpers import mooncake, paper_testbed

TESTBED = ["--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8"]


@pytest.mark.parametrize("router", ROUTERS)
def test_per_replica_counts_add_up(router: str) -> None:
    """Per-replica counts against a brute-force count of each request's replica; they add up
    to the requests; shares add up to 1; each replica's HBM hit rate is its HBM-hit tokens over
    its prompt tokens, summed here request by request."""
    trace = prepare_trace(mooncake(120), time_scale=2.0)
    result = simulate(trace, [paper_testbed()] * 3, SimSettings(router=router))  # type: ignore[arg-type]
    s = result.summary
    per = s["per_replica"]
    replica = result.requests["replica"].tolist()
    assert [r["requests"] for r in per] == [replica.count(i) for i in range(3)]
    assert sum(r["requests"] for r in per) == s["requests"] == 120
    assert sum(r["share"] for r in per) == pytest.approx(1.0)
    assert s["replica_share_max"] == max(r["share"] for r in per)
    assert s["replica_imbalance"] == pytest.approx(3 * max(replica.count(i) for i in range(3))
                                                   / 120)
    req = result.requests
    parts = ("hbm_hit", "host_hit", "tier_hit", "split_recomputed", "computed")
    for i in range(3):
        mine = [k for k, r in enumerate(replica) if r == i]
        prompt = sum(float(req[p][k]) for p in parts for k in mine)
        hbm = sum(float(req["hbm_hit"][k]) for k in mine)
        expected = hbm / prompt if prompt else np.nan
        assert per[i]["hit_rate_hbm"] == pytest.approx(expected, nan_ok=True)
    assert not any(isinstance(v, list) for v in result.row().values())
    line = dict(summary_lines(result))["routing"]
    assert line.startswith(router) and "requests per replica: max" in line


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_replicas_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", *TESTBED, "--replicas", "3", "--requests", "40",
                         "--router", "scoring", "--router-weights", "no-hit-lru=2", "--quiet")
    assert code == 0, err
    assert "routing" in out and "scoring (queue 1, kv-utilization 1, prefix 1" in out
    assert "no-hit-lru 2" in out
    table = [line for line in out.splitlines() if line.startswith(("0 ", "1 ", "2 "))]
    assert len(table) == 3 and "host DRAM hits" in out
    code, out, _ = run(capsys, "simulate", *TESTBED, "--replicas", "3", "--requests", "40",
                       "--router", "least-loaded", "--json",
                       "--compare", "router=scoring,router-weights=prefix=3/queue=1")
    payload = json.loads(out)
    assert code == 0
    assert [len(p["summary"]["per_replica"]) for p in payload] == [3, 3]
    assert sum(r["requests"] for r in payload[0]["summary"]["per_replica"]) == 40
    assert payload[1]["settings"]["router_weights"]["prefix"] == 3
    assert payload[1]["settings"]["router_weights"]["queue"] == 1


@pytest.mark.parametrize(("flags", "message"), [
    (["--router", "scoring", "--router-weights", "bogus=1"],
     "--router-weights: unknown scorer 'bogus'"),
    (["--router", "scoring", "--router-weights", "prefix=-2"],
     "--router-weights: prefix expected a non-negative number"),
    (["--router", "scoring", "--router-weights", "prefix=1,prefix=2"],
     "--router-weights: prefix given twice"),
    (["--router-weights", "prefix=2"], "--router-weights: apply to the scoring router"),
    (["--compare", "router=scoring,router-weights=prefix=x"], "--compare "),
])
def test_cli_weight_errors(capsys: pytest.CaptureFixture[str], flags: list[str],
                           message: str) -> None:
    code, _, err = run(capsys, "simulate", *TESTBED, "--requests", "10", *flags)
    assert code == 2 and message in err and err.count("\n") == 1

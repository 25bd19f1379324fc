"""``kvroof simulate --stages``: the per-stage table and JSON, and one-line errors (exit 2)
naming the flag."""

from __future__ import annotations

import json

import pytest

from kvroof.cli import main

TESTBED = ["--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8"]


def test_staged_run_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", *TESTBED, "--stages", "2x10,4x10", "--stage-interval", "1.5 s",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    stages = payload["summary"]["stages"]
    assert [s["requests"] for s in stages] == [20, 40]  # int(2 x 10), int(4 x 10)
    assert payload["summary"]["requests"] == 60
    # drained: stage 2 starts 1.5 s after stage 1's last request finished
    assert stages[1]["start_s"] == pytest.approx(stages[0]["end_s"] + 1.5)
    assert "staged run: 2 stages (2x10, 4x10), drained, 1.5 s between stages" in \
        payload["notes"]
    code = main(["simulate", *TESTBED, "--stages", "2x10,4x10", "--no-drain", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    table = out[out.index("per stage:"):].splitlines()
    assert table[1].split()[:3] == ["stage", "start", "end"]
    assert table[3].split()[:2] == ["2x10", "0"] and table[4].split()[:3] == ["4x10", "10", "s"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--stages", "5x"], "--stages: expected RATExSECONDS"),
    (["--stages", "0x60"], "--stages: the rate of stage '0x60' must be a positive number"),
    (["--stages", "5x-1"], "--stages: the duration of stage '5x-1' must be a positive"),
    (["--stages", "0.5x1"], r"--stages: stage 1 \(0.5x1\) holds int\(0.5 x 1\) = 0"),
    (["--stages", "100x100"], "--stages: the stages hold 10,000 requests but the trace has"),
    (["--stages", "2x10", "--rps", "3"], "--stages: .* give no --rps"),
    (["--stages", "2x10", "--users", "3"], "--stages: .* give no --users"),
    (["--stages", "2x10", "--time-scale", "2"], "--stages: .* give no --time-scale"),
    (["--stages", "2x10", "--think-time", "1 s"], "--think-time: applies to a closed loop"),
    (["--stages", "2x10", "--stage-interval", "-1 s"], "--stage-interval: .* not negative"),
    (["--stages", "2x10", "--stage-interval", "1 GB"], "--stage-interval: "),
    (["--stage-interval", "2 s"], r"--stage-interval: applies to a staged run \(--stages\)"),
    (["--no-drain"], r"--no-drain: applies to a staged run"),
    (["--drain"], r"--drain: applies to a staged run"),
    (["--stage-arrival", "constant"], r"--stage-arrival: applies to a staged run"),
])
def test_stage_flag_errors(capsys: pytest.CaptureFixture[str], extra: list[str],
                           message: str) -> None:
    code = main(["simulate", *TESTBED, *extra, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("kvroof: error: ")
    assert __import__("re").search(message, err), err

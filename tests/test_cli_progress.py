"""Long steps say so, text reads in human units (issue 23, item 14): ``kvroof workload stats``
and ``kvroof simulate`` print progress lines on stderr while they read a large trace or write
large CSVs (or any step past a second), never with ``--quiet`` or ``--json``; durations read
"16.7 h" and counts "13,530"; ``simulate --compare -o`` draws one timeline of every variant."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kvroof.cli import main, slow_steps
from kvroof.display import count, duration

TESTBED = ["--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8"]
SAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "data" /
             "sharegpt_sample.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0 s"), (0.0192, "19.2 ms"), (48.88, "48.88 s"), (310.0, "5.17 min"),
    (3599.0, "1 h"), (60_010.0, "16.7 h"), (3 * 86400.0, "3 d"), (float("inf"), "inf s")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(("value", "text"), [
    (13530, "13,530 tokens"), (13530.0, "13,530 tokens"), (11.5, "11.5 tokens"),
    (156.99, "157 tokens"), (0, "0 tokens"), (float("nan"), "- tokens")])
def test_count(value: float, text: str) -> None:
    assert count(value, "tokens") == text


def test_a_quick_small_step_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    with slow_steps.slow_step("reading x"):
        pass
    assert capsys.readouterr().err == ""


def test_a_large_step_says_so_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    with slow_steps.slow_step("reading big.jsonl (58 MB)", large=True) as step:
        assert capsys.readouterr().err == "reading big.jsonl (58 MB) ...\n"
        step.note = "183,600 requests"
    err = capsys.readouterr().err
    assert err.startswith("reading big.jsonl (58 MB) done in ") and err.endswith(
        ": 183,600 requests\n")


def test_a_slow_step_says_so_after_a_while(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slow_steps, "AFTER_SECONDS", 0.05)
    with slow_steps.slow_step("drawing the figures"):
        time.sleep(0.5)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "drawing the figures ..." and lines[1].startswith(
        "drawing the figures done in ")
    with slow_steps.slow_step("drawing the figures", large=True, quiet=True):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""


def test_a_failing_step_does_not_say_done(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), slow_steps.slow_step("reading x", large=True):
        raise RuntimeError("bad")
    assert capsys.readouterr().err == "reading x ...\n"


def test_simulate_reading_and_writing_say_so(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slow_steps, "LARGE_FILE_BYTES", 1000.0)  # the 228 kB slice is large
    monkeypatch.setattr(slow_steps, "LARGE_ROWS", 10)
    code, _, err = run(capsys, "simulate", *TESTBED, "--requests", "30", "-o",
                       str(tmp_path / "out"))
    assert code == 0
    lines = err.splitlines()
    assert lines[0] == "reading mooncake_conversation_5min.jsonl (228 kB) ..."
    assert lines[1].startswith("reading mooncake_conversation_5min.jsonl (228 kB) done in ")
    assert lines[1].endswith(": 918 requests")
    assert any(line.startswith("writing CSVs (") and line.endswith("rows) ...") for line in lines)
    for quiet in (["--quiet"], ["--json"]):
        code, _, err = run(capsys, "simulate", *TESTBED, "--requests", "30", *quiet, "-o",
                           str(tmp_path / "out"), "--force")
        assert code == 0 and err == ""


def test_workload_stats_reading_says_so(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slow_steps, "LARGE_FILE_BYTES", 100.0)
    code, out, err = run(capsys, "workload", "stats", SAMPLE)
    assert code == 0 and "requests: 8" in out
    lines = [line for line in err.splitlines() if not line.startswith("kvroof: warning")]
    assert lines[0].startswith("reading sharegpt_sample.json (") and lines[0].endswith(" ...")
    assert " done in " in lines[1] and lines[1].endswith(": 8 requests")
    code, out, err = run(capsys, "workload", "stats", SAMPLE, "--json")
    assert code == 0 and json.loads(out)["count"] == 8 and "reading" not in err


def test_compare_draws_one_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "out"
    code, _, _ = run(capsys, "simulate", *TESTBED, "--requests", "20", "--quiet", "-o",
                     str(folder), "--compare", "scheduler=utilization-aware")
    assert code == 0
    names = {p.name for p in folder.iterdir()}
    assert "timeline.png" in names and "compare-1-requests.csv" in names
    assert not any(name.endswith("-timeline.png") for name in names)

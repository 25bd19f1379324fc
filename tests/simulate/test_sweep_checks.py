"""`kvroof sweep` checks every grid point before the first one runs (issue 24, item 5): a bad
arrival value, seed, output-length spec or request count in the last point is one line naming
the config file, the point (its values) and the key, and no simulation has run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kvroof.cli import main
from kvroof.simulate import runner

CONFIG = """
model: llama-3.1-70b
hardware: paper-testbed:8
arrivals: {arrivals}
grid: {grid}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:  # a sweep whose points failed ends with status 1
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def simulations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the simulations that start (none may, when a point is bad)."""
    calls: list[int] = []
    real = runner.simulate

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "simulate", counted)
    return calls


@pytest.mark.parametrize(("arrivals", "grid", "message"), [
    ("{requests: 20}", "{rps: [2, -1]}",
     r"grid point 1 \(rps=-1\): rps: expected a positive number"),
    ("{requests: 20}", "{rps: [2, fast]}", r"grid point 1 \(rps=fast\): rps: expected a posit"),
    ("{requests: 20}", "{time_scale: [1, 0]}",
     r"grid point 1 \(time_scale=0\): time_scale: expected a positive number"),
    ("{requests: 20, rps: 2}", "{seed: [1, -1]}",
     r"grid point 1 \(seed=-1\): seed: expected a non-negative integer, got -1"),
    ("{requests: 20, rps: 2}", "{seed: [1, 2.5]}",
     r"grid point 1 \(seed=2.5\): seed: expected a non-negative integer, got 2.5"),
    ("{requests: 20, rps: 2}", "{seed: [1, abc]}", r"grid point 1 \(seed=abc\): seed: "),
    ("{requests: 20, rps: 2}", '{output_tokens: ["exp:20", "exp:0"]}',
     r"grid point 1 \(output_tokens=exp:0\): output_tokens: expected a positive integer N"),
    ("{requests: 20, rps: 2}", '{output_tokens: [20, "lots"]}',
     r"grid point 1 \(output_tokens=lots\): output_tokens: "),
    ("{requests: 20, rps: 2}", "{output_tokens: [20, 100000000000000000000000]}",
     r"grid point 1 \(output_tokens=100000000000000000000000\): output_tokens: "),
    # a non-integer request count was cut to an integer (1.5) or gave a traceback ("many")
    ("{rps: 2}", "{requests: [20, 1.5]}",
     r"grid point 1 \(requests=1.5\): requests: expected a positive integer, got 1.5"),
    ("{rps: 2}", "{requests: [20, many]}",
     r"grid point 1 \(requests=many\): requests: expected a positive integer, got 'many'"),
    ("{rps: 2}", "{requests: [20, 0]}", r"grid point 1 \(requests=0\): requests: "),
    ("{requests: 20, rps: 2, arrival: gamma}", "{burstiness: [1, -3]}",
     r"grid point 1 \(burstiness=-3\): burstiness: expected a positive number"),
    ("{requests: 20, rps: 2}", "{arrival: [poisson, weibull]}",
     r"grid point 1 \(arrival=weibull\): arrival: expected poisson or gamma"),
    ("{requests: 20}", "{users: [2, 0]}",
     r"grid point 1 \(users=0\): users: expected a positive integer"),
    ("{requests: 20, users: 2}", '{think_time: ["1 s", "-1 s"]}',
     r"grid point 1 \(think_time=-1 s\): think_time: .*not negative"),
    ("{requests: 20, rps: 2}", '{prefix_caching: [true, "no"]}',
     r"grid point 1 \(prefix_caching=no\): prefix_caching: expected true or false"),
    # a tier the system does not have (checked when the replicas' resources are built)
    ("{requests: 20, rps: 2}", "{tier: [null, nvme-ssd]}",
     r"grid point 1 \(tier=nvme-ssd\): tier: paper-testbed-8x-h100 has no tier"),
])
def test_a_bad_last_point_is_found_before_any_runs(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, simulations: list[int],
        arrivals: str, grid: str, message: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(CONFIG.format(arrivals=arrivals, grid=grid))
    code, out, err = run(capsys, "sweep", str(config), "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"kvroof: error: {config}: grid point "), err
    assert re.search(message, err), err
    assert simulations == [], "a point ran before every point was checked"


def test_every_bad_point_is_counted(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    simulations: list[int]) -> None:
    """The first bad point is shown; how many others are bad is said on the same line."""
    config = tmp_path / "sweep.yaml"
    config.write_text(CONFIG.format(arrivals="{requests: 20}", grid="{rps: [2, -1, 0, -5]}"))
    code, _, err = run(capsys, "sweep", str(config), "--quiet")
    assert code == 2 and err.count("\n") == 1, err
    assert "grid point 1 (rps=-1): rps: " in err and "(and 2 more bad points)" in err, err
    assert simulations == []


def test_the_library_checks_every_point() -> None:
    """check_points raises for the bad point without running anything; run_point refuses a
    bad request count with the same one-line error (not a ValueError from int())."""
    from kvroof.errors import KvroofError
    from kvroof.simulate.sweep import SweepConfig, check_points, points, run_point

    config = SweepConfig(model="llama-3.1-70b", arrivals={"rps": 2},
                         grid={"requests": [10, "ten"]})
    grid = points(config)
    with pytest.raises(KvroofError, match=r"grid point 1 \(requests=ten\): requests: "):
        check_points(grid)
    with pytest.raises(KvroofError, match=r"requests: expected a positive integer"):
        run_point(grid[1])


SHAREGPT = Path(__file__).resolve().parents[2] / "examples" / "data" / "sharegpt_sample.json"


@pytest.mark.parametrize(("trace", "arrivals", "grid", "message"), [
    ("missing.jsonl", "{rps: 2}", "{seed: [1, 2]}", r"sweep\.yaml: \S*missing\.jsonl: "),
    # ShareGPT has no timestamps and no output lengths: every point would fail as it ran
    (str(SHAREGPT), '{output_tokens: "exp:20"}', "{seed: [1], time_scale: [1, 2]}",
     r"grid point 0 \(seed=1, time_scale=1\): \S+sharegpt_sample.json: the trace has no "
     r"arrival times; give rps or users"),
    (str(SHAREGPT), "{rps: 2}", "{seed: [1, 2]}",
     r"grid point 0 \(seed=1\): \S+sharegpt_sample.json: output length unknown \(2 "
     r"request\(s\)\); give output_tokens"),
])
def test_the_trace_is_checked_before_any_runs(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, simulations: list[int],
        trace: str, arrivals: str, grid: str, message: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(f"trace: {trace}\n" + CONFIG.format(arrivals=arrivals, grid=grid))
    code, _, err = run(capsys, "sweep", str(config), "--quiet", "--jobs", "2")
    lines = [line for line in err.splitlines() if "warning" not in line]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"kvroof: error: {config}: ") and re.search(message, err), err
    assert simulations == []

"""Sweeps survive failing points (issue 23, item 13): a point's error, locally or on Dask, is
one line naming the point; the finished rows are written (``sweep.csv``) beside the failed
points (``failed.csv``); the sweep exits with status 1 and no traceback. ``--timeout`` ends a
stalled point (locally) or a stalled cluster (Dask) with a line that says so."""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path
from typing import Any

import pytest

from kvroof.cli import main
from kvroof.simulate import runner

# the second point's KV space (64 tokens per GPU) holds none of the trace's requests: an
# error only the simulation finds (it depends on the trace)
FAILING = """
model: llama-3.1-70b
hardware: paper-testbed:8
arrivals: {requests: 20, rps: 4, output_tokens: "exp:20", seed: 1}
grid:
  kv_tokens: [200000, 64, 100000]
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failing_point_keeps_the_finished_rows(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, jobs: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    folder = tmp_path / "out"
    code, out, err = run(capsys, "sweep", str(config), "--quiet", "--jobs", jobs,
                         "-o", str(folder))
    assert code == 1, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert any(re.fullmatch(r"kvroof: grid point 1 \(kv_tokens=64\) failed: .*needs [\d,]+ "
                            r"tokens of KV but the largest replica's KV space holds 64.*", line)
               for line in lines), err
    assert lines[-1].startswith("kvroof: error: 1 of 3 grid points failed"), err
    rows = read_csv(folder / "sweep.csv")
    assert [row["point"] for row in rows] == ["0", "2"]
    assert [row["kv_tokens"] for row in rows] == ["200000", "100000"]
    failed = read_csv(folder / "failed.csv")
    assert [(row["point"], row["kv_tokens"]) for row in failed] == [("1", "64")]
    assert "largest replica's KV space holds 64" in failed[0]["error"]
    assert "200000" in out and "100000" in out  # the finished rows are printed too


def test_an_unexpected_error_in_a_point_is_one_line(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only kvroof's own errors: any exception of a point is caught and named."""
    real = runner.simulate

    def broken(trace: Any, deps: Any, settings: Any, **kwargs: Any) -> Any:
        if settings.kv_tokens == 100000:
            raise RuntimeError("something broke")
        return real(trace, deps, settings, **kwargs)

    monkeypatch.setattr(runner, "simulate", broken)
    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    code, out, err = run(capsys, "sweep", str(config), "--quiet", "--json")
    assert code == 1 and "Traceback" not in err
    assert "kvroof: grid point 2 (kv_tokens=100000) failed: RuntimeError: something broke\n" \
        in err, err
    assert err.endswith("kvroof: error: 2 of 3 grid points failed\n"), err
    assert '"kv_tokens": 200000' in out


def test_a_failing_point_on_dask_keeps_the_finished_rows(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    folder = tmp_path / "out"
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        code, _, err = run(capsys, "sweep", str(config), "--quiet", "--dask",
                           cluster.scheduler_address, "-o", str(folder))
    assert code == 1 and "Traceback" not in err, err
    assert "kvroof: grid point 1 (kv_tokens=64) failed: " in err, err
    assert [row["point"] for row in read_csv(folder / "sweep.csv")] == ["0", "2"]
    assert [row["point"] for row in read_csv(folder / "failed.csv")] == ["1"]


def test_a_stalled_dask_cluster_ends_at_the_timeout(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """A cluster with no workers never runs a point: --timeout ends the wait, says why."""
    distributed = pytest.importorskip("distributed")
    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    folder = tmp_path / "out"
    with distributed.LocalCluster(processes=False, n_workers=0,
                                  dashboard_address=None) as cluster:
        start = time.monotonic()
        code, _, err = run(capsys, "sweep", str(config), "--quiet", "--dask",
                           cluster.scheduler_address, "--timeout", "1", "-o", str(folder))
        took = time.monotonic() - start
    assert code == 1 and "Traceback" not in err, err
    assert took < 15, took
    assert re.search(r"kvroof: no grid point finished within 1 s on the Dask cluster at \S+ "
                     r"\(it has no workers\); 3 points did not finish", err), err
    failed = read_csv(folder / "failed.csv")
    assert [row["point"] for row in failed] == ["0", "1", "2"]
    assert all("no grid point finished within 1 s" in row["error"] for row in failed)
    assert read_csv(folder / "sweep.csv") == []


def test_a_stalled_point_ends_at_the_timeout(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    """Locally --timeout is per point: the slow point's worker is stopped, the others run."""
    config = tmp_path / "sweep.yaml"
    config.write_text("""
model: llama-3.1-70b
hardware: paper-testbed:8
arrivals: {rps: 50, output_tokens: "2000", seed: 1}
simulation: {fast_forward: false, max_num_seqs: 1}
grid:
  requests: [2, 900]
""")  # 900 requests of 2,000 tokens one at a time, every iteration stepped: minutes
    folder = tmp_path / "out"
    start = time.monotonic()
    code, _, err = run(capsys, "sweep", str(config), "--quiet", "--timeout", "5",
                       "-o", str(folder))
    took = time.monotonic() - start
    assert code == 1 and "Traceback" not in err, err
    assert "kvroof: grid point 1 (requests=900) failed: timed out after 5 s (--timeout)\n" \
        in err, err
    assert took < 30, took
    assert [row["requests"] for row in read_csv(folder / "sweep.csv")] == ["2"]
    assert [row["point"] for row in read_csv(folder / "failed.csv")] == ["1"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_timeout_flag_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                             value: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    code, _, err = run(capsys, "sweep", str(config), f"--timeout={value}")
    assert code == 2 and err.count("\n") == 1, err
    assert "--timeout: expected a positive number of seconds, got " in err, err


def test_run_sweep_returns_the_rows_and_the_failed_points(tmp_path: Path) -> None:
    from kvroof.simulate.sweep import load_sweep_config, run_sweep

    config = tmp_path / "sweep.yaml"
    config.write_text(FAILING)
    done: list[tuple[int, int]] = []
    result = run_sweep(load_sweep_config(config), progress=lambda d, t: done.append((d, t)))
    assert [row["point"] for row in result.rows] == [0, 2]
    assert [(row["point"], row["kv_tokens"]) for row in result.failed] == [(1, 64)]
    assert "KV space holds 64" in result.failed[0]["error"]
    assert done == [(1, 3), (2, 3), (3, 3)]

"""`kvroof plan --dask ADDRESS` and ``kvroof.plan(..., dask=ADDRESS)``: the simulations of every
round run on an existing Dask cluster (here a ``distributed.LocalCluster`` in this process),
with the same results as here; a failed simulation is named by its candidate, arm and rate
while the other candidates' plans are kept; an unreachable cluster, and --dask with --jobs,
are one-line errors (kvroof sweep's rules)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import kvroof
from kvroof.cli import main
from kvroof.errors import KvroofError
from tests.plan.test_cli import TINY

SUMMARY = kvroof.plan.WorkloadSummary(2000, 0.8, 10, requests=120, output_tokens="exp:32")
SLO = {"slo_ttft": 0.2, "slo_tpot": 0.02}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    distributed = pytest.importorskip(
        "distributed", reason="the 'distributed' extra (kvroof[distributed]) is not installed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as local:
        yield local


def _points(result: Any) -> list[Any]:
    """Every simulated point of every arm, wall times apart (they differ run to run)."""
    out = []
    for cand in result.to_json()["candidates"]:
        for arm in ("without", "with_offload"):
            out.append([{**p, "wall_s": 0} for p in cand[arm]["points"]])
        out.append(cand["verdict"])
    return out


def test_a_plan_on_dask_is_the_plan_here(cluster: Any) -> None:
    # the reference is the same plan run in this process: the cluster must change where the
    # simulations run, not what they find
    here = kvroof.plan("llama-3.2-1b", ["h100", "h200"], SUMMARY, **SLO)
    there = kvroof.plan("llama-3.2-1b", ["h100", "h200"], SUMMARY, **SLO,
                        dask=cluster.scheduler_address)
    assert there.simulations == here.simulations > 0
    assert _points(there) == _points(here)


def test_cli_on_dask(capsys: pytest.CaptureFixture[str], cluster: Any) -> None:
    code = main([*TINY, "--json", "--quiet", "--dask", cluster.scheduler_address])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    import json

    on_dask = json.loads(out)
    here = kvroof.plan("llama-3.2-1b", ["h100"], SUMMARY, **SLO)  # TINY's inputs, here
    assert on_dask["simulations"] == here.simulations
    assert [c["verdict"] for c in on_dask["candidates"]] == \
        [c["verdict"] for c in here.to_json()["candidates"]]


def test_a_failed_point_on_dask_is_named_and_the_others_kept(
        capsys: pytest.CaptureFixture[str], cluster: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kvroof.plan.simulation as simulation

    real = simulation._point
    failed_at: list[float] = []

    def failing(job: Any, trace: Any, registry: Any = None) -> Any:
        # the cluster's workers are threads of this process: they see this stand-in
        if job.dep.accelerator.name == "h200" and job.settings.cache_policy != "recompute":
            failed_at.append(job.rps)
            raise RuntimeError("a test failure")
        return real(job, trace, registry)

    monkeypatch.setattr(simulation, "_point", failing)
    with pytest.raises(SystemExit) as stop:
        main([*TINY, "--candidate", "h200", "--quiet", "--dask", cluster.scheduler_address])
    out, err = capsys.readouterr()
    assert stop.value.code == 1 and "Traceback" not in err
    # the h200's searches with offloading all start at the rate found without it
    # (kvroof.plan.run) and fail in the same round; the first of them, the system's own host
    # memory, is named with its arm and rate
    assert failed_at and len(set(failed_at)) == 1
    assert "\nverdict    Leave it off" in out  # the h100's plan is kept
    assert err.startswith("kvroof: error: --candidate h200:1x1: a simulation failed: with "
                          "offloading ("), err
    assert err.endswith(f" per replica) at {failed_at[0]:.4g} requests/s: RuntimeError: a "
                        "test failure\n"), err
    assert err.count("\n") == 1


def test_an_unreachable_cluster_is_one_line(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip(
        "distributed", reason="the 'distributed' extra (kvroof[distributed]) is not installed")
    real = distributed.Client

    def quick(address: str, timeout: float) -> Any:  # kvroof waits 30 s; the test 1 s
        return real(address, timeout=1)

    monkeypatch.setattr(distributed, "Client", quick)
    address = "tcp://127.0.0.1:9"  # the discard port: nothing listens there
    code = main([*TINY, "--quiet", "--dask", address])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"kvroof: error: --dask {address}: cannot connect ("), err
    assert err.count("\n") == 1


def test_dask_and_jobs_together(capsys: pytest.CaptureFixture[str]) -> None:
    # kvroof sweep's rule: a cluster has its own workers, local processes are the other way
    code = main([*TINY, "--quiet", "--dask", "tcp://127.0.0.1:9", "--jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err == "kvroof: error: give --jobs or --dask, not both\n"
    with pytest.raises(KvroofError, match=r"^dask: give jobs \(local processes\) or dask "
                                          r"\(a cluster\), not both$"):
        kvroof.plan("llama-3.2-1b", ["h100"], SUMMARY, **SLO, jobs=2, dask="tcp://x:1")
    with pytest.raises(KvroofError, match=r"^dask: expected a scheduler address"):
        kvroof.plan("llama-3.2-1b", ["h100"], SUMMARY, **SLO, dask=" ")

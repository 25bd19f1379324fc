"""`kvroof plan` from the command line and `kvroof.plan(...)` from Python: output, JSON, the
output folder, progress lines, one-line errors naming the flag, Ctrl-C, failed candidates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvroof
from kvroof.cli import main
from kvroof.cli import plan as cli_plan
from kvroof.errors import KvroofError
from kvroof.simulate import settings

TINY = ["plan", "summary:prompt=2000,reused=0.8,distance=10,requests=120,output=exp:32",
        "--model", "llama-3.2-1b", "--candidate", "h100", "--slo-ttft", "200 ms",
        "--slo-tpot", "20 ms"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_choices_match_the_library() -> None:
    assert cli_plan._SCHEDULERS == settings.SCHEDULERS
    assert cli_plan._LOAD_MODES == settings.LOAD_MODES
    assert cli_plan._ROUTERS == settings.ROUTERS


@pytest.mark.parametrize(("extra", "message"), [
    (["--candidate", "nope"], "--candidate nope: unknown system or accelerator 'nope'"),
    (["--candidate", "dgx-h100:3"], "--candidate dgx-h100:3: tp: 3 does not divide"),
    (["--candidate", "h100", "--slo-ttft", "2 parsecs"], "--slo-ttft: "),
    (["--candidate", "h100", "--tp", "8"], "--tp: give TP with each --candidate"),
    (["--candidate", "h100", "--system", "dgx-h100"], "--system: give the hardware as"),
    ([], "--candidate: give at least one hardware candidate"),
    (["--candidate", "h100", "--jobs", "0"], "--jobs: expected a positive integer"),
    (["--candidate", "h100", "--tolerance", "2"], "--tolerance: expected a share below 1"),
    (["--candidate", "h100", "--slo-percentile", "0"], "--slo-percentile: expected a positive"),
    (["--candidate", "h100", "--target-rps", "-1"], "--target-rps: expected a positive"),
    (["--candidate", "h100", "--dram-gb-price", "1"], "--dram-gb-price: give the GPU-hour"),
    (["--candidate", "h100", "--dram-sizes", "1 GB,,2 GB"], "--dram-sizes: expected sizes"),
    (["--candidate", "h100", "--dram-cache", "-5 GB"], "--dram-cache: "),
    (["--candidate", "h100", "--max-num-seqs", "0"], "--max-num-seqs: expected a positive"),
    (["--candidate", "dgx-h100", "--cache-tier", "nvme"], "--cache-tier: dgx-h100 has no tier"),
    (["--candidate", "h100", "--candidate", "h100:1"], "--candidate: h100:1x1 given twice"),
    (["--candidate", "h100", "--iteration-tokens", "64"], "--iteration-tokens: the plan takes"),
    (["--candidate", "h100", "--output-tokens", "exp:0"], "--output-tokens: expected"),
])
def test_bad_input_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str],
                                               extra: list[str], message: str) -> None:
    argv = ["plan", "summary:prompt=1000,reused=0.5,requests=20", "--model", "llama-3.2-1b",
            *extra]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"kvroof: error: {message}") and err.count("\n") == 1, err


def test_workload_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = ["--model", "llama-3.2-1b", "--candidate", "h100"]
    table = tmp_path / "t.csv"
    table.write_text("new_tokens,cached_tokens,output_tokens\n200000,0,5\n100,0,5\n")
    code, _, err = run(capsys, "plan", str(table), *base)
    assert code == 2 and err == (f"kvroof: error: {table}: row 1: input of 200,000 tokens is "
                                 "longer than the model's context (131,072); skip such "
                                 "requests (--skip-bad)\n")
    code, _, err = run(capsys, "plan", "no-such-trace.jsonl", *base)
    assert code == 2 and "workload: no file 'no-such-trace.jsonl' and no preset" in err
    code, _, err = run(capsys, "plan", "summary:prompt=1000", *base)
    assert code == 2 and "workload summary: give reused=..." in err
    code, _, err = run(capsys, "plan", "examples/data/sharegpt_sample.json", *base)
    assert code == 2 and err.splitlines()[-1].endswith(
        "give output lengths: --output-tokens takes N, exp:MEAN or uniform:LO:HI")


def test_tables_json_progress_and_folder(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    folder = tmp_path / "plan"
    code, out, err = run(capsys, *TINY, "--target-rps", "1000", "--gpu-hour-price", "3",
                         "-o", str(folder))
    assert code == 0, err
    assert out.startswith("model       llama-3.2-1b\n")
    assert "h100:1x1  llama-3.2-1b, h100-sxm + pcie-gen5-x16, TP 1, 1 replica" in out
    assert "\nverdict    Leave it off: it adds nothing measurable" in out
    assert "\nfleet      " in out and "\ncost/Mtok  " in out
    assert out.splitlines()[-2].startswith("simulated  ") and "x real time)" in out
    assert out.rstrip().endswith(f"wrote {folder}")
    lines = err.splitlines()
    assert lines and all(line.startswith("plan: ") for line in lines)
    assert any("without offloading: " in line and "simulations)" in line for line in lines)
    names = {p.name for p in folder.iterdir()}
    assert {"plan.md", "plan.html", "plan.json", "rate-vs-latency.png",
            "gain-vs-host-memory.png", "reload-threshold.png", ".kvroof-output"} == names
    page = (folder / "plan.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and 'src="http' not in page
    markdown = (folder / "plan.md").read_text()
    assert "## Verdicts" in markdown and "![gain against host memory per replica]" in markdown
    assert "outside what was validated: no validation case measured llama-3.2-1b" in markdown
    data = json.loads((folder / "plan.json").read_text())
    assert data["kind"] == "plan" and data["candidates"][0]["verdict"]["decision"] == "off"
    code, out, err = run(capsys, *TINY, "--json", "--quiet")
    assert code == 0 and err == ""
    payload = json.loads(out)
    cand = payload["candidates"][0]
    assert cand["without"]["max_rps"] > 0 and cand["threshold"]["setting"] >= 1
    assert payload["objectives"] == {"ttft": 0.2, "tpot": 0.02, "percentile": 90.0,
                                     "defaulted": False}
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    code, _, err = run(capsys, *TINY, "--quiet", "-o", str(mine))
    assert code == 2 and "not empty and not made by kvroof" in err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_ctrl_c_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    import kvroof.plan.run as plan_run

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_run, "plan", interrupted)
    code, out, err = run(capsys, *TINY, "-o", str(tmp_path / "out"))
    assert (code, out, err) == (130, "", "kvroof: interrupted\n")
    assert not (tmp_path / "out").exists()


def test_a_failed_candidate_keeps_the_others(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import kvroof.plan.simulation as simulation

    real = simulation._point
    failed_at: list[float] = []

    def failing(job: Any, trace: Any, registry: Any = None) -> Any:
        if job.dep.accelerator.name == "h200":
            failed_at.append(job.rps)
            raise KvroofError("a test failure")
        return real(job, trace, registry)

    monkeypatch.setattr(simulation, "_point", failing)
    with pytest.raises(SystemExit) as stop:  # the finished plans are printed first
        main([*TINY, "--candidate", "h200", "--quiet"])
    out, err = capsys.readouterr()
    assert stop.value.code == 1
    # the failure names its grid point: the arm and the rate of the simulation that failed
    # (the first the search tried, recorded by the failing stand-in above)
    assert len(failed_at) == 1
    point = f"without offloading at {failed_at[0]:.4g} requests/s"
    assert "\nh200:1x1  " in out and f"no plan: {point}: a test failure" in out
    assert "\nverdict    Leave it off" in out  # the h100's plan
    assert err == (f"kvroof: error: --candidate h200:1x1: a simulation failed: {point}: a "
                   "test failure\n")


def test_python_api_and_jobs() -> None:
    summary = kvroof.plan.WorkloadSummary(2000, 0.8, 10, requests=120, output_tokens="exp:32")
    one = kvroof.plan("llama-3.2-1b", ["h100"], summary, slo_ttft=0.2, slo_tpot=0.02)
    two = kvroof.plan("llama-3.2-1b", ["h100"], summary, slo_ttft=0.2, slo_tpot=0.02, jobs=2)
    assert isinstance(one, kvroof.plan.Plan) and callable(kvroof.plan)
    assert one.simulations == two.simulations
    for a, b in zip(one.to_json()["candidates"], two.to_json()["candidates"], strict=True):
        for arm in ("without", "with_offload"):  # the same simulations, wall times apart
            assert [{**p, "wall_s": 0} for p in a[arm]["points"]] == \
                [{**p, "wall_s": 0} for p in b[arm]["points"]]
        assert a["verdict"] == b["verdict"]
    with pytest.raises(KvroofError, match="candidates: give a list"):
        kvroof.plan("llama-3.2-1b", "h100", summary)

"""`kvroof simulate` and `kvroof sweep`: output, JSON, files, one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.cli import simulate as cli_simulate
from kvroof.simulate import settings

TESTBED = ["--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_choices_match_the_library() -> None:
    assert cli_simulate.SCHEDULERS == settings.SCHEDULERS
    assert cli_simulate.CACHE_POLICIES == settings.CACHE_POLICIES
    assert cli_simulate.LOAD_MODES == settings.LOAD_MODES
    assert cli_simulate.ROUTERS == settings.ROUTERS
    assert cli_simulate.OFFLOAD_STORES == settings.OFFLOAD_STORES


def test_simulate_default_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", *TESTBED, "--requests", "60", "--quiet")
    assert code == 0, err
    assert "mooncake_conversation_5min" in out and "TTFT" in out and "60 completed" in out
    code, out, _ = run(capsys, "simulate", *TESTBED, "--requests", "60", "--json",
                       "--compare", "scheduler=utilization-aware")
    payload = json.loads(out)
    assert code == 0 and len(payload) == 2
    assert payload[1]["settings"]["scheduler"] == "utilization-aware"
    assert payload[0]["summary"]["requests"] == 60


def test_output_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "out"
    argv = ["simulate", *TESTBED, "--requests", "40", "--quiet", "-o", str(folder)]
    assert run(capsys, *argv)[0] == 0
    names = {p.name for p in folder.iterdir()}
    assert {"requests.csv", "iterations.csv", "summary.json", "ttft-cdf.png",
            "timeline.png"} <= names
    lines = (folder / "requests.csv").read_text().splitlines()
    assert len(lines) == 41 and lines[0].startswith("request,replica,arrival")
    assert run(capsys, *argv)[0] == 0  # kvroof's own folder: written again
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, _, err = run(capsys, "simulate", *TESTBED, "--requests", "40", "-o", str(mine))
    assert code == 2 and "not empty and not made by kvroof" in err and err.count("\n") == 1
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert run(capsys, "simulate", *TESTBED, "--requests", "40", "--quiet", "-o", str(mine),
               "--force")[0] == 0
    assert (mine / "notes.txt").read_text() == "keep me"


def test_interrupted_write_leaves_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the first CSV is written: no output folder, no temporary file, exit 130."""
    from kvroof.simulate import output

    real = output.write_result

    def interrupted(folder: Path, result: object, prefix: str = "") -> list[Path]:
        (Path(folder) / f"{prefix}requests.csv").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "write_result", interrupted)
    folder = tmp_path / "out"
    code, _, err = run(capsys, "simulate", *TESTBED, "--requests", "20", "--quiet", "-o",
                       str(folder))
    assert code == 130 and "interrupted" in err
    assert list(tmp_path.iterdir()) == []
    del real


def _trace(tmp_path: Path, lines: list[dict[str, object]]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def moon(t: int, n: int, out: int = 5, ids: list[int] | None = None) -> dict[str, object]:
    return {"timestamp": t, "input_length": n, "output_length": out,
            "hash_ids": ids if ids is not None else [t]}


@pytest.mark.parametrize(("lines", "extra", "message"), [
    ([moon(5, 100), moon(3, 100)], [], r"trace.jsonl: line 2: timestamp 3 ms is earlier"),
    ([moon(0, 100), moon(1, 0, ids=[])], [], r"line 2: 'input_length' must be >= 1, got 0"),
    ([moon(0, 100), moon(1, 100, out=-2)], [], r"line 2: 'output_length' must be >= 1"),
    ([moon(0, 100), moon(1, 40_000, ids=list(range(79)))],
     ["--model", "qwen3-235b-a22b"], r"line 2: input of 40,000 tokens is longer than the "
                                     r"model's context \(32,768\); --skip-bad"),
    ([moon(0, 100)], ["--rps", "0"], r"--rps: must be a positive number, got 0"),
    ([moon(0, 100)], ["--rps", "-3"], r"--rps: must be a positive number, got -3"),
    ([moon(0, 5000, ids=list(range(10)))], ["--kv-tokens", "1000"],
     r"line 1: needs 5,005 tokens of KV but the largest replica's KV space holds 1,000"),
    ([moon(0, 100)], ["--dram-cache", "1 kB"],
     r"--dram-cache: 1 kB holds 0 tokens of KV \(327.7 kB each"),
    ([moon(0, 100)], ["--compare", "schedule=fifo"], r"--compare: unknown setting 'schedule'"),
    ([moon(0, 100)], ["--compare", "scheduler=bogus"],
     r"--compare scheduler=bogus: scheduler: expected one of fifo, utilization-aware"),
    ([moon(0, 100)], ["--model", "deepseek-v3", "--accelerator", "h100", "--tp", "1"],
     r"deepseek-v3 does not fit on h100-sxm at TP 1"),
    ([moon(0, 100)], ["--power-cap", "20 W"],
     r"--power-cap: 20 W is not above the GPU's idle power 67 W"),
    # a setting given twice in one variant, or a yes/no value that is neither, was dropped
    ([moon(0, 100)], ["--compare", "scheduler=fifo,scheduler=utilization-aware"],
     r"--compare scheduler=fifo,scheduler=utilization-aware: scheduler given twice"),
    ([moon(0, 100)], ["--compare", "prefix-caching=maybe"],
     r"--compare prefix-caching: expected one of 1, true, yes, on, 0, false, no, off, "
     r"got 'maybe'"),
    # the flag given is named, against the other's default (it named --max-num-seqs)
    ([moon(0, 100)], ["--max-num-batched-tokens", "1"],
     r"--max-num-batched-tokens: 1 is below --max-num-seqs \d+ \(vLLM's default\)"),
    # flags for arrivals or a scheduler not in use were ignored without a word
    ([moon(0, 100)], ["--burstiness", "3"], r"--burstiness: applies to --arrival gamma"),
    ([moon(0, 100)], ["--rps", "5", "--time-scale", "2"],
     r"--rps: give --rps or --time-scale, not both"),
    ([moon(0, 100)], ["--users", "4", "--rps", "5"],
     r"--users: a closed loop sets its own arrivals; give no --rps or --time-scale"),
    ([moon(0, 100)], ["--arrival", "gamma"], r"--arrival: applies to open-loop arrivals at --rps"),
    ([moon(0, 100)], ["--think-time", "1 s"], r"--think-time: applies to a closed loop of --users"),
    ([moon(0, 100)], ["--compare", "aging-limit=3"],
     r"--compare aging-limit=3: aging-limit applies to the utilization-aware scheduler"),
    ([moon(0, 100)], ["--aging-limit", "3"],
     r"--aging-limit: applies to the utilization-aware scheduler"),
    # 100 million replicas ran on for minutes without a word
    ([moon(0, 100)], ["--replicas", "100000000"],
     r"--replicas: expected an integer from 0 to 4,096, got 100000000"),
])
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               lines: list[dict[str, object]], extra: list[str],
                               message: str) -> None:
    path = _trace(tmp_path, lines)
    base = list(TESTBED)
    if "--accelerator" in extra:
        base = base[:2]
    if "--model" in extra:
        base = base[2:]
    code, out, err = run(capsys, "simulate", path, *base, *extra, "--quiet")
    assert code == 2, out
    assert err.count("\n") == 1 and err.startswith("kvroof: error: ")
    assert __import__("re").search(message, err), err


def test_unknown_policy_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *TESTBED, "--scheduler", "random"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "invalid choice: 'random'" in err
    assert err.count("\n") == 1


def test_skip_bad_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _trace(tmp_path, [moon(0, 100), moon(1, 40_000, ids=list(range(79))),
                             moon(2, 200), "not json"])  # type: ignore[list-item]
    (tmp_path / "trace.jsonl").write_text(
        (tmp_path / "trace.jsonl").read_text().replace('"not json"', "{not json"))
    code, out, err = run(capsys, "simulate", path, "--model", "qwen3-235b-a22b", "--system",
                         "paper-testbed", "--tp", "8", "--skip-bad", "--json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary["requests"] == 2 and summary["skipped"] == 2
    assert "skipped 1 bad line" in err


SWEEP = """
model: llama-3.1-70b
hardware: paper-testbed:8
arrivals: {{requests: 40, output_tokens: "exp:20", seed: 3}}
grid:
  rps: [2, 6]
  scheduler: [fifo, utilization-aware]
{extra}
"""


def test_sweep_local(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.format(extra=""))
    code, out, err = run(capsys, "sweep", str(config), "--json", "--quiet")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["rps"], r["scheduler"]) for r in rows] == [
        (2, "fifo"), (2, "utilization-aware"), (6, "fifo"), (6, "utilization-aware")]
    assert all(r["requests"] == 40 for r in rows)
    code, out, _ = run(capsys, "sweep", str(config), "--json", "--jobs", "2")
    parallel = json.loads(out)
    assert [r["ttft_s_p50"] for r in parallel] == [r["ttft_s_p50"] for r in rows]
    folder = tmp_path / "out"
    assert run(capsys, "sweep", str(config), "-o", str(folder), "--quiet")[0] == 0
    csv_lines = (folder / "sweep.csv").read_text().splitlines()
    assert len(csv_lines) == 5 and csv_lines[0].startswith("point,rps,scheduler,requests")
    assert (folder / "latency-vs-rps.png").exists()


def test_sweep_on_a_dask_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.format(extra=""))
    code, out, _ = run(capsys, "sweep", str(config), "--json")
    local = json.loads(out)
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        code, out, err = run(capsys, "sweep", str(config), "--json", "--dask",
                             cluster.scheduler_address)
    assert code == 0, err
    assert [r["ttft_s_p50"] for r in json.loads(out)] == [r["ttft_s_p50"] for r in local]


@pytest.mark.parametrize(("extra", "message"), [
    # an unknown grid key used to reach Deployment.__init__ and print its TypeError
    ("  colour: [red]", r"sweep.yaml: grid.colour: unknown key \(a deployment, simulation"),
    ("deployment: {frob: 1}", r"sweep.yaml: deployment.frob: unknown key \(allowed: .*tp"),
    # 100 million replicas ran on without a word
    ("  replicas: [100000000]",
     r"sweep.yaml: grid.replicas: expected an integer from 1 to 4,096, got 100000000"),
    # TP came from both hardware (SYSTEM:TP) and the grid; the grid's won without a word
    ("  tp: [3]", r"sweep.yaml: grid.tp: give TP with the hardware, SYSTEM:TP"),
    ("deployment: {tp: 4}", r"sweep.yaml: deployment.tp: give TP with the hardware"),
    # settings without effect on the runs, as on the command line
    ("  burstiness: [3]", r"grid point 0 \(rps=2, scheduler=fifo, burstiness=3\): "
                          r"burstiness: applies to gamma arrivals"),
    ("bogus_key: 1", r"sweep.yaml: bogus_key: unknown key"),
    ("  load_mode: [eventually]", r"load_mode: expected one of sync, async, layerwise"),
    ("  dram_cache: ['12 parsecs']", r"dram_cache: "),
])
def test_sweep_bad_config(capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: str,
                          message: str) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.format(extra=extra))
    code, _, err = run(capsys, "sweep", str(config))
    assert code == 2 and err.count("\n") == 1
    assert __import__("re").search(message, err), err


def test_example_sweep_config_is_valid() -> None:
    from kvroof.simulate.sweep import check_points, load_sweep_config, points

    config = load_sweep_config(Path(__file__).resolve().parents[2] / "examples" /
                               "sweep_mooncake.yaml")
    grid = points(config)
    assert len(grid) == 16
    check_points(grid)


def test_replica_limit_in_the_library() -> None:
    """The library refuses more than MAX_REPLICAS too (the CLI and sweeps check before
    building a list of them)."""
    from kvroof.cost.deployment import deployment
    from kvroof.errors import KvroofError
    from kvroof.simulate.runner import prepare_trace, simulate
    from kvroof.simulate.settings import MAX_REPLICAS, ReplicaSpec, SimSettings

    from .helpers import table_trace

    with pytest.raises(KvroofError, match="replicas: at most 4,096, got 5,000"):
        ReplicaSpec(system="dgx-h100", count=5000)
    dep = deployment("llama-3.1-8b", accelerator="h100")
    trace = prepare_trace(table_trace([10], [0], 1), rps=1.0)
    with pytest.raises(KvroofError, match="replicas: at most 4,096, got 4,097"):
        simulate(trace, [dep] * (MAX_REPLICAS + 1), SimSettings())


def test_sweep_aging_limit_without_its_scheduler(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """An aging limit with no utilization-aware run is an error; beside a grid of schedulers
    it is the utilization-aware points' setting and stays."""
    config = tmp_path / "sweep.yaml"
    config.write_text("model: llama-3.1-70b\nhardware: paper-testbed:8\n"
                      "simulation: {aging_limit: 2}\narrivals: {requests: 20}\n")
    code, _, err = run(capsys, "sweep", str(config), "--quiet")
    assert code == 2 and err.count("\n") == 1
    assert "aging_limit: applies to the utilization-aware scheduler" in err, err
    config.write_text("model: llama-3.1-70b\nhardware: paper-testbed:8\n"
                      "simulation: {aging_limit: 2}\narrivals: {requests: 20, rps: 5}\n"
                      "grid: {scheduler: [fifo, utilization-aware]}\n")
    code, _, err = run(capsys, "sweep", str(config), "--quiet", "--json")
    assert code == 0, err


def test_sweep_flag_errors_name_the_flag_not_the_file(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """--jobs 0 is the flag's error: the config file is not put in front of it."""
    config = tmp_path / "sweep.yaml"
    config.write_text(SWEEP.format(extra=""))
    code, _, err = run(capsys, "sweep", str(config), "--jobs", "0")
    assert code == 2 and err == "kvroof: error: --jobs: expected a positive integer, got 0\n"

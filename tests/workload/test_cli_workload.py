"""`kvroof workload stats` and `kvroof workload synth`: output, JSON, exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.cli import workload as cli_workload
from kvroof.workload import FORMATS, SYNTHETIC_KINDS

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_choices_match_the_library() -> None:
    assert cli_workload._FORMATS == FORMATS
    assert cli_workload._SYNTHETIC == SYNTHETIC_KINDS


def test_stats_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "workload", "stats", str(SAMPLES / "table_sample.csv"))
    assert code == 0 and err == ""
    assert "requests: 8" in out
    assert "1 with T = 0 (kappa = inf" in out
    # K sorted [0, 0, 1060, 1167, 2048, 2048, 5000, 64000]: median (1167 + 2048) / 2 = 1607.5
    p50 = next(line for line in out.splitlines() if line.startswith("p50"))
    assert p50.split()[2] == "1,608"


def test_stats_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "workload", "stats", str(SAMPLES / "table_sample.csv"), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kind"] == "workload_stats"
    assert data["count"] == 8 and data["synthetic"] is False
    assert data["cached_tokens"]["p50"] == 1607.5
    # kappa = K/T per row: 0, 0, 2048/16 = 128, 2048/22 = 93.1, 64000/9 = 7111,
    # 5000/0 = inf, 1060/12 = 88.3, 1167/30 = 38.9; sorted, p99 sits at position
    # 0.99 x 7 = 6.93, between 7111 and inf -> inf, printed as JSON null
    assert data["kappa_ratio"]["p99"] is None and data["kappa_ratio"]["infinite"] == 1


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("sharegpt_sample.json", ["--reply-as-new"]),
        ("docqa_sample.jsonl", ["--preloaded-documents"]),
        ("mooncake_sample.jsonl", ["--lru-tokens", "1024"]),
    ],
)
def test_stats_on_each_sample(capsys: pytest.CaptureFixture[str], name: str,
                              extra: list[str]) -> None:
    code, out, err = run(capsys, "workload", "stats", str(SAMPLES / name), *extra)
    assert code == 0
    assert "p50" in out and "kappa = K/T" in out
    if name != "mooncake_sample.jsonl":
        assert "approximate" in err  # the heuristic says so


def test_mooncake_lru_flag_changes_k(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(SAMPLES / "mooncake_sample.jsonl")
    _, out, _ = run(capsys, "workload", "stats", path, "--json")
    _, out_lru, _ = run(capsys, "workload", "stats", path, "--json", "--lru-tokens", "1024")
    # unlimited: K mean (0+2048+0+2560+1023+0+1024+5120)/8 = 1471.875; a 2-block LRU reuses
    # less, so the mean must drop
    assert json.loads(out)["cached_tokens"]["mean"] == 1471.875
    assert json.loads(out_lru)["cached_tokens"]["mean"] < 1471.875


def test_synth_then_stats(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "nqa.csv"
    code, out, _ = run(capsys, "workload", "synth", "narrativeqa", "-n", "2000", "--seed", "3",
                       "-o", str(target))
    assert code == 0 and "SYNTHETIC" in out and target.exists()
    code, out, _ = run(capsys, "workload", "stats", str(target))
    assert code == 0
    assert out.startswith("SYNTHETIC workload")
    assert "workload: synthetic-narrativeqa" in out
    code, out, _ = run(capsys, "workload", "stats", str(target), "--json")
    assert json.loads(out)["synthetic"] is True


def test_synth_says_how_many_it_cut(capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    """`synth` prints how many requests the context cap cut, counted independently here from
    the written table (T + K at the cap, against the same draw without a cap, whose longer
    requests are exactly the cut ones); --max-context 0 cuts nothing and says nothing."""
    from kvroof.workload.synth import synthesize

    target = tmp_path / "nqa.csv"
    code, out, _ = run(capsys, "workload", "synth", "narrativeqa", "-n", "2000", "--seed", "3",
                       "--max-context", "65536", "-o", str(target))
    uncapped = synthesize("narrativeqa", 2000, seed=3, max_context=None)
    cut = int((uncapped.new_tokens + uncapped.cached_tokens > 65536).sum())
    assert 0 < cut < 2000
    assert code == 0 and (f"seed 3; {cut:,} of 2,000 ({100 * cut / 2000:.1f}%) cut to a "
                          f"65,536-token context) to {target}") in out
    code, out, _ = run(capsys, "workload", "synth", "narrativeqa", "-n", "20", "--max-context",
                       "0", "-o", str(tmp_path / "all.csv"))
    assert code == 0 and "cut" not in out


def test_synth_jsonl(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    code, _, _ = run(capsys, "workload", "synth", "sharegpt", "-n", "5", "-o", str(target))
    assert code == 0
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 5
    assert all(r["synthetic"] is True and r["workload"] == "synthetic-sharegpt" for r in rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["workload", "stats", "/nonexistent/x.jsonl"], "no such file"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--lru-tokens", "10"],
         "--lru-tokens applies to the mooncake format"),
        (["workload", "stats", str(SAMPLES / "table_sample.csv"), "--tokenizer", "x.json"],
         "--tokenizer applies to the sharegpt and docqa format"),
        (["workload", "stats", str(SAMPLES / "docqa_sample.jsonl"), "--format", "mooncake"],
         "line 1: missing field 'timestamp'"),
        (["workload", "stats", str(SAMPLES / "mooncake_sample.jsonl"), "--lru-tokens", "-5"],
         "--lru-tokens must be >= 0"),
        # a cache smaller than one block held nothing, said only in the source line
        (["workload", "stats", str(SAMPLES / "mooncake_sample.jsonl"), "--lru-tokens", "100"],
         "--lru-tokens 100 holds no whole 512-token block"),
        # deployment flags without --model were ignored without a word
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--tp", "8"],
         "--tp: applies to the transfer-bound shares, which need --model"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--mode", "paper"],
         "--mode: applies to the transfer-bound shares"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--engine", "vllm-9"],
         "--engine: applies to the transfer-bound shares"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--no-allreduce"],
         "--no-allreduce: applies to the transfer-bound shares"),
        # checked before the file is read, so the approximate-token warning never comes first
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--model",
          "llama-3.1-8b"], "--model: transfer-bound shares need --system or --accelerator"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--model",
          "llama-3.1-8b", "--system", "gh200", "--mla", "absorbed"],
         "--mla: llama-3.1-8b has no MLA layers"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--model",
          "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8", "--iteration-tokens", "5"],
         "--iteration-tokens: 5.0 is fewer than the request's new tokens"),
        (["workload", "stats", str(SAMPLES / "sharegpt_sample.json"), "--tokenizer",
          "/nonexistent/tokenizer.json"], "no such tokenizer file"),
        (["workload", "stats", str(SAMPLES / "docqa_sample.jsonl"), "--no-cache-documents",
          "--preloaded-documents"], "contradict each other"),
        (["workload", "synth", "sharegpt", "-n", "0", "-o", "x.csv"],
         "-n: expected a number of requests from 1 to 100,000,000, got 0"),
        # synth.MAX_REQUESTS; the error used to name no flag
        (["workload", "synth", "sharegpt", "-n", "1000000000000", "-o", "x.csv"],
         "-n: expected a number of requests from 1 to 100,000,000, got 1,000,000,000,000"),
        (["workload", "synth", "sharegpt", "--seed", "-1", "-o", "x.csv"], "--seed: must not be"),
        (["workload", "synth", "sharegpt", "-o", "x.parquet"], "must end in .csv or .jsonl"),
    ],
)
def test_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                     message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("kvroof: error: ") and err.count("\n") == 1
    assert message in err


def test_malformed_line_and_skip_bad(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    good = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}'
    path.write_text(f"{good}\n{{oops\n{good}\n")
    code, _, err = run(capsys, "workload", "stats", str(path))
    assert code == 2 and "line 2: not valid JSON" in err and err.count("\n") == 1
    code, out, err = run(capsys, "workload", "stats", str(path), "--skip-bad")
    assert code == 0
    assert "requests: 2 (1 bad records skipped)" in out
    assert "kvroof: warning:" in err and "skipped 1 bad line" in err


def test_unknown_format_guess(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"prompt": "hi"}\n')
    code, _, err = run(capsys, "workload", "stats", str(path))
    assert code == 2 and "give the format" in err


def test_missing_output_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["workload", "synth", "sharegpt"])
    assert info.value.code == 2
    assert "-o/--output" in capsys.readouterr().err


def test_an_error_is_the_only_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The approximate-token warning waits until the file has loaded: a bad record then prints
    one line, not the warning first; a good file still warns."""
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"doc_id": "a", "document": "hello", "question": "q", "answer_tokens": -4}\n')
    code, out, err = run(capsys, "workload", "stats", str(bad))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "'answer_tokens' must be >= 0, got -4" in err
    code, _, err = run(capsys, "workload", "stats", str(SAMPLES / "sharegpt_sample.json"))
    assert code == 0 and "token counts are approximate" in err

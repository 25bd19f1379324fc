"""Format guessing and dispatch, on the sample files and on files that fit no format."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from kvroof.errors import KvroofError
from kvroof.workload import (
    FORMATS,
    ApproximateTokensWarning,
    guess_format,
    load_workload,
)

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sharegpt_sample.json", "sharegpt"),
        ("docqa_sample.jsonl", "docqa"),
        ("mooncake_sample.jsonl", "mooncake"),
        ("table_sample.csv", "table"),
    ],
)
def test_samples_are_recognised(name: str, expected: str) -> None:
    assert guess_format(SAMPLES / name) == expected


def test_samples_are_small_and_load() -> None:
    for path in sorted(SAMPLES.iterdir()):
        assert path.stat().st_size < 20_000, path
        text = guess_format(path) in ("sharegpt", "docqa")  # counted with the heuristic
        with pytest.warns(ApproximateTokensWarning) if text else nullcontext():
            assert len(load_workload(path)) > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ('{"a": 1}\n', r"cannot tell the format from the first record's fields \(a\)"),
        ("{broken\n", r"line 1: not valid JSON \(Expecting property name enclosed in double "
                       r"quotes, column 2\), so the format cannot be told from it"),
        ("hello\n", "cannot tell the format"),
    ],
)
def test_unsure_guess_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mystery.jsonl"
    path.write_text(text)
    with pytest.raises(KvroofError, match=message):
        guess_format(path)


def test_options_must_apply(tmp_path: Path) -> None:
    path = SAMPLES / "table_sample.csv"
    with pytest.raises(KvroofError, match="option 'lru_tokens' does not apply to the table"):
        load_workload(path, lru_tokens=100)
    with pytest.raises(KvroofError, match="unknown workload format 'csv'"):
        load_workload(path, "csv")
    assert set(FORMATS) == {"sharegpt", "docqa", "mooncake", "table"}


def test_mooncake_sample_numbers() -> None:
    w = load_workload(SAMPLES / "mooncake_sample.jsonl")
    # block by block (512 tokens), unlimited cache, K capped at input - 1:
    # [0..3] new -> 0; [0..4] reuses 4 -> 2048; [10,11] new -> 0; [0..5] reuses 5 -> 2560;
    # [10,11] reuses 2 -> min(1024, 1024 - 1) = 1023; [20..29] new -> 0;
    # [0,1,30,31] reuses 2 -> 1024; [20..29,40] reuses 10 -> 5120
    assert w.cached_tokens.tolist() == [0, 2048, 0, 2560, 1023, 0, 1024, 5120]
    assert w.new_tokens.tolist() == [1800, 252, 700, 440, 1, 5000, 576, 80]

"""Table loader (CSV / JSON Lines with explicit T and K) and writer."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.reading import SkippedRecordsWarning
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload
from kvroof.workload.table import load_table, write_table

Writer = Callable[..., Path]


def csv_file(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_all_columns(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "new_tokens,cached_tokens,output_tokens,arrival_time,group_id,note\n"
                              "10,200,5,0.5,a,hello\n"
                              "3,0,,,b,\n"
                              "7.0,50,-1,2,a,x\n")
    w = load_table(path)
    assert w.new_tokens.tolist() == [10, 3, 7]       # "7.0" is a whole number
    assert w.cached_tokens.tolist() == [200, 0, 50]
    assert w.output_tokens.tolist() == [5, UNKNOWN_OUTPUT, UNKNOWN_OUTPUT]
    assert w.arrival_time is not None
    assert w.arrival_time[0] == 0.5 and math.isnan(w.arrival_time[1])
    assert w.group_id.tolist() == ["a", "b", "a"]
    assert w.name == "t" and not w.synthetic


def test_short_column_names(tmp_path: Path) -> None:
    w = load_table(csv_file(tmp_path, "T,K\n4,40\n"))
    assert (w.new_tokens.tolist(), w.cached_tokens.tolist()) == ([4], [40])
    assert w.arrival_time is None  # no column: no times


def test_jsonl(write_jsonl: Writer) -> None:
    path = write_jsonl([
        {"T": 4, "K": 400},
        {"T": 2, "K": 0, "output_tokens": 9, "arrival_time": 1.25, "group_id": 3},
        {"T": 1, "K": 10, "output_tokens": None, "arrival_time": None},
    ])
    w = load_table(path)
    assert w.new_tokens.tolist() == [4, 2, 1]
    assert w.cached_tokens.tolist() == [400, 0, 10]
    assert w.output_tokens.tolist() == [UNKNOWN_OUTPUT, 9, UNKNOWN_OUTPUT]
    assert w.arrival_time is not None and w.arrival_time[1] == 1.25
    assert np.isnan(w.arrival_time[[0, 2]]).all()
    assert w.group_id.tolist() == ["", "3", ""]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("new_tokens,T,K\n1,1,1\n", "'new_tokens' and 'T' mean the same"),
        # the second column of the same name used to win silently
        ("new_tokens,new_tokens,cached_tokens\n5,6,1\n", "column 'new_tokens' appears twice"),
        ("new_tokens,output_tokens\n1,2\n", "missing 'cached_tokens' \\(or 'K'\\)"),
        ('{"T": 1, "K": 2}\n', "looks like JSON"),
    ],
)
def test_bad_csv_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(KvroofError, match=message):
        load_table(csv_file(tmp_path, text), skip_bad=True)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("1,2,3", "line 3: 3 fields, but the header has 2"),
        ("x,2", "line 3: 'new_tokens' must be an integer, got 'x'"),
        ("1.5,2", "line 3: 'new_tokens' must be an integer, got '1.5'"),
        ("1,-2", "line 3: 'cached_tokens' must be >= 0"),
        (",2", "line 3: empty 'new_tokens'"),
    ],
)
def test_bad_csv_rows(tmp_path: Path, row: str, message: str) -> None:
    path = csv_file(tmp_path, f"T,K\n1,1\n{row}\n2,2\n")
    with pytest.raises(KvroofError, match=message):
        load_table(path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 1 bad row"):
        w = load_table(path, skip_bad=True)
    assert w.skipped == 1 and w.new_tokens.tolist() == [1, 2]


def test_bad_jsonl_rows(write_jsonl: Writer) -> None:
    path = write_jsonl([{"T": 1, "K": 1}, {"T": 1}, {"T": True, "K": 1}])
    with pytest.raises(KvroofError, match=r"line 2: missing 'cached_tokens' \(or 'K'\)"):
        load_table(path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 2 bad rows"):
        assert load_table(path, skip_bad=True).skipped == 2


def test_extension_decides(tmp_path: Path) -> None:
    with pytest.raises(KvroofError, match=r"must end in \.csv or \.jsonl"):
        load_table(csv_file(tmp_path, "T,K\n1,1\n", name="t.txt"))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    original = Workload.from_columns(
        [5, 0, 7], [50, 9, 0], output_tokens=[1, -1, 3], arrival_time=[0.0, np.nan, 2.5],
        group_id=["a", "b", "c"], name="synthetic-demo", synthetic=True,
    )
    path = write_table(original, tmp_path / f"out{suffix}")
    back = load_table(path)
    assert back.new_tokens.tolist() == [5, 0, 7]
    assert back.cached_tokens.tolist() == [50, 9, 0]
    assert back.output_tokens.tolist() == [1, UNKNOWN_OUTPUT, 3]
    assert back.arrival_time is not None and np.isnan(back.arrival_time[1])
    assert back.group_id.tolist() == ["a", "b", "c"]
    assert back.synthetic and back.name == "synthetic-demo"  # the label survives
    text = path.read_text()
    assert text.count("true") == 3  # every row says synthetic


def test_plain_workload_writes_only_t_and_k(tmp_path: Path) -> None:
    path = write_table(Workload.from_columns([1, 2], [3, 4]), tmp_path / "plain.csv")
    assert path.read_text() == "new_tokens,cached_tokens\n1,3\n2,4\n"
    back = load_table(path)
    assert not back.synthetic and back.name == "plain"


def test_marked_synthetic_rows(tmp_path: Path) -> None:
    w = load_table(csv_file(tmp_path, "T,K,synthetic\n1,1,false\n2,2,yes\n"))
    assert w.synthetic  # one synthetic row labels the workload
    with pytest.raises(KvroofError, match="'synthetic' must be true or false"):
        load_table(csv_file(tmp_path, "T,K,synthetic\n1,1,maybe\n"))


def test_write_error(tmp_path: Path) -> None:
    with pytest.raises(KvroofError, match=r"folder .*missing does not exist"):
        write_table(Workload.from_columns([1], [1]), tmp_path / "missing" / "x.csv")


def test_absurd_token_count_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    path.write_text("T,K\n100000000000000000000,5\n")
    with pytest.raises(KvroofError) as info:
        load_table(path)
    assert "line 2" in str(info.value) and "at most" in str(info.value)


def test_jsonl_token_counts_are_json_numbers(write_jsonl: Writer) -> None:
    """A JSON Lines table writes numbers as JSON numbers (CSV cells are text by nature); "5"
    was read as 5, where a Mooncake trace refuses it."""
    path = write_jsonl([{"new_tokens": "5", "cached_tokens": 10}])
    with pytest.raises(KvroofError, match=r"line 1: 'new_tokens' must be a number, got string "
                                          r"'5'"):
        load_table(path)
    assert load_table(write_jsonl([{"new_tokens": 5, "cached_tokens": 10}])).new_tokens[0] == 5

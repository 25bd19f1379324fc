"""Results files: CSV + JSON written and read back exactly, and one-line errors naming the file
and row for bad or incomplete files (no torch needed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvroof.measure import (
    ComputeRow,
    LinkRow,
    Measurement,
    PrefillRow,
    ResultsError,
    read_results,
    read_results_dir,
    write_results,
)
from kvroof.measure.results import NOTE

MACHINE = {"device": "cpu", "device_name": "test CPU", "host_memory_bytes": 1.6e10}


def prefill_rows() -> list[PrefillRow]:
    return [
        PrefillRow(model="llama-3.1-8b", layers_run=2, layers_model=32, T=16, K=k,
                   kv_bytes=k * 512, flops=1.5e8 + k, compute_s=1e-3, transfer_s=k * 1e-7,
                   serial_s=1e-3 + k * 1e-7, overlap_s=None if k < 100 else 1.1e-3,
                   p_oh=k * 1e-4)
        for k in (64, 256)
    ]


def write_prefill(folder: Path) -> Path:
    measurement = Measurement("prefill", list(prefill_rows()), {"tokens": [16]},
                              {"kappa_crit": [{"T": 16, "kappa_crit": math.inf}]})
    csv_path, _ = write_results(folder, measurement, MACHINE)
    return csv_path


def test_round_trip_every_benchmark(tmp_path: Path) -> None:
    link = [LinkRow(direction="h2d", pinned=True, pattern="chunked", block_tokens=16, copies=64,
                    bytes_per_copy=65536, bytes_total=4194304, gpus=1, repeats=5,
                    median_s=1.0 / 3.0, min_s=0.3, bandwidth=4194304 * 3.0)]
    compute = [ComputeRow(dtype="bf16", T=16, hidden=256, intermediate=896, flops=7340032.0,
                          repeats=3, median_s=3.5e-5, min_s=3.4e-5, achieved_flops=2.1e11,
                          peak_flops=9.89e14, efficiency=2.1e11 / 9.89e14),
               ComputeRow(dtype="fp16", T=32, hidden=256, intermediate=896, flops=1.4e7,
                          repeats=3, median_s=1e-3, min_s=9e-4, achieved_flops=1.4e10,
                          peak_flops=None, efficiency=None)]
    for name, rows in (("link", link), ("compute", compute), ("prefill", prefill_rows())):
        write_results(tmp_path, Measurement(name, list(rows), {"n": 1}, {}), MACHINE)
        back = read_results(tmp_path / f"{name}.csv")
        assert back.benchmark == name
        assert list(back.rows) == rows  # exact: floats are written with repr
        assert back.header is not None
        assert back.header["machine"] == MACHINE and back.header["note"] == NOTE
        assert back.header["rows"] == len(rows)
    assert set(read_results_dir(tmp_path)) == {"link", "compute", "prefill"}
    assert read_results(tmp_path / "compute.csv").typed(ComputeRow) == compute
    with pytest.raises(ResultsError, match="holds compute results, not link"):
        read_results(tmp_path / "compute.csv").typed(LinkRow)


def test_json_header_nulls_infinity(tmp_path: Path) -> None:
    write_prefill(tmp_path)
    header = json.loads((tmp_path / "prefill.json").read_text())
    assert header["summary"]["kappa_crit"][0]["kappa_crit"] is None  # JSON has no inf
    assert "never hand-edited" in header["note"]
    assert set(header["columns"]) == set(
        (tmp_path / "prefill.csv").read_text().splitlines()[0].split(",")
    )


def edit_line(path: Path, index: int, line: str | None) -> None:
    lines = path.read_text().splitlines()
    if line is None:
        del lines[index]
    else:
        lines[index] = line
    path.write_text("\n".join(lines) + "\n")


def replace_cell(path: Path, line: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines()
    columns = lines[0].split(",")
    cells = lines[line].split(",")
    cells[columns.index(column)] = value
    edit_line(path, line, ",".join(cells))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("compute_s", "fast", "row 2 (line 3): compute_s expected a number, got 'fast'"),
        ("p_oh", "", "row 2 (line 3): p_oh is empty"),
        ("K", "-5", "row 2 (line 3): K must be non-negative, got '-5'"),
        ("T", "1.5", "row 2 (line 3): T expected an integer, got '1.5'"),
        ("transfer_s", "inf", "row 2 (line 3): transfer_s must be finite, got 'inf'"),
        ("compute_s", "0", "row 2 (line 3): compute_s must be positive, got '0'"),
    ],
)
def test_bad_cell_names_file_and_row(tmp_path: Path, column: str, value: str,
                                     message: str) -> None:
    path = write_prefill(tmp_path)
    replace_cell(path, 2, column, value)
    with pytest.raises(ResultsError) as caught:
        read_results(path)
    text = str(caught.value)
    assert text == f"{path}: {message}"
    assert "\n" not in text


def test_incomplete_row(tmp_path: Path) -> None:
    path = write_prefill(tmp_path)
    lines = path.read_text().splitlines()
    edit_line(path, 1, ",".join(lines[1].split(",")[:9]))  # a row cut short
    with pytest.raises(ResultsError, match=r"row 1 \(line 2\): 9 cells, expected 12"):
        read_results(path)


def test_bad_link_choice(tmp_path: Path) -> None:
    row = LinkRow(direction="d2h", pinned=False, pattern="single", block_tokens=0, copies=1,
                  bytes_per_copy=4096, bytes_total=4096, gpus=1, repeats=3, median_s=1e-6,
                  min_s=1e-6, bandwidth=4.096e9)
    path, _ = write_results(tmp_path, Measurement("link", [row], {}, {}), MACHINE)
    replace_cell(path, 1, "direction", "sideways")
    with pytest.raises(ResultsError, match=r"row 1 .*direction 'sideways' is not one of h2d, d2h"):
        read_results(path)
    replace_cell(path, 1, "direction", "h2d")
    replace_cell(path, 1, "pinned", "yes")
    with pytest.raises(ResultsError, match="pinned expected true or false, got 'yes'"):
        read_results(path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "empty file (no header row)"),
        ("model,T,K", "header row: missing column(s) layers_run, layers_model, kv_bytes"),
        ("a,b", None),
    ],
)
def test_bad_header_row(tmp_path: Path, header: str | None, message: str | None) -> None:
    path = tmp_path / "prefill.csv"
    path.write_text("" if header is None else header + "\n1,2\n")
    with pytest.raises(ResultsError) as caught:
        read_results(path)
    if message is not None:
        assert str(caught.value).startswith(f"{path}: {message}")
    other = tmp_path / "mine.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ResultsError, match="header row matches no kvroof measure results"):
        read_results(other)


def test_no_rows_missing_file_and_bad_json(tmp_path: Path) -> None:
    path = write_prefill(tmp_path)
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n")
    with pytest.raises(ResultsError, match="no data rows"):
        read_results(path)
    with pytest.raises(ResultsError, match="cannot read"):
        read_results(tmp_path / "link.csv")
    with pytest.raises(ResultsError, match="is a folder"):
        read_results(tmp_path)
    with pytest.raises(ResultsError, match="no results"):
        read_results_dir(tmp_path / "empty")

    path = write_prefill(tmp_path)
    json_path = tmp_path / "prefill.json"
    json_path.write_text("{not json")
    with pytest.raises(ResultsError, match=r"prefill.json: not valid JSON \("):
        read_results(path)
    json_path.write_text(json.dumps({"benchmark": "link", "schema_version": 1}))
    with pytest.raises(ResultsError, match="describes 'link' results, but the CSV holds prefill"):
        read_results(path)
    json_path.unlink()
    assert read_results(path).header is None  # the CSV alone still reads

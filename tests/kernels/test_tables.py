"""The shipped format: writing and reading are inverses; malformed files are refused."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from kvroof.kernels import store
from kvroof.kernels.tables import (
    SIGNIFICANT_DIGITS,
    KernelTableError,
    SystemTables,
    read_system,
    round_value,
    to_json,
    write_system,
)


def assert_same(a: SystemTables, b: SystemTables) -> None:
    assert (a.accelerator, a.source_system, a.device) == (b.accelerator, b.source_system,
                                                          b.device)
    assert dict(a.peak_flops) == dict(b.peak_flops)
    assert a.hbm_bandwidth == b.hbm_bandwidth
    assert dict(a.source) == dict(b.source)
    assert set(a.tables) == set(b.tables)
    for op, ta in a.tables.items():
        tb = b.tables[op]
        assert (ta.quantity, ta.key_fields, ta.axes) == (tb.quantity, tb.key_fields, tb.axes)
        assert dict(ta.provenance) == dict(tb.provenance)
        assert len(ta.variants) == len(tb.variants)
        for va, vb in zip(ta.variants, tb.variants, strict=True):
            assert dict(va.key) == dict(vb.key)
            assert (va.peak, va.rows, dict(va.kernel_sources)) == (vb.peak, vb.rows,
                                                                  dict(vb.kernel_sources))
            assert va.grid.axes == vb.grid.axes
            for pa, pb in zip(va.grid.points, vb.grid.points, strict=True):
                np.testing.assert_array_equal(pa, pb)
            np.testing.assert_array_equal(va.grid.values, vb.grid.values)
            np.testing.assert_array_equal(va.grid.measured, vb.grid.measured)


def test_round_trip(system: SystemTables, tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    size = write_system(system, path)
    assert size == path.stat().st_size
    back = read_system(path)
    assert_same(system, back)
    # and again: byte for byte the same file (no timestamp in the gzip header)
    write_system(back, tmp_path / "u.json.gz")
    assert (tmp_path / "u.json.gz").read_bytes() == path.read_bytes()


def test_mask_is_stored_only_when_some_cell_is_filled(system: SystemTables) -> None:
    doc = to_json(system)
    assert "measured" not in doc["tables"]["gemm"]["variants"][0]
    mask = doc["tables"]["attention"]["variants"][0]["measured"]
    assert set(mask) == {"0", "1"} and mask.count("0") == 1


def test_grid_points_are_exact_and_values_rounded() -> None:
    assert round_value(0.123456789) == 0.1235
    assert round_value(16384.0) == 16380.0  # hence grid points are not rounded:
    from tests.kernels.conftest import grid

    g = grid({"x": [16384.0, 12288.0 * 3]}, lambda x: x / 7)
    doc_points = [16384, 36864]
    from kvroof.kernels.tables import Table, Variant

    system = SystemTables("a", "", "", {}, 1.0, {}, {"t": Table(
        "t", "efficiency", (), ("x",), (Variant({}, g),), {})})
    out = to_json(system)["tables"]["t"]["variants"][0]
    assert out["grid"]["x"] == doc_points
    assert out["values"] == [round_value(16384 / 7), round_value(36864 / 7)]
    assert SIGNIFICANT_DIGITS == 4 and out["values"][0] == 2341


def test_every_shipped_file_round_trips(tmp_path: Path) -> None:
    for name in store.shipped():
        path = store.DATA_DIR / store.index()["accelerators"][name]["file"]
        system = read_system(path)
        assert system.accelerator == name
        copy = tmp_path / path.name
        write_system(system, copy)
        assert copy.read_bytes() == path.read_bytes(), name


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="other"), "not a kvroof-kernel-tables file"),
    (lambda d: d["tables"]["gemm"]["variants"][0]["values"].pop(), "values for a grid"),
    (lambda d: d["tables"]["gemm"]["variants"][0]["grid"]["m"].reverse(), "increasing"),
    (lambda d: d["tables"]["attention"]["variants"][0].update(measured="1"), "one 0/1"),
    (lambda d: d["tables"]["gemm"].pop("axes"), "'axes'"),
    (lambda d: d.pop("peaks"), "'peaks'"),
])
def test_malformed_files_are_refused(system: SystemTables, tmp_path: Path, edit, message
                                     ) -> None:
    doc = to_json(system)
    edit(doc)
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(KernelTableError, match=message):
        read_system(path)


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(KernelTableError, match="unreadable"):
        read_system(path)

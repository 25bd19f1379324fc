"""The columnar Workload: validation, kappa_ratio's edge cases, filter, concat, to_pandas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload import records
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload, WorkloadBuilder


def test_from_columns_defaults_to_unknown() -> None:
    w = Workload.from_columns([3, 4], [10, 0], name="w")
    assert len(w) == 2
    assert w.output_tokens.tolist() == [UNKNOWN_OUTPUT, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["", ""]
    assert w.arrival_time is None
    assert w.new_tokens.dtype == np.int64 and w.cached_tokens.dtype == np.int64
    assert not w.synthetic and w.skipped == 0


def test_kappa_ratio_edge_cases() -> None:
    # K/T: 100/4 = 25; K = 0 gives 0 whatever T (0/0 included); T = 0 < K gives +inf.
    w = Workload.from_columns([4, 0, 0, 10], [100, 0, 7, 0])
    kappa = w.kappa_ratio()
    assert kappa[0] == 25.0
    assert kappa[1] == 0.0
    assert math.isinf(kappa[2]) and kappa[2] > 0
    assert kappa[3] == 0.0
    assert not np.any(np.isnan(kappa))


def test_columns_are_read_only_copies() -> None:
    t = np.array([1, 2])
    w = Workload.from_columns(t, [0, 0])
    t[0] = 99
    assert w.new_tokens[0] == 1
    with pytest.raises(ValueError, match="read-only"):
        w.new_tokens[0] = 5


@pytest.mark.parametrize(
    ("new", "cached", "message"),
    [
        ([1, -2], [0, 0], "new_tokens: values must be >= 0"),
        ([1, 2], [0, -1], "cached_tokens: values must be >= 0"),
        ([1.5, 2], [0, 0], "whole numbers"),
        ([1, 2], [0], "columns differ in length"),
        (["a", "b"], [0, 0], "expected integers"),
        ([[1, 2]], [[0, 0]], "1-D"),
    ],
)
def test_bad_columns(new: list[object], cached: list[object], message: str) -> None:
    with pytest.raises(KvroofError, match=message):
        Workload.from_columns(new, cached)


def test_integral_floats_are_accepted() -> None:
    assert Workload.from_columns([2.0], [5.0]).new_tokens.tolist() == [2]


def test_output_below_minus_one_is_rejected() -> None:
    with pytest.raises(KvroofError, match="output_tokens: values must be >= -1"):
        Workload.from_columns([1], [1], output_tokens=[-2])


def test_arrival_time_must_not_be_infinite() -> None:
    with pytest.raises(KvroofError, match="arrival_time"):
        Workload.from_columns([1], [1], arrival_time=[math.inf])


def test_filter_keeps_metadata() -> None:
    w = Workload.from_columns([1, 2, 3], [10, 20, 30], group_id=["a", "b", "c"],
                              arrival_time=[0.0, 1.0, 2.0], name="w", synthetic=True,
                              source="s", skipped=4)
    kept = w.filter(w.cached_tokens > 15)
    assert kept.new_tokens.tolist() == [2, 3]
    assert kept.group_id.tolist() == ["b", "c"]
    assert kept.arrival_time is not None and kept.arrival_time.tolist() == [1.0, 2.0]
    assert (kept.name, kept.synthetic, kept.source, kept.skipped) == ("w", True, "s", 4)


def test_filter_needs_one_boolean_per_request() -> None:
    w = Workload.from_columns([1, 2], [0, 0])
    with pytest.raises(KvroofError, match="expected 2 booleans"):
        w.filter([0, 1])
    with pytest.raises(KvroofError, match="expected 2 booleans"):
        w.filter([True])


def test_concat() -> None:
    real = Workload.from_columns([1], [2], arrival_time=[5.0], name="real", source="a",
                                 skipped=1)
    fake = Workload.from_columns([3, 4], [5, 6], name="fake", synthetic=True, source="b",
                                 skipped=2)
    both = Workload.concat([real, fake])
    assert both.new_tokens.tolist() == [1, 3, 4]
    assert both.cached_tokens.tolist() == [2, 5, 6]
    assert both.synthetic  # one synthetic part labels the whole
    assert both.skipped == 3
    assert both.name == "real+fake" and both.source == "a; b"
    assert both.arrival_time is not None
    assert both.arrival_time[0] == 5.0 and np.isnan(both.arrival_time[1:]).all()
    assert Workload.concat([fake, fake], name="x").arrival_time is None
    with pytest.raises(KvroofError, match="no workloads"):
        Workload.concat([])


def test_group_ids_become_text() -> None:
    w = Workload.from_columns([1, 1], [0, 0], group_id=[7, "b"])
    assert w.group_id.tolist() == ["7", "b"]


def test_builder_round_trip() -> None:
    builder = WorkloadBuilder(timed=True)
    builder.add(5, 0, 7, "g", 1.5)
    builder.add(2, 5)
    w = builder.build("b", "src", synthetic=False, skipped=1)
    assert w.new_tokens.tolist() == [5, 2]
    assert w.cached_tokens.tolist() == [0, 5]
    assert w.output_tokens.tolist() == [7, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["g", ""]
    assert w.arrival_time is not None and w.arrival_time[0] == 1.5
    assert np.isnan(w.arrival_time[1])
    assert WorkloadBuilder().build("e", "").arrival_time is None


def test_to_pandas_without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr(records, "import_module", missing)
    with pytest.raises(KvroofError, match=r"needs pandas.*pip install pandas"):
        Workload.from_columns([1], [1]).to_pandas()


def test_to_pandas() -> None:
    pytest.importorskip("pandas")
    w = Workload.from_columns([4, 2], [100, 0], output_tokens=[9, -1], group_id=["a", "b"],
                              name="w", synthetic=True)
    frame = w.to_pandas()
    assert list(frame.columns) == [
        "new_tokens", "cached_tokens", "kappa_ratio", "output_tokens", "group_id"
    ]
    assert frame["kappa_ratio"].tolist() == [25.0, 0.0]
    assert frame["output_tokens"].iloc[0] == 9 and frame["output_tokens"].isna().iloc[1]
    assert frame.attrs["synthetic"] is True and frame.attrs["name"] == "w"

"""describe(): percentiles, IQR and means of T, K and kappa_ratio, with +inf handled."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.records import Workload
from kvroof.workload.stats import PERCENTILES, describe, percentiles, summarize


def test_percentiles_by_hand() -> None:
    # 5 values: the q-th percentile sits at position q/100 x 4 of [1, 2, 3, 4, 5]
    p = percentiles([5, 3, 1, 4, 2]).tolist()
    # p10: pos 0.4 -> 1 + 0.4 = 1.4; p25: pos 1 -> 2; p50: pos 2 -> 3; p75: pos 3 -> 4;
    # p90: pos 3.6 -> 4.6; p99: pos 3.96 -> 4.96
    assert p == pytest.approx([1.4, 2.0, 3.0, 4.0, 4.6, 4.96])


def test_percentiles_match_numpy_on_finite_data() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 1000):
        values = rng.lognormal(3, 2, n)
        assert percentiles(values) == pytest.approx(np.percentile(values, PERCENTILES))


def test_infinite_values() -> None:
    # sorted [1, 2, inf]: positions q/100 x 2
    d = summarize([2.0, math.inf, 1.0])
    assert d.p25 == 1.5           # pos 0.5: between 1 and 2
    assert d.p50 == 2.0           # pos 1: exactly the 2
    assert math.isinf(d.p75)      # pos 1.5: between 2 and inf -> inf (never NaN)
    assert math.isinf(d.iqr)
    assert d.mean == 1.5          # mean of the finite values 1, 2
    assert d.infinite == 1
    assert math.isnan(summarize([math.inf]).mean)


def test_describe() -> None:
    w = Workload.from_columns([10, 20, 0, 40], [1000, 0, 50, 400],
                              output_tokens=[5, -1, 7, -1], name="w", skipped=2)
    s = describe(w)
    # T sorted [0, 10, 20, 40]: median (10 + 20) / 2 = 15, mean 70 / 4 = 17.5
    assert s.new_tokens.p50 == 15 and s.new_tokens.mean == 17.5
    # K sorted [0, 50, 400, 1000]: median 225
    assert s.cached_tokens.p50 == 225
    # kappa: 1000/10 = 100, 0 (K = 0), inf (T = 0), 400/40 = 10 -> sorted [0, 10, 100, inf]
    assert s.kappa_ratio.p50 == 55       # (10 + 100) / 2
    assert s.kappa_ratio.infinite == 1
    assert s.kappa_ratio.mean == pytest.approx(110 / 3)
    # outputs known for 2 requests: 5 and 7
    assert s.output_known == 2
    assert s.output_tokens is not None and s.output_tokens.p50 == 6
    assert (s.count, s.skipped, s.name, s.synthetic) == (4, 2, "w", False)
    assert s.as_dict()["kappa_ratio"]["p50"] == 55


def test_describe_without_outputs_and_empty() -> None:
    assert describe(Workload.from_columns([1], [1])).output_tokens is None
    with pytest.raises(KvroofError, match="has no requests"):
        describe(Workload.from_columns([], []))

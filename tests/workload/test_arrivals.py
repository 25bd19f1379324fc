"""Arrival processes and output-length distributions: moments against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.arrivals import gamma_times, output_lengths, poisson_times, scale_times


def test_poisson_rate_and_seed() -> None:
    """100,000 exponential gaps of mean 1/50 s: the sample mean is within 1% (its standard
    error is 1/sqrt(1e5) = 0.3% of the mean)."""
    times = poisson_times(100_000, 50.0, seed=3)
    gaps = np.diff(times, prepend=0.0)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.01)
    assert np.all(gaps > 0)
    assert np.array_equal(times, poisson_times(100_000, 50.0, seed=3))


def test_gamma_burstiness() -> None:
    """Gamma gaps with CV 3 (shape 1/9): mean 1/10 s and coefficient of variation 3 within 5%
    over 200,000 gaps."""
    gaps = np.diff(gamma_times(200_000, 10.0, 3.0, seed=1), prepend=0.0)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.05)


def test_scale_and_outputs() -> None:
    assert scale_times([0.0, 2.0, 4.0], 2.0).tolist() == [0.0, 1.0, 2.0]
    assert output_lengths("7", 3).tolist() == [7, 7, 7]
    exp = output_lengths("exp:100", 100_000, seed=2)
    assert exp.min() >= 1 and exp.mean() == pytest.approx(100.5, rel=0.02)  # ceil adds ~0.5
    uni = output_lengths("uniform:2:4", 1000)
    assert set(uni.tolist()) == {2, 3, 4}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: poisson_times(5, 0.0), "rps: must be a positive number"),
    (lambda: poisson_times(5, -1.0), "rps: must be a positive number"),
    (lambda: gamma_times(5, 1.0, 0.0), "burstiness"),
    (lambda: scale_times([1.0], 0), "time_scale"),
    (lambda: output_lengths("0", 3), "output lengths"),
    (lambda: output_lengths("exp:abc", 3), "output lengths"),
    (lambda: output_lengths("uniform:5:2", 3), "output lengths"),
])
def test_bad_parameters(call: object, message: str) -> None:
    with pytest.raises(KvroofError, match=message):
        call()  # type: ignore[operator]

"""Arrival times and output lengths for a request trace.

- ``poisson``: independent exponential gaps of mean ``1 / rps`` (an open loop at ``rps``
  requests per second); the first request arrives after the first gap.
- ``gamma``: gamma-distributed gaps with mean ``1 / rps`` and coefficient of variation ``cv``
  (shape ``1 / cv^2``): ``cv = 1`` is Poisson, larger is burstier, smaller more regular.
- ``scale_times``: a trace's own timestamps replayed ``time_scale`` times faster.
- Output lengths (``output_lengths``): a constant ``N``, ``exp:MEAN`` (exponential rounded up to
  a whole token, so at least 1) or ``uniform:LO:HI`` (integers, both ends included).

Every draw comes from a seeded ``numpy.random.Generator``: the same seed gives the same times.
A closed loop of N users (each sends its next request when the previous one finishes) depends on
the simulation, so it lives there (:mod:`kvroof.simulate.runner`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError

__all__ = ["gamma_times", "output_lengths", "poisson_times", "scale_times"]


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise KvroofError(f"{name}: must be a positive number, got {value!r}")
    return float(value)


def _count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise KvroofError(f"number of requests must be a non-negative integer, got {n!r}")
    return n


def _seed(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise KvroofError(f"seed: must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(seed)


def poisson_times(n: int, rps: float, seed: int = 0) -> NDArray[np.float64]:
    """Arrival times (s) of ``n`` requests, Poisson at ``rps`` requests per second."""
    rate = _positive("rps", rps)
    gaps = _seed(seed).exponential(1.0 / rate, _count(n))
    return np.cumsum(gaps)


def gamma_times(n: int, rps: float, cv: float, seed: int = 0) -> NDArray[np.float64]:
    """Arrival times (s) with gamma gaps of mean ``1 / rps`` and coefficient of variation
    ``cv``."""
    rate = _positive("rps", rps)
    shape = 1.0 / _positive("burstiness (cv)", cv) ** 2
    gaps = _seed(seed).gamma(shape, 1.0 / (rate * shape), _count(n))
    return np.cumsum(gaps)


def scale_times(times: ArrayLike, time_scale: float) -> NDArray[np.float64]:
    """A trace's timestamps replayed ``time_scale`` times faster (2 halves every gap)."""
    factor = _positive("time_scale", time_scale)
    result: NDArray[np.float64] = np.asarray(times, dtype=np.float64) / factor
    return result


def output_lengths(spec: str, n: int, seed: int = 0) -> NDArray[np.int64]:
    """``n`` output lengths from ``spec``: ``N``, ``exp:MEAN`` or ``uniform:LO:HI``."""
    count = _count(n)
    text = str(spec).strip().lower()
    kind, _, rest = text.partition(":")
    rng = _seed(seed)
    try:
        if not rest:
            value = int(kind)
            if value < 1:
                raise ValueError
            return np.full(count, value, dtype=np.int64)
        if kind == "exp":
            mean = float(rest)
            if not (math.isfinite(mean) and mean >= 1):
                raise ValueError
            return np.maximum(1, np.ceil(rng.exponential(mean, count))).astype(np.int64)
        if kind == "uniform":
            lo_text, _, hi_text = rest.partition(":")
            lo, hi = int(lo_text), int(hi_text)
            if not 1 <= lo <= hi:
                raise ValueError
            return rng.integers(lo, hi + 1, count).astype(np.int64)
    except ValueError:
        pass
    raise KvroofError(f"output lengths: expected a positive integer N, exp:MEAN (MEAN >= 1) or "
                      f"uniform:LO:HI (1 <= LO <= HI), got {spec!r}")

"""Summary statistics of workload columns: percentiles, IQR and means, and the
:class:`WorkloadStats` record that collects them for T, K, kappa_ratio and output lengths.

This module works on plain columns (numpy arrays), never on a :class:`Workload`, so that the
workload itself can show its statistics (its notebook view) while
:func:`kvroof.workload.stats.describe`, which takes a workload, sits above both.

Percentiles use linear interpolation between order statistics (numpy's default "linear"
method: the q-th percentile of n sorted values sits at position ``q/100 * (n - 1)``). The
kappa ratio is +inf for requests with ``T == 0 < K`` (see :meth:`Workload.kappa_ratio`); such
values sort above every finite one, a percentile that falls on or next to one is +inf (it is
never NaN), and the mean is taken over the finite values with the number of infinite ones
reported beside it. Model- and system-dependent figures (transfer-bound shares, TTFT) build on
this module and live elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError, short_repr

__all__ = [
    "PERCENTILES",
    "Distribution",
    "WorkloadStats",
    "percentiles",
    "summarize",
    "workload_stats",
]

PERCENTILES = (10, 25, 50, 75, 90, 99)


def percentiles(values: ArrayLike, qs: ArrayLike = PERCENTILES) -> NDArray[np.float64]:
    """Linear-interpolation percentiles of ``values`` (any order), +inf-aware: equal to
    ``numpy.percentile`` on finite data; a percentile whose neighbours include +inf is +inf."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if ordered.size == 0:
        raise KvroofError("percentiles of no values")
    if np.any(np.isnan(ordered)):
        raise KvroofError("percentiles: NaN in the values")
    position = np.asarray(qs, dtype=np.float64) / 100.0 * (ordered.size - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, ordered.size - 1)
    fraction = position - low
    below = ordered[low]
    above = ordered[high]
    with np.errstate(invalid="ignore"):
        between = below + (above - below) * fraction
    result: NDArray[np.float64] = np.where(
        fraction == 0, below, np.where(np.isinf(above), np.inf, between)
    )
    return result


@dataclass(frozen=True)
class Distribution:
    """Percentiles, IQR (p75 - p25) and mean of one column; ``infinite`` counts +inf values
    (left out of the mean; NaN mean if every value is infinite)."""

    p10: float
    p25: float
    p50: float
    p75: float
    p90: float
    p99: float
    iqr: float
    mean: float
    infinite: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(values: ArrayLike) -> Distribution:
    """The :class:`Distribution` of ``values`` (finite numbers and +inf)."""
    array = np.asarray(values, dtype=np.float64)
    p10, p25, p50, p75, p90, p99 = (float(v) for v in percentiles(array))
    finite = array[np.isfinite(array)]
    mean = float(finite.mean()) if finite.size else math.nan
    iqr = math.inf if math.isinf(p75) else p75 - p25
    return Distribution(p10, p25, p50, p75, p90, p99, iqr, mean, int(array.size - finite.size))


@dataclass(frozen=True)
class WorkloadStats:
    """What :func:`kvroof.workload.stats.describe` reports about a workload."""

    name: str
    synthetic: bool
    source: str
    count: int
    skipped: int
    new_tokens: Distribution
    cached_tokens: Distribution
    kappa_ratio: Distribution
    output_tokens: Distribution | None
    """Over the requests with a known output length (None if there are none)."""
    output_known: int

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON (infinities stay floats; the CLI writes them as null)."""
        return asdict(self)

    def _columns(self) -> dict[str, Distribution | None]:
        return {"new_tokens": self.new_tokens, "cached_tokens": self.cached_tokens,
                "kappa_ratio": self.kappa_ratio, "output_tokens": self.output_tokens}

    def to_frame(self) -> Any:
        """A pandas DataFrame: one row per statistic (p10 ... p99, iqr, mean, infinite), one
        column per quantity (``new_tokens``, ``cached_tokens``, ``kappa_ratio``,
        ``output_tokens``)."""
        from kvroof.display import require_pandas

        pandas = require_pandas()
        data = {name: dist.as_dict() for name, dist in self._columns().items() if dist}
        return pandas.DataFrame(data)

    def _repr_html_(self) -> str:
        from kvroof.display import html_table, number

        columns = {name: dist for name, dist in self._columns().items() if dist is not None}
        statistics = ["p10", "p25", "p50", "p75", "p90", "p99", "iqr", "mean"]
        rows = [[stat, *(number(getattr(dist, stat)) for dist in columns.values())]
                for stat in statistics]
        title = (f"{self.name}{' (SYNTHETIC)' if self.synthetic else ''}: {self.count:,} "
                 f"requests ({self.skipped} skipped)")
        return html_table(rows, title, ["statistic", *columns])


def workload_stats(
    *,
    name: str,
    synthetic: bool,
    source: str,
    skipped: int,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    kappa_ratio: ArrayLike,
    known_output_tokens: ArrayLike,
) -> WorkloadStats:
    """The :class:`WorkloadStats` of a workload given as columns (one value per request;
    ``known_output_tokens`` holds only the requests whose output length is known)."""
    new = np.asarray(new_tokens)
    if new.size == 0:
        raise KvroofError(f"workload {short_repr(name)} has no requests")
    known = np.asarray(known_output_tokens)
    return WorkloadStats(
        name=name,
        synthetic=synthetic,
        source=source,
        count=int(new.size),
        skipped=skipped,
        new_tokens=summarize(new),
        cached_tokens=summarize(cached_tokens),
        kappa_ratio=summarize(kappa_ratio),
        output_tokens=summarize(known) if known.size else None,
        output_known=int(known.size),
    )

"""The copy-size fit: per copy method, the per-copy overhead and the share of the link that
large copies reach, fitted to the published copy measurements marked ``in_fit``.

The model is :mod:`kvroof.cost.copy_size`: one copy of ``S`` bytes over a link of peak ``BW``
(per direction) takes ``overhead + S / (share x BW)``. The fit minimizes the squared log error of
the per-copy time over the points of one method (a vectorized grid search, coarse then fine).
A parameter is fitted only where the points determine it: the overhead needs a copy of at most
:data:`SMALL_COPY` bytes (below it a microsecond overhead is comparable to the wire time), the
share a copy of at least :data:`LARGE_COPY`. Otherwise it keeps its default: the 2 us per copy
every built-in link spec assumes (:data:`DEFAULT_OVERHEAD`) and the link's full bandwidth.

The fit subset is named in the data: the host-to-device link cases with ``in_fit: true`` (NVIDIA
copy microbenchmarks and the one small-copy measurement). :func:`leave_one_source_out` refits
without each source in turn, for the held-out errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from kvroof.cost.copy_size import copy_time
from kvroof.specs.engine import COPY_METHODS, CopyMethod
from kvroof.specs.registry import Registry
from kvroof.validation.cases import CaseFile
from kvroof.validation.predict import CopyParams, case_link

__all__ = ["DEFAULT_OVERHEAD", "LARGE_COPY", "SMALL_COPY", "CopyFit", "FitPoint", "as_params",
           "fit_copy_methods", "fit_method", "fit_points", "leave_one_source_out"]

SMALL_COPY: Final = 64 * 1024
"""Bytes: the overhead is fitted only if some point copies at most this much."""
LARGE_COPY: Final = 1024 * 1024
"""Bytes: the share is fitted only if some point copies at least this much."""
DEFAULT_OVERHEAD: Final = 2e-6
"""Seconds per copy when no point determines it: the latency of every built-in link spec."""
DEFAULT_SHARE: Final = 1.0


@dataclass(frozen=True)
class FitPoint:
    """One measured copy: its size, the link's peak for its direction, the time of one copy."""

    case_id: str
    source: str
    method: CopyMethod
    size: float
    link_bandwidth: float
    seconds: float


@dataclass(frozen=True)
class CopyFit:
    """The fitted parameters of one copy method and how well they reproduce their points."""

    method: CopyMethod
    overhead: float
    share: float
    overhead_fitted: bool
    share_fitted: bool
    points: tuple[FitPoint, ...]

    def predicted_seconds(self, point: FitPoint) -> float:
        """The model's time for ``point`` with these parameters
        (:func:`kvroof.cost.copy_size.copy_time`)."""
        return float(copy_time(point.size, self.overhead, self.share * point.link_bandwidth))

    @property
    def ratios(self) -> list[float]:
        """Predicted over measured time for each point."""
        return [self.predicted_seconds(p) / p.seconds for p in self.points]

    @property
    def max_error(self) -> float:
        """The largest factor error over the points, ``max(r, 1/r) - 1`` with ``r`` predicted
        over measured time (0.4: every point within a factor 1.4 of its measurement, either way;
        the same for bandwidths, whose ratio is ``1/r``). 0 without points."""
        return max((max(r, 1.0 / r) - 1.0 for r in self.ratios), default=0.0)

    @property
    def rms_log_error(self) -> float:
        """Root mean square of ``ln(predicted / measured)`` over the points."""
        ratios = self.ratios
        if not ratios:
            return 0.0
        return math.sqrt(sum(math.log(r) ** 2 for r in ratios) / len(ratios))

    @property
    def sources(self) -> list[str]:
        """The sources of the points, in order of first appearance."""
        return list(dict.fromkeys(p.source for p in self.points))

    def params(self) -> dict[str, float]:
        """The engine fields this fit sets (``copy_overhead``, ``link_share``)."""
        return {"copy_overhead": self.overhead, "link_share": self.share}


def fit_points(files: Sequence[CaseFile], registry: Registry) -> list[FitPoint]:
    """The ``in_fit`` cases as copies: per-copy size, link peak and measured time."""
    points: list[FitPoint] = []
    for loaded in files:
        for case in loaded.cases:
            if not case.in_fit:
                continue
            assert case.copy_size is not None
            method = registry.engine(case.engine).copy_method
            peak = case_link(case, registry).peak_bandwidth
            if case.quantity == "link_bandwidth":
                seconds = case.copy_size / case.measured
            else:
                seconds = case.measured / case.copies
            points.append(FitPoint(case.id, loaded.name, method, case.copy_size, peak, seconds))
    return points


def _search(points: Sequence[FitPoint], overheads: np.ndarray, shares: np.ndarray
            ) -> tuple[float, float]:
    size = np.array([p.size for p in points])
    bandwidth = np.array([p.link_bandwidth for p in points])
    measured = np.log(np.array([p.seconds for p in points]))
    predicted = copy_time(size[None, None, :], overheads[:, None, None],
                          shares[None, :, None] * bandwidth[None, None, :])
    loss = np.sum((np.log(predicted) - measured) ** 2, axis=-1)
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return float(overheads[i]), float(shares[j])


def fit_method(method: CopyMethod, points: Sequence[FitPoint]) -> CopyFit:
    """Fit one method's overhead and share to ``points`` (module docstring)."""
    mine = tuple(p for p in points if p.method == method)
    fit_overhead = any(p.size <= SMALL_COPY for p in mine)
    fit_share = any(p.size >= LARGE_COPY for p in mine)
    overhead, share = DEFAULT_OVERHEAD, DEFAULT_SHARE
    if fit_overhead or fit_share:
        overheads = np.logspace(-8, -3, 101) if fit_overhead else np.array([overhead])
        shares = np.linspace(0.01, 1.0, 100) if fit_share else np.array([share])
        overhead, share = _search(mine, overheads, shares)
        if fit_overhead:  # refine around the coarse optimum
            overheads = overhead * np.logspace(-0.06, 0.06, 121)
        if fit_share:
            shares = np.clip(np.linspace(share - 0.011, share + 0.011, 221), 1e-3, 1.0)
        overhead, share = _search(mine, overheads, shares)
    return CopyFit(method, overhead, share, fit_overhead, fit_share, mine)


def fit_copy_methods(points: Sequence[FitPoint]) -> dict[str, CopyFit]:
    """A fit per copy method (:data:`kvroof.specs.engine.COPY_METHODS`)."""
    return {method: fit_method(method, points) for method in COPY_METHODS}


def as_params(fits: dict[str, CopyFit]) -> CopyParams:
    """The fits as the engine fields they replace, per copy method."""
    return {method: fit.params() for method, fit in fits.items()}


def leave_one_source_out(points: Sequence[FitPoint]) -> dict[str, dict[str, CopyFit]]:
    """For each source with fitted points: the fits without that source's points."""
    sources = dict.fromkeys(p.source for p in points)
    return {source: fit_copy_methods([p for p in points if p.source != source])
            for source in sources}

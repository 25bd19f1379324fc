"""Summary statistics of a workload: :func:`describe` gives the percentiles, IQR and means of
T, K and kappa_ratio (and of the known output lengths) of a :class:`Workload`.

The statistics themselves (:func:`percentiles`, :func:`summarize`, :class:`Distribution`,
:class:`WorkloadStats`) work on plain columns and live in :mod:`kvroof.workload.summary`,
below the workload type; they are imported here so that this module keeps offering them.
"""

from __future__ import annotations

from kvroof.workload.records import Workload
from kvroof.workload.summary import (
    PERCENTILES,
    Distribution,
    WorkloadStats,
    percentiles,
    summarize,
    workload_stats,
)

__all__ = ["PERCENTILES", "Distribution", "WorkloadStats", "describe", "percentiles", "summarize"]


def describe(workload: Workload) -> WorkloadStats:
    """Percentiles, IQR and means of T, K and kappa_ratio (and of known output lengths)."""
    return workload_stats(
        name=workload.name,
        synthetic=workload.synthetic,
        source=workload.source,
        skipped=workload.skipped,
        new_tokens=workload.new_tokens,
        cached_tokens=workload.cached_tokens,
        kappa_ratio=workload.kappa_ratio(),
        known_output_tokens=workload.output_tokens[workload.output_known],
    )

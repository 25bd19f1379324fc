"""How a request's transfer and compute combine into its time to first token: the overlap modes.

- ``serial`` (the paper's Eq. 5): ``t_x + t_c``; ``ideal``: ``max(t_x, t_c)``;
- ``layerwise`` (load layer ``i+1`` while computing layer ``i``), with ``x = t_x/L`` and
  ``c = t_c/L``: ``x + (L-1) x max(x, c) + c``. Always ``serial >= layerwise >= ideal``.

An overlap efficiency ``eta`` below 1 (a calibrated system's, or the deployment's
``overlap_efficiency``) hides only ``eta`` of the shorter side: each ``max(a, b)`` above becomes
``max(a, b) + (1 - eta) x min(a, b)``. The default mode is the deployment's engine's
(:func:`default_overlap`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from kvroof.cost.checks import maximum, minimum, scalar_or_array
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.errors import KvroofError

__all__ = ["OVERLAP_MODES", "Overlap", "check_overlap", "combine_overlap", "default_overlap",
           "overlapped_time"]

Overlap = Literal["serial", "layerwise", "ideal"]
OVERLAP_MODES: tuple[Overlap, ...] = ("serial", "layerwise", "ideal")


def combine_overlap(
    transfer: Any, compute: Any, layers: int, overlap: Overlap, efficiency: Any = 1.0
) -> Any:
    """TTFT from transfer and compute seconds under an overlap mode (broadcasts); ``efficiency``
    is the share of the shorter side that overlap hides."""
    mode = check_overlap(overlap)
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    eta = np.asarray(efficiency, dtype=np.float64)
    return scalar_or_array(np.asarray(overlapped_time(x, c, layers, mode,
                                                      float(eta) if eta.ndim == 0 else eta)))


def overlapped_time(x: Any, c: Any, layers: int, overlap: Overlap, eta: Any) -> Any:
    """:func:`combine_overlap` for validated floats or arrays."""
    if overlap == "serial":
        return x + c
    overlapped = maximum(x, c)
    if not (type(eta) is float and eta == 1.0):
        overlapped = overlapped + (1.0 - eta) * minimum(x, c)
    if overlap == "ideal":
        return overlapped
    return (x + c) / layers + (layers - 1) * overlapped / layers


def default_overlap(dep: DeploymentSettings) -> Overlap:
    """The overlap a deployment's engine loads with (``layerwise`` for layer-wise loading,
    ``serial`` for a whole prefix), else ``serial``."""
    engine = dep.engine
    return "layerwise" if engine is not None and engine.loading == "layerwise" else "serial"


def check_overlap(overlap: str) -> Overlap:
    """``overlap`` as an :data:`Overlap` mode, or a one-line error naming the modes."""
    for mode in OVERLAP_MODES:
        if overlap == mode:
            return mode
    raise KvroofError(f"overlap: expected one of {', '.join(OVERLAP_MODES)}, got {overlap!r}")

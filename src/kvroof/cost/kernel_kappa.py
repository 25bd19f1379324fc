"""kappa_crit in kernel mode: where the transfer of ``K`` cached tokens overtakes the compute of
``T`` new ones for good, when compute is timed op by op (:mod:`kvroof.cost.kernel_time`).

Kernel-mode compute is not piecewise affine in ``K`` (the attention efficiency is interpolated
in ``log(K + T)``), so the closed form of :mod:`kvroof.cost.kappa` does not apply. Beyond the
tables' largest sequence (and every window and top-k cap) both sides are affine in ``K`` again,
so the far end is read off two points ``F`` and ``2F`` (``F >= 2^30``):

- transfer below compute at ``F`` and gaining on it: the crossing lies beyond ``F``, where both
  are affine (``K* = F - d(F) / d'``);
- transfer below compute at ``F`` and not gaining: never transfer-bound (``inf``);
- transfer above compute at ``F`` but losing ground: transfer-bound only for a band of ``K``
  (``inf``, with the band's reason);
- otherwise the last ``K`` in ``[0, F]`` at which compute still exceeds the transfer is found by
  a scan of a log grid (30 points a decade from one token) and bisection of the last sign
  change; ``K*`` is that crossing.

Every step is vectorized over ``T`` (and array settings): a grid of T is one scan and one
bisection. The tests check the result against a token-by-token scan and check that transfer and
compute are equal at ``K*``.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.bisection import bisect_rise
from kvroof.cost.compute import iteration_tokens_for
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa_result import KappaResult
from kvroof.cost.kernel_time import kernel_compute_time
from kvroof.cost.transfer import transfer_time

__all__ = ["METHOD", "kernel_difference", "kernel_kappa_crit", "kernel_slope_margin"]

METHOD: Final = "kernels: bracketed root"
_FAR: Final = float(2**30)
_PER_DECADE: Final = 30

FloatArray = NDArray[np.float64]


def kernel_difference(dep: Deployment, t: Any, k: Any) -> FloatArray:
    """transfer - compute (kernel mode) at (T, K): positive where transfer-bound."""
    x = np.asarray(transfer_time(dep, k, t), dtype=np.float64)
    c = np.asarray(kernel_compute_time(dep, t, k, iteration_tokens_for(dep, t)),
                   dtype=np.float64)
    return x - c


def _far(dep: Deployment, t: FloatArray) -> float:
    """A power of two beyond every window, top-k cap and table edge (at least ``2^30``)."""
    terms = dep.terms
    spans = [w for w, _ in terms.read.windows + terms.load.windows + terms.copies.windows]
    spans += [c for c, _ in terms.read.chunks + terms.load.chunks]
    caps = [topk * float(np.max(t)) for topk, _ in terms.read.caps] if t.size else []
    top = max(spans + caps, default=0.0)
    return float(2 ** max(30, math.ceil(math.log2(max(4.0 * top, 1.0)))))


def kernel_slope_margin(dep: Deployment, t: Any) -> FloatArray:
    """Seconds a further cached token adds to the transfer minus what it adds to the compute,
    far beyond every table edge: positive where large ``K`` is transfer-bound."""
    t_arr = np.asarray(t, dtype=np.float64)
    far = _far(dep, t_arr)
    slope: FloatArray = (kernel_difference(dep, t_arr, 2.0 * far)
                         - kernel_difference(dep, t_arr, far)) / far
    return slope


def kernel_kappa_crit(dep: Deployment, new_tokens: Any) -> KappaResult:
    """kappa_crit = K*/T for each validated ``new_tokens`` (module docstring)."""
    t = np.asarray(new_tokens, dtype=np.float64)
    far = _far(dep, t)
    d_far = kernel_difference(dep, t, far)
    slope = (kernel_difference(dep, t, 2.0 * far) - d_far) / far
    shape = d_far.shape
    t_full = np.broadcast_to(t, shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = np.where((d_far < 0) & (slope > 0), far - d_far / np.where(slope > 0, slope,
                                                                            1.0), np.inf)
    band = (d_far >= 0) & (slope < 0)
    inside = (d_far >= 0) & ~band
    k_star = np.where(band, np.inf, beyond)
    if np.any(inside):
        k_star = np.where(inside, _scan(dep, t_full, far, shape), k_star)
    if k_star.ndim == 0:
        value = float(k_star)
        never = math.isinf(value)
        return KappaResult(float(t), value / float(t), value, never,
                           bool(band) if never else False, METHOD)
    never_arr = np.isinf(k_star)
    return KappaResult(new_tokens=np.array(t_full, dtype=np.float64), kappa_crit=k_star / t_full,
                       crossover_tokens=k_star, never_transfer_bound=never_arr,
                       band=np.asarray(band, dtype=bool), method=METHOD)


def _scan(dep: Deployment, t: FloatArray, far: float, shape: tuple[int, ...]) -> FloatArray:
    """The smallest ``K`` in ``[0, far]`` from which prefill stays transfer-bound up to
    ``far`` (0 when it is from the first cached token): the last sign change of a log-grid
    scan, bisected."""
    decades = math.log10(far)
    grid = np.concatenate([[0.0], np.logspace(0.0, decades, int(decades * _PER_DECADE) + 1)])
    ks = grid.reshape((-1,) + (1,) * len(shape))
    diff = np.broadcast_to(kernel_difference(dep, t, ks), (grid.size, *shape))
    below = diff < 0
    below[0] = True  # K = 0 loads nothing: the transfer-bound region starts above it
    last = grid.size - 1 - np.argmax(below[::-1], axis=0)
    if np.any(last == grid.size - 1):  # compute-bound at far itself: handled by the caller
        last = np.minimum(last, grid.size - 2)
    lo = grid[last]
    hi = grid[last + 1]
    at_zero = (last == 0) & (diff[1] >= 0)
    hi = bisect_rise(lambda k: kernel_difference(dep, t, k), lo, hi, 1e-10)
    result: FloatArray = np.where(at_zero, 0.0, hi)
    return result

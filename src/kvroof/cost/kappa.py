"""The critical cached-to-prefill token ratio kappa_crit, in the paper's form and in full.

Paper mode (Meng, Lee, Wang, arXiv 2601.19910, Eq. 6)::

    kappa_M  = 2 x N_active / B_kv      (FLOP per byte of KV; a model property)
    kappa_HW = BW / C                   (bytes per FLOP; a hardware property)
    kappa_crit = kappa_M x kappa_HW

Full mode: the ``K/T`` at which the per-GPU transfer time equals the per-GPU compute time,
with everything the cost model counts (attention over the cached context, MLA up-projection,
TP, efficiencies, DRAM sharing, per-copy latency and granularity, tiers). Without sliding
windows both sides are affine in ``K`` (``t_x = x K + x0`` for ``K > 0``; ``t_c = c0 + s K``),
so ``K* = (c0 - x0) / (x - s)``; the coefficients are read off the same timing functions the
rest of kvroof uses (no formula is written twice). When ``x <= s`` the compute added by each
cached token (attention over it) costs at least as much as loading it, and prefill is never
transfer-bound at that ``T``: kappa_crit is ``inf`` and the result says why. With sliding
windows the sides are piecewise, and a bracketed root finder (a scan on a log grid, then
bisection) finds the first crossing; the tests check the two methods against each other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import FloatArray, nonnegative, positive, scalar_or_array, token_count
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.params import param_counts
from kvroof.cost.timing import compute_time
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError

__all__ = [
    "KappaResult",
    "PaperKappa",
    "SolveResult",
    "kappa_crit",
    "kappa_paper",
    "kappa_paper_for",
    "max_new_tokens_for_crossover",
    "required_bandwidth",
    "transfer_bound_compute",
]

Method = Literal["auto", "closed-form", "root-finding"]
_K_REF = float(2**30)  # far beyond any sliding window: the affine regime
_K_MAX = 1e13  # the root finder looks for a crossover below this many cached tokens
_NEVER = "never transfer-bound at this T: each cached token adds at least as much compute " \
         "(attention over it) as it costs to load"
_BAND = "not transfer-bound at large K: a fixed per-request transfer cost makes small K " \
        "transfer-bound, but each cached token adds more compute than transfer"


# -- paper mode -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PaperKappa:
    """The paper's three factors (SI: FLOP/B, B/FLOP, dimensionless) and their inputs."""

    kappa_model: Any
    kappa_hw: Any
    kappa_crit: Any
    active_params: Any
    kv_bytes_per_token: Any
    bandwidth: Any
    compute: Any


def kappa_paper(
    active_params: ArrayLike, kv_bytes_per_token: ArrayLike, bandwidth: ArrayLike,
    compute: ArrayLike,
) -> PaperKappa:
    """kappa_M = 2 N / B_kv, kappa_HW = BW / C, kappa_crit = their product (broadcasts)."""
    n = positive("active_params", active_params)
    b_kv = positive("kv_bytes_per_token", kv_bytes_per_token)
    bw = positive("bandwidth", bandwidth)
    c = positive("compute", compute)
    kappa_m = 2.0 * n / b_kv
    kappa_hw = bw / c
    return PaperKappa(
        kappa_model=scalar_or_array(kappa_m),
        kappa_hw=scalar_or_array(kappa_hw),
        kappa_crit=scalar_or_array(kappa_m * kappa_hw),
        active_params=scalar_or_array(n),
        kv_bytes_per_token=scalar_or_array(b_kv),
        bandwidth=scalar_or_array(bw),
        compute=scalar_or_array(c),
    )


def kappa_paper_for(dep: Deployment) -> PaperKappa:
    """Paper mode for a deployment: the model's published active parameters (computed ones
    when none are published), B_kv in ``dep.kv_dtype``, the per-GPU link bandwidth times
    ``link_efficiency`` (no DRAM bound, no latency) and the per-GPU peak compute times
    ``compute_efficiency`` (no TP, no attention)."""
    model = dep.model
    active = model.published.active if model.published else param_counts(model).active
    bandwidth = np.asarray(dep.link_bandwidth) * np.asarray(dep.link_efficiency)
    return kappa_paper(active, kv_bytes_per_token(model, dep.kv_dtype), bandwidth,
                       dep.effective_compute)


# -- full mode --------------------------------------------------------------------------------
@dataclass(frozen=True)
class KappaResult:
    """kappa_crit (full mode) for each T: ``inf`` where prefill is never transfer-bound."""

    new_tokens: Any
    kappa_crit: Any
    crossover_tokens: Any
    never_transfer_bound: Any
    reason: Any
    method: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "new_tokens": self.new_tokens,
            "kappa_crit": self.kappa_crit,
            "crossover_tokens": self.crossover_tokens,
            "never_transfer_bound": self.never_transfer_bound,
            "reason": self.reason,
            "method": self.method,
        }


def _difference(dep: Deployment, t: FloatArray, k: Any) -> FloatArray:
    """transfer - compute at (T, K): positive where transfer-bound."""
    x = np.asarray(transfer_time(dep, k), dtype=np.float64)
    c = np.asarray(compute_time(dep, t, k), dtype=np.float64)
    return x - c


def _affine_coefficients(dep: Deployment, t: FloatArray) -> tuple[FloatArray, ...]:
    """(x0, x, c0, s): t_x = x0 + x K (K > 0) and t_c = c0 + s K, read off the timings."""
    x1 = np.asarray(transfer_time(dep, _K_REF))
    x2 = np.asarray(transfer_time(dep, 2 * _K_REF))
    slope_x = (x2 - x1) / _K_REF
    c0 = np.asarray(compute_time(dep, t, 0.0))
    c1 = np.asarray(compute_time(dep, t, _K_REF))
    slope_c = (c1 - c0) / _K_REF
    return x1 - slope_x * _K_REF, slope_x, c0, slope_c


def _reasons(never: Any, band: Any = False) -> Any:
    """Why each kappa_crit is inf ('' where it is finite), as an object array (one reference
    per element, not a copy of the text)."""
    never_arr = np.asarray(never, dtype=bool)
    reasons = np.full(never_arr.shape, "", dtype=object)
    reasons[never_arr] = _NEVER
    reasons[np.broadcast_to(np.asarray(band, dtype=bool), never_arr.shape) & never_arr] = _BAND
    return reasons


def _closed_form(dep: Deployment, t: FloatArray) -> tuple[FloatArray, Any]:
    """K* (start of the transfer-bound region that extends to any K) and why it is inf."""
    x0, x, c0, s = _affine_coefficients(dep, t)
    gap = np.broadcast_to(x - s, np.broadcast_shapes(np.shape(x - s), t.shape, np.shape(c0)))
    head = np.broadcast_to(c0 - x0, gap.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        k_star = np.where(gap > 0, np.maximum(head, 0.0) / np.where(gap > 0, gap, 1.0), np.inf)
    return k_star, _reasons(gap <= 0, head <= 0)


def _root_finding(dep: Deployment, t: FloatArray, points: int = 160) -> tuple[FloatArray, Any]:
    """K* above which transfer >= compute up to 1e13 tokens: the last sign change on a log
    grid, then bisection in that bracket."""
    grid = np.concatenate([[0.0], np.geomspace(1e-3, _K_MAX, points)])
    shape = np.broadcast_shapes(t.shape, np.shape(_difference(dep, t, 1.0)))
    ks = grid.reshape((-1,) + (1,) * len(shape))
    diff = np.broadcast_to(_difference(dep, t, ks), (grid.size, *shape))
    below = diff < 0  # at K = 0 there is compute and no transfer, so index 0 is below
    last_below = grid.size - 1 - np.argmax(below[::-1], axis=0)
    found = last_below < grid.size - 1
    lo = grid[last_below]
    hi = grid[np.minimum(last_below + 1, grid.size - 1)]
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = _difference(dep, t, mid) >= 0
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(hi, 1.0)):
            break
    return np.where(found, hi, np.inf), _reasons(~found)


def kappa_crit(dep: Deployment, new_tokens: ArrayLike, method: Method = "auto") -> KappaResult:
    """Full-mode kappa_crit = K*/T for each ``new_tokens`` T (broadcasts with array settings).

    ``method``: ``closed-form`` (needs no sliding window), ``root-finding``, or ``auto``
    (closed form when it applies).
    """
    t = token_count("new_tokens", new_tokens, at_least_one=True)
    if method == "auto":
        method = "closed-form" if dep.model.sliding_window is None else "root-finding"
    if method == "closed-form":
        if dep.model.sliding_window is not None:
            raise KvroofError(
                f"method: {dep.model.name} has sliding-window layers, so transfer and compute "
                "are not affine in K; use root-finding"
            )
        k_star, reason = _closed_form(dep, t)
    elif method == "root-finding":
        k_star, reason = _root_finding(dep, t)
    else:
        raise KvroofError(f"method: expected auto, closed-form or root-finding, got {method!r}")
    never = np.isinf(k_star)
    return KappaResult(
        new_tokens=scalar_or_array(np.broadcast_to(t, k_star.shape).astype(np.float64)),
        kappa_crit=scalar_or_array(k_star / t),
        crossover_tokens=scalar_or_array(k_star),
        never_transfer_bound=bool(never) if never.ndim == 0 else never,
        reason=str(reason[()]) if reason.ndim == 0 else reason,
        method=method,
    )


def max_new_tokens_for_crossover(dep: Deployment, t_max: float = 1e12) -> Any:
    """The largest T at which prefill still turns transfer-bound for large K (inf when it does
    at every T up to ``t_max``; 0 when at none).

    For K beyond any sliding window each cached token costs ``x`` seconds to load and adds
    ``s(T)`` seconds of compute (attention of the T new tokens over it, the MLA up-projection);
    a crossover exists while ``x > s(T)``. ``s`` is read off :func:`compute_time` on a log grid
    of T and the last sign change is bisected, so calibrated efficiency curves (which make ``s``
    non-linear in T) are handled too."""
    x1 = np.asarray(transfer_time(dep, _K_REF), dtype=np.float64)
    x = (np.asarray(transfer_time(dep, 2 * _K_REF), dtype=np.float64) - x1) / _K_REF

    def margin(t: Any) -> FloatArray:
        c1 = np.asarray(compute_time(dep, t, _K_REF), dtype=np.float64)
        c2 = np.asarray(compute_time(dep, t, 2 * _K_REF), dtype=np.float64)
        result: FloatArray = x - (c2 - c1) / _K_REF
        return result

    grid = np.geomspace(1e-2, t_max, 300)
    shape = np.shape(margin(1.0))
    values = np.broadcast_to(margin(grid.reshape((-1,) + (1,) * len(shape))),
                             (grid.size, *shape))
    crossing = values > 0
    last = grid.size - 1 - np.argmax(crossing[::-1], axis=0)
    any_crossing = crossing.any(axis=0)
    at_top = crossing[-1]
    lo = np.log(grid[last])
    hi = np.log(grid[np.minimum(last + 1, grid.size - 1)])
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        positive_here = margin(np.exp(mid)) > 0
        lo = np.where(positive_here, mid, lo)
        hi = np.where(positive_here, hi, mid)
    result = np.where(at_top, np.inf, np.where(any_crossing, np.exp(lo), 0.0))
    return scalar_or_array(result)


# -- inverse solvers --------------------------------------------------------------------------
@dataclass(frozen=True)
class SolveResult:
    """A solved quantity (SI) and, where there is no solution, ``inf``/``0`` and why."""

    value: Any
    reason: Any


def _bisect_log(
    predicate: Any, lo: float, hi: float, shape: tuple[int, ...], iterations: int = 100
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Smallest x in [lo, hi] (log scale) with predicate(x) true, assuming it is monotone."""
    lo_arr = np.full(shape, np.log(lo))
    hi_arr = np.full(shape, np.log(hi))
    ok_hi = np.broadcast_to(predicate(np.exp(hi_arr)), shape)
    ok_lo = np.broadcast_to(predicate(np.exp(lo_arr)), shape)
    for _ in range(iterations):
        mid = 0.5 * (lo_arr + hi_arr)
        ok = np.broadcast_to(predicate(np.exp(mid)), shape)
        hi_arr = np.where(ok, mid, hi_arr)
        lo_arr = np.where(ok, lo_arr, mid)
    return np.exp(hi_arr), ok_lo, ok_hi


def required_bandwidth(
    dep: Deployment, new_tokens: ArrayLike, kappa_ratio: ArrayLike
) -> SolveResult:
    """Per-GPU host-link bandwidth (bytes/s, before ``link_efficiency``; what ``bandwidth=``
    takes) at which a request with ``K = kappa_ratio x T`` is exactly compute-bound.

    ``inf`` when no link bandwidth suffices (host DRAM share, per-copy latency or a tier path
    bounds the transfer)."""
    t = token_count("new_tokens", new_tokens, at_least_one=True)
    k = nonnegative("kappa_ratio", kappa_ratio) * t
    c = np.asarray(compute_time(dep, t, k))
    shape = np.broadcast_shapes(c.shape, k.shape)

    def fast_enough(bw: FloatArray) -> Any:
        return np.asarray(transfer_time(dataclasses.replace(dep, bandwidth=bw), k)) <= c

    value, ok_lo, ok_hi = _bisect_log(fast_enough, 1e3, 1e18, shape)
    value = np.where(ok_lo, 0.0, np.where(ok_hi, value, np.inf))
    reason = np.where(ok_hi, "", "no link bandwidth suffices: host DRAM, latency or a tier "
                                 "bounds the transfer")
    return SolveResult(scalar_or_array(value), str(reason) if reason.ndim == 0 else reason)


def transfer_bound_compute(
    dep: Deployment, new_tokens: ArrayLike, kappa_ratio: ArrayLike
) -> SolveResult:
    """Per-GPU peak compute (FLOP/s, before ``compute_efficiency``; what ``compute=`` takes)
    above which a request with ``K = kappa_ratio x T`` turns transfer-bound.

    ``inf`` when no compute makes it transfer-bound (the TP all-reduce alone outlasts the
    transfer)."""
    t = token_count("new_tokens", new_tokens, at_least_one=True)
    k = nonnegative("kappa_ratio", kappa_ratio) * t
    x = np.asarray(transfer_time(dep, k))
    shape = np.broadcast_shapes(x.shape, t.shape)

    def transfer_bound(c: FloatArray) -> Any:
        return np.asarray(compute_time(dataclasses.replace(dep, compute=c), t, k)) < x

    value, ok_lo, ok_hi = _bisect_log(transfer_bound, 1e6, 1e21, shape)
    value = np.where(ok_lo, 0.0, np.where(ok_hi, value, np.inf))
    reason = np.where(ok_hi, "", "no compute makes it transfer-bound at this K/T")
    return SolveResult(scalar_or_array(value), str(reason) if reason.ndim == 0 else reason)

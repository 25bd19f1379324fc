"""The critical cached-to-prefill token ratio kappa_crit, in the paper's form and in full.

Paper mode (Meng, Lee, Wang, arXiv 2601.19910, Eq. 6)::

    kappa_M  = 2 x N_active / B_kv      (FLOP per byte of KV; a model property)
    kappa_HW = BW / C                   (bytes per FLOP; a hardware property)
    kappa_crit = kappa_M x kappa_HW

Full mode: the ``K/T`` above which the per-GPU transfer time stays at or above the per-GPU
compute time, with everything the cost model counts (attention over the cached context, MLA
up-projection, the HBM roof, TP and its all-reduces, efficiencies, NUMA-aware DRAM sharing,
per-copy latency and granularity, write-back, tiers).

Without sliding windows both sides are maxima of functions affine in ``K``: compute is
``max(FLOP time, HBM time) + all-reduce`` (``c_i + s_i K`` for the two roofs), transfer is
``max(data paths) + collectives + latency`` (``a_j + b_j K`` for ``K > 0``). For one compute roof
``i``, ``transfer - roof_i`` is convex in ``K``, so the ``K`` where the transfer falls below that
roof form one interval; its right end ``K_i = min over paths with b_j > s_i of (c_i - a_j) /
(b_j - s_i)`` is where the transfer overtakes the roof for good (0 when it never falls below).
``K* = max_i K_i``. When no path's slope exceeds a roof's (``b_j <= s_i`` for all ``j``), each
cached token adds at least as much compute (attention over it, or reading its KV from HBM) as
it costs to load, and prefill is never transfer-bound at that ``T``: kappa_crit is ``inf`` and
the result says why. The coefficients are read off the same timing functions the rest of
kvroof uses (no formula is written twice).

The HBM roof makes kappa_crit fall with ``T`` where the weight reads bind (small ``T``: the
weights are read once however few tokens share them) and rise with ``T`` where attention over
the cached context binds.

With sliding windows the sides are not affine, and a bracketed root finder (a scan on a log
grid, then bisection) finds the crossing; the tests check the two methods against each other.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import (
    FloatArray,
    nonnegative,
    positive,
    scalar_or_array,
    token_count,
    token_value,
)
from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.params import param_counts
from kvroof.cost.terms import compute_parts, transfer_parts
from kvroof.cost.timing import compute_time, iteration_tokens_for
from kvroof.cost.transfer import transfer_breakdown, transfer_time
from kvroof.errors import KvroofError

__all__ = [
    "KappaResult",
    "PaperKappa",
    "SolveResult",
    "crossover_of_pieces",
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
         "time (attention over it, or reading its KV from HBM) as it costs to load"
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
    ``link_efficiency`` (no DRAM bound, no latency) and the per-GPU peak compute (no TP, no
    attention, no HBM roof), times ``compute_efficiency`` only where one is set or calibrated:
    the paper's inputs are peaks, so the published achievable-matmul default is not applied."""
    model = dep.model
    active = model.published.active if model.published else param_counts(model).active
    bandwidth = np.asarray(dep.link_bandwidth) * np.asarray(dep.link_efficiency)
    return kappa_paper(active, kv_bytes_per_token(model, dep.kv_dtype), bandwidth,
                       dep.paper_compute)


# -- full mode --------------------------------------------------------------------------------
class KappaResult:
    """kappa_crit (full mode) for each T: ``inf`` where prefill is never transfer-bound.

    ``reason`` (why kappa_crit is ``inf``; ``""`` where it is finite) is built when read: a
    string for a scalar, an object array of references to two shared strings for an array."""

    __slots__ = ("_band", "crossover_tokens", "kappa_crit", "method", "never_transfer_bound",
                 "new_tokens")

    def __init__(self, new_tokens: Any, kappa_crit: Any, crossover_tokens: Any,
                 never_transfer_bound: Any, band: Any, method: str) -> None:
        self.new_tokens = new_tokens
        self.kappa_crit = kappa_crit
        self.crossover_tokens = crossover_tokens
        self.never_transfer_bound = never_transfer_bound
        self._band = band
        self.method = method

    def __repr__(self) -> str:
        return (f"KappaResult(new_tokens={self.new_tokens!r}, kappa_crit={self.kappa_crit!r}, "
                f"never_transfer_bound={self.never_transfer_bound!r}, method={self.method!r})")

    @property
    def reason(self) -> Any:
        never = self.never_transfer_bound
        if isinstance(never, bool):
            return (_BAND if self._band else _NEVER) if never else ""
        reasons = _reasons(never, self._band)
        return reasons

    def _repr_html_(self) -> str:
        from kvroof.display import array_summary, html_table, number

        if isinstance(self.never_transfer_bound, bool):
            rows = [["new tokens T", number(self.new_tokens)],
                    ["kappa_crit", "never transfer-bound" if self.never_transfer_bound
                     else number(self.kappa_crit)],
                    ["crossover K*", number(self.crossover_tokens)],
                    ["method", self.method]]
            if self.reason:
                rows.append(["why", self.reason])
            return html_table(rows, "kappa_crit (full mode)")
        never = np.asarray(self.never_transfer_bound)
        rows = [array_summary("kappa_crit", self.kappa_crit),
                ["never transfer-bound", f"{int(never.sum())} of {never.size}"],
                ["method", self.method]]
        return html_table(rows, "kappa_crit grid (full mode); to_frame() for every point")

    def to_frame(self) -> Any:
        """A pandas DataFrame with one row per point: ``new_tokens``, ``kappa_crit``,
        ``crossover_tokens``, ``never_transfer_bound`` and ``reason``."""
        from kvroof.display import require_pandas

        pandas = require_pandas()
        shape = np.shape(self.kappa_crit)
        columns = {name: np.broadcast_to(np.asarray(value), shape).ravel()
                   for name, value in self.as_dict().items() if name != "method"}
        frame = pandas.DataFrame(columns)
        frame["method"] = self.method
        return frame

    def as_dict(self) -> dict[str, Any]:
        return {
            "new_tokens": self.new_tokens,
            "kappa_crit": self.kappa_crit,
            "crossover_tokens": self.crossover_tokens,
            "never_transfer_bound": self.never_transfer_bound,
            "reason": self.reason,
            "method": self.method,
        }


def _difference(dep: Deployment, t: Any, k: Any) -> Any:
    """transfer - compute at (T, K): positive where transfer-bound."""
    x = np.asarray(transfer_time(dep, k, t), dtype=np.float64)
    c = np.asarray(compute_time(dep, t, k), dtype=np.float64)
    return x - c


def _pieces(dep: Deployment, t: Any) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """(a, b, c, s): the transfer pieces ``a_j + b_j K`` (``K > 0``) and the compute roofs
    ``c_i + s_i K``, read off the cost model's own evaluation (affine in K without sliding
    windows; the paths that cannot bind are left out)."""
    terms = dep.terms
    n = iteration_tokens_for(dep, t)
    if terms.tiers:
        def path_times(k: float) -> list[Any]:
            parts = transfer_breakdown(dep, k, t)
            extra = parts.scale_up_time + parts.latency_time
            return [path + extra for path in parts.paths]
    else:
        def path_times(k: float) -> list[Any]:
            parts = transfer_parts(terms, k, t)
            extra = parts.scale_up + parts.latency_time
            return [path + extra for path in parts.paths]
    x1, x2 = path_times(_K_REF), path_times(2 * _K_REF)
    b = [(p2 - p1) / _K_REF for p1, p2 in zip(x1, x2, strict=True)]
    a = [p1 - bj * _K_REF for p1, bj in zip(x1, b, strict=True)]
    zero, far = compute_parts(terms, t, 0.0, n), compute_parts(terms, t, _K_REF, n)
    c = [zero.flop_time + zero.comm_time, zero.hbm_time + zero.comm_time]
    s = [(far.flop_time - zero.flop_time) / _K_REF, (far.hbm_time - zero.hbm_time) / _K_REF]
    return a, b, c, s


def _reasons(never: Any, band: Any = False) -> Any:
    """Why each kappa_crit is inf ('' where it is finite), as an object array (one reference
    per element, not a copy of the text)."""
    never_arr = np.asarray(never, dtype=bool)
    reasons = np.full(never_arr.shape, "", dtype=object)
    reasons[never_arr] = _NEVER
    reasons[np.broadcast_to(np.asarray(band, dtype=bool), never_arr.shape) & never_arr] = _BAND
    return reasons


def crossover_of_pieces(a: Any, b: Any, c: Any, s: Any) -> Any:
    """Smallest ``K >= 0`` from which ``max_j(a_j + b_j K) >= max_i(c_i + s_i K)`` holds for every
    larger ``K`` (``inf`` when it never does for large ``K``). Pieces are sequences (or arrays
    with the pieces on axis 0); each piece broadcasts."""
    result: Any = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for ci, si in zip(c, s, strict=True):
            top: Any = np.inf
            bottom: Any = -np.inf
            for aj, bj in zip(a, b, strict=True):
                gap = bj - si
                head = ci - aj
                ratio = head / np.where(gap != 0, gap, 1.0)
                top = np.minimum(top, np.where(gap > 0, ratio,
                                               np.where((gap == 0) & (head <= 0), -np.inf,
                                                        np.inf)))
                bottom = np.maximum(bottom, np.where(gap < 0, ratio, -np.inf))
            k_i = np.where(np.isposinf(top), np.inf,
                           np.where((top <= 0) | (bottom >= top), 0.0, top))
            result = np.maximum(result, k_i)
    return result


def _closed_form(dep: Deployment, t: Any) -> tuple[Any, Any]:
    """K* (start of the transfer-bound region that extends to any K) and the 'band' flags (a
    fixed per-request cost makes small K transfer-bound)."""
    a, b, c, s = _pieces(dep, t)
    k_star = crossover_of_pieces(a, b, c, s)
    band = _max_of(a) >= _max_of(c)
    return k_star, band


def _max_of(values: list[Any]) -> Any:
    result = values[0]
    for value in values[1:]:
        result = np.maximum(result, value)
    return result


def _root_finding(dep: Deployment, t: FloatArray, points: int = 160) -> tuple[FloatArray, Any]:
    """K* above which transfer >= compute up to 1e13 tokens: the last sign change on a log
    grid, then bisection in that bracket."""
    grid = np.concatenate([[0.0], np.geomspace(1e-3, _K_MAX, points)])
    shape = np.broadcast_shapes(t.shape, np.shape(_difference(dep, t, 1.0)))
    ks = grid.reshape((-1,) + (1,) * len(shape))
    diff = np.broadcast_to(_difference(dep, t, ks), (grid.size, *shape))
    below = diff < 0
    below[0] = True  # K = 0 loads nothing: the transfer-bound region starts above it
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
    k_star = np.where(found, hi, np.inf)
    k_star = np.where(found & (last_below == 0) & (diff[min(1, grid.size - 1)] >= 0), 0.0, k_star)
    return k_star, False


def kappa_crit(dep: Deployment, new_tokens: ArrayLike, method: Method = "auto") -> KappaResult:
    """Full-mode kappa_crit = K*/T for each ``new_tokens`` T (broadcasts with array settings).

    ``method``: ``closed-form`` (needs no sliding window), ``root-finding``, or ``auto``
    (closed form when it applies).
    """
    t = token_value("new_tokens", new_tokens, at_least_one=True)
    if method == "auto":
        method = "closed-form" if dep.model.sliding_window is None else "root-finding"
    if method == "closed-form":
        if dep.model.sliding_window is not None:
            raise KvroofError(
                f"method: {dep.model.name} has sliding-window layers, so transfer and compute "
                "are not affine in K; use root-finding"
            )
        k_star, band = _closed_form(dep, t)
    elif method == "root-finding":
        k_star, band = _root_finding(dep, np.asarray(t, dtype=np.float64))
    else:
        raise KvroofError(f"method: expected auto, closed-form or root-finding, got {method!r}")
    k_star = np.asarray(k_star, dtype=np.float64)
    if k_star.ndim == 0:
        value = float(k_star)
        never = math.isinf(value)
        return KappaResult(float(t), value / float(t), value, never,
                           bool(np.all(band)) if never else False, method)
    never_arr = np.isinf(k_star)
    return KappaResult(
        new_tokens=np.broadcast_to(np.asarray(t, dtype=np.float64), k_star.shape).copy(),
        kappa_crit=k_star / t,
        crossover_tokens=k_star,
        never_transfer_bound=never_arr,
        band=np.asarray(band, dtype=bool),
        method=method,
    )


def max_new_tokens_for_crossover(dep: Deployment, t_max: float = 1e12) -> Any:
    """The largest T at which prefill still turns transfer-bound for large K (inf when it does
    at every T up to ``t_max``; 0 when at none).

    For K beyond any sliding window each cached token costs ``max_j b_j`` seconds to load and
    adds ``max_i s_i(T)`` seconds of compute (attention of the T new tokens over it, the MLA
    up-projection, or reading its KV from HBM); a crossover exists while the first exceeds the
    second. The slopes are read off the timing functions on a log grid of T and the last sign
    change is bisected, so calibrated efficiency curves (which make ``s`` non-linear in T) are
    handled too."""
    def margin(t: Any) -> FloatArray:
        _, b, _, s = _pieces(dep, np.asarray(t, dtype=np.float64))
        result: FloatArray = _max_of(b) - _max_of(s)
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
        return np.asarray(transfer_time(dataclasses.replace(dep, bandwidth=bw), k, t)) <= c

    value, ok_lo, ok_hi = _bisect_log(fast_enough, 1e3, 1e18, shape)
    value = np.where(ok_lo, 0.0, np.where(ok_hi, value, np.inf))
    reason = np.where(ok_hi, "", "no link bandwidth suffices: host DRAM, latency or a tier "
                                 "bounds the transfer")
    return SolveResult(scalar_or_array(value), str(reason) if reason.ndim == 0 else reason)


def transfer_bound_compute(
    dep: Deployment, new_tokens: ArrayLike, kappa_ratio: ArrayLike
) -> SolveResult:
    """Per-GPU peak compute (FLOP/s, before the compute efficiency; what ``compute=`` takes)
    above which a request with ``K = kappa_ratio x T`` turns transfer-bound.

    ``inf`` when no compute makes it transfer-bound (the HBM reads or the TP all-reduces alone
    outlast the transfer)."""
    t = token_count("new_tokens", new_tokens, at_least_one=True)
    k = nonnegative("kappa_ratio", kappa_ratio) * t
    x = np.asarray(transfer_time(dep, k, t))
    shape = np.broadcast_shapes(x.shape, t.shape)
    keep = dep.compute_efficiency
    if keep is None and dep.calibration is None:
        keep = dep.default_compute_efficiency  # the efficiency stays that of this accelerator

    def transfer_bound(c: FloatArray) -> Any:
        changed = dataclasses.replace(dep, compute=c, compute_efficiency=keep)
        return np.asarray(compute_time(changed, t, k)) < x

    value, ok_lo, ok_hi = _bisect_log(transfer_bound, 1e6, 1e21, shape)
    value = np.where(ok_lo, 0.0, np.where(ok_hi, value, np.inf))
    reason = np.where(ok_hi, "", "no compute makes it transfer-bound at this K/T (HBM reads "
                                 "or all-reduces outlast the transfer)")
    return SolveResult(scalar_or_array(value), str(reason) if reason.ndim == 0 else reason)

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

With sliding-window, chunked or sparse (DSA) layers the sides are not affine in ``K``, and a
root finder finds ``K*``, the same quantity (the smallest ``K`` from which prefill stays
transfer-bound for every larger ``K``):

- beyond ``K0``, where every window and top-k cap is saturated (the largest window; for a
  sparse layer ``top-k x T``, where its latent reads stop growing), the sides are affine again,
  and the closed form on their pieces there gives the crossing if it lies beyond ``K0``;
- otherwise the crossing lies in ``[0, K0]``: a scan on a log grid, then bisection of the last
  sign change;
- chunked layers make both sides saw-tooth in ``K`` (a load of ``K`` tokens brings back
  ``K mod C`` of a chunked layer, and its queries see ``(p mod C) + 1`` keys): on each residue
  ``r = K mod C`` the sides are affine in ``K``, so the closed form runs once per integer residue
  and ``K*`` is one more than the last integer ``K`` at which prefill is still compute-bound.
  Transfer-bound stretches below ``K*`` (the saw's teeth reaching the compute) do not count:
  kappa_crit is where it stays transfer-bound.

The tests check the closed form against the root finder where both apply and the root finder
against token-by-token scans where only it does.

Kernel mode (``compute_model: kernels``, or ``auto`` with kernel tables): compute is timed op by
op and is not affine in ``K``; :func:`kappa_crit` then solves ``transfer(K) = compute(T, K)``
by a vectorized bracketed root (:mod:`kvroof.cost.kernel_kappa`). :func:`kappa_forms` gives the
paper form, the roofline form and the kernel form side by side.

Paper mode is :mod:`kvroof.cost.paper_kappa`, the full-mode result :mod:`kvroof.cost.kappa_result`,
the algebra of the affine pieces :mod:`kvroof.cost.affine_crossover` and the inverse solvers
(required bandwidth, transfer-bound compute) :mod:`kvroof.cost.thresholds`; their names are
re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.affine_crossover import crossover_of_pieces, last_compute_bound, max_of
from kvroof.cost.bisection import bisect_rise
from kvroof.cost.caller_warnings import warn_caller
from kvroof.cost.checks import FloatArray, scalar_or_array, token_value
from kvroof.cost.compute import compute_time, iteration_tokens_for
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa_result import KappaResult
from kvroof.cost.paper_kappa import PaperKappa, kappa_paper, kappa_paper_for
from kvroof.cost.terms import compute_parts, transfer_parts
from kvroof.cost.thresholds import SolveResult, required_bandwidth, transfer_bound_compute
from kvroof.cost.transfer import transfer_breakdown, transfer_time
from kvroof.errors import KvroofError

__all__ = [
    "KappaResult",
    "PaperKappa",
    "SolveResult",
    "crossover_of_pieces",
    "kappa_crit",
    "kappa_forms",
    "kappa_paper",
    "kappa_paper_for",
    "max_new_tokens_for_crossover",
    "required_bandwidth",
    "transfer_bound_compute",
]

Method = Literal["auto", "closed-form", "root-finding"]
_K_REF = float(2**30)  # where the affine pieces of an affine deployment are read
_DENSE_CHUNK = 1 << 16  # up to this many residues (or head tokens) are scanned one by one


def _difference(dep: Deployment, t: Any, k: Any) -> Any:
    """transfer - compute at (T, K): positive where transfer-bound."""
    x = np.asarray(transfer_time(dep, k, t), dtype=np.float64)
    c = np.asarray(compute_time(dep, t, k), dtype=np.float64)
    return x - c


def _grid_shape(dep: Deployment, t: FloatArray) -> tuple[int, ...]:
    """The shape of a result: T's broadcast with the deployment's array settings (a what-if
    sweeps the bandwidth, say, at one T)."""
    return np.broadcast_shapes(t.shape, np.shape(_difference(dep, t, 1.0)))


def _pieces(dep: Deployment, t: Any, k1: Any = None,
            k2: Any = None) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """(a, b, c, s): the transfer pieces ``a_j + b_j K`` (``K > 0``) and the compute roofs
    ``c_i + s_i K``, read off the cost model's own evaluation (the paths that cannot bind are
    left out). Without ``k1``/``k2`` they are read at ``K = 0`` (compute), ``2^30`` and ``2^31``
    (affine deployments); else at ``k1`` and ``k2``, where they are the affine continuation of
    the sides beyond every window and cap (on one chunk residue when ``k1`` and ``k2`` share
    it)."""
    terms = dep.terms
    n = iteration_tokens_for(dep, t)
    if terms.tiers:
        def path_times(k: Any) -> list[Any]:
            parts = transfer_breakdown(dep, k, t)
            extra = parts.scale_up_time + parts.latency_time
            return [path + extra for path in parts.paths]
    else:
        def path_times(k: Any) -> list[Any]:
            parts = transfer_parts(terms, k, t)
            extra = parts.scale_up + parts.latency_time
            return [path + extra for path in parts.paths]
    if k1 is None:
        k1, k2, c1 = _K_REF, 2 * _K_REF, 0.0
    else:
        c1 = k1
    span = k2 - k1
    x1, x2 = path_times(k1), path_times(k2)
    b = [(p2 - p1) / span for p1, p2 in zip(x1, x2, strict=True)]
    a = [p1 - bj * k1 for p1, bj in zip(x1, b, strict=True)]
    near, far = compute_parts(terms, t, c1, n), compute_parts(terms, t, k2, n)
    s = [(far.flop_time - near.flop_time) / (k2 - c1), (far.hbm_time - near.hbm_time) / (k2 - c1)]
    c = [near.flop_time + near.comm_time - s[0] * c1, near.hbm_time + near.comm_time - s[1] * c1]
    return a, b, c, s


def _closed_form(dep: Deployment, t: Any) -> tuple[Any, Any]:
    """K* (start of the transfer-bound region that extends to any K) and the 'band' flags (a
    fixed per-request cost makes small K transfer-bound)."""
    a, b, c, s = _pieces(dep, t)
    k_star = crossover_of_pieces(a, b, c, s)
    band = max_of(a) >= max_of(c)
    return k_star, band


def _saturation(dep: Deployment, t: FloatArray) -> FloatArray:
    """``K0``: from here on every window and top-k cap is saturated (chunks aside), so the
    sides are affine in ``K`` (per chunk residue)."""
    terms = dep.terms
    spans = [w for w, _ in terms.hold.windows + terms.load.windows + terms.save.windows
             + terms.copies.windows + terms.read.windows]
    spans += [span for rule, span, _ in terms.flops.caps if rule == "window"]
    k0 = np.full(t.shape, max(spans, default=0.0))
    for topk, _ in terms.read.caps:
        k0 = np.maximum(k0, topk * t)
    return k0


def _far(k0: FloatArray) -> float:
    """A power of two beyond ``K0`` (at least ``2^30``) where the affine continuation is read:
    as small as it can be, for precision, and a multiple of power-of-two chunks."""
    top = float(np.max(k0)) if k0.size else 0.0
    return float(2 ** max(30, math.ceil(math.log2(max(4.0 * top, 1.0)))))


def _chunks(dep: Deployment) -> set[float]:
    terms = dep.terms
    found = {c for c, _ in terms.hold.chunks + terms.load.chunks + terms.save.chunks
             + terms.copies.chunks + terms.read.chunks}
    return found | {span for rule, span, _ in terms.flops.caps if rule == "chunk"}


def _scan(dep: Deployment, t: FloatArray, top: FloatArray, points: int = 96) -> FloatArray:
    """The last ``K`` in ``(0, top]`` at which prefill is compute-bound (0 when none): a log
    grid over nine decades up to ``top`` (about ten points a decade), then bisection of the last
    sign change."""
    fractions = np.concatenate([[0.0], np.geomspace(1e-9, 1.0, points)])
    uniform = top.size == 0 or bool(np.all(top == top.flat[0]))
    scale: Any = float(top.flat[0]) if uniform and top.size else top
    shape = np.broadcast_shapes(t.shape, np.shape(scale), np.shape(_difference(dep, t, 1.0)))
    ks = fractions.reshape((-1,) + (1,) * len(shape)) * scale
    diff = np.broadcast_to(_difference(dep, t, ks), (fractions.size, *shape))
    below = diff < 0
    below[0] = True  # K = 0 loads nothing: the transfer-bound region starts above it
    last_below = fractions.size - 1 - np.argmax(below[::-1], axis=0)
    index = np.minimum(last_below + 1, fractions.size - 1)
    full = np.broadcast_to(scale, shape)
    lo = fractions[last_below] * full
    hi = fractions[index] * full
    hi = bisect_rise(lambda k: _difference(dep, t, k), lo, hi, 1e-12)
    result: FloatArray = np.where(last_below == fractions.size - 1, full, hi)
    return np.where((last_below == 0) & (diff[1] >= 0), 0.0, result)


def _chunk_tail(dep: Deployment, t: FloatArray, chunk: float, k0: FloatArray) -> FloatArray:
    """The last integer ``K >= k0`` at which prefill is compute-bound, over every residue of
    ``chunk`` (-inf when none; inf when some residue never turns transfer-bound). Residues are
    taken a batch at a time, so a grid of T holds a batch of them at once, not all."""
    count = int(chunk) if chunk <= _DENSE_CHUNK else _DENSE_CHUNK
    residues = np.unique(np.floor(np.linspace(0.0, chunk, count, endpoint=False)))
    base = math.floor(_far(k0) / chunk) * chunk
    shape = _grid_shape(dep, t)  # T and any array settings: the residues go in front
    batch = max(1, (1 << 20) // max(1, math.prod(shape)))
    never: Any = False
    last: Any = -np.inf
    for start in range(0, residues.size, batch):
        r = residues[start:start + batch].reshape((-1,) + (1,) * len(shape))
        a, b, c, s = _pieces(dep, t, base + r, 2 * base + r)
        never = np.logical_or(never, np.any(np.isinf(crossover_of_pieces(a, b, c, s)), axis=0))
        found = last_compute_bound(a, b, c, s, r + np.zeros(shape), chunk)
        last = np.maximum(last, np.max(np.where(found >= k0, found, -np.inf), axis=0))
    result: FloatArray = np.where(never, np.inf, last)
    return result


def _head_scan_dense(dep: Deployment, t: FloatArray, top: FloatArray) -> FloatArray:
    """The last integer ``K`` in ``[1, top)`` at which prefill is compute-bound (-inf when
    none), token by token (a saw-tooth defeats a log grid)."""
    limit = float(np.max(top)) if top.size else 0.0
    shape = _grid_shape(dep, t)
    if limit <= 1:
        return np.full(shape, -np.inf)
    step = max(1.0, math.ceil(limit / _DENSE_CHUNK))
    ks = np.arange(1.0, limit, step).reshape((-1,) + (1,) * len(shape))
    below = (_difference(dep, t, ks) < 0) & (ks < top)
    found = below.any(axis=0)
    last = ks.shape[0] - 1 - np.argmax(below[::-1], axis=0)
    result: FloatArray = np.where(found, ks.reshape(-1)[last], -np.inf)
    return result


def _root_finding(dep: Deployment, t: FloatArray) -> tuple[FloatArray, Any]:
    """K* for deployments whose sides are not affine (module docstring)."""
    k0 = _saturation(dep, t)
    chunks = _chunks(dep)
    if not chunks:
        far = _far(k0)
        a, b, c, s = _pieces(dep, t, far, 2 * far)
        tail = np.asarray(crossover_of_pieces(a, b, c, s), dtype=np.float64)
        head = tail <= k0
        if not np.any(head):
            return tail, False
        scanned = _scan(dep, t, np.broadcast_to(k0, np.broadcast_shapes(k0.shape, tail.shape)))
        return np.where(head, scanned, tail), False
    if len(chunks) > 1:
        raise KvroofError(f"{dep.model.name} has chunked layers of several chunk sizes; "
                          "kappa_crit handles one")
    chunk = chunks.pop()
    last = _chunk_tail(dep, t, chunk, k0)
    if np.any(k0 > 0):
        last = np.where(np.isneginf(last), _head_scan_dense(dep, t, k0), last)
    k_star = np.where(np.isinf(last) & (last > 0), np.inf,
                      np.where(np.isneginf(last), 0.0, last + 1.0))
    return k_star, False


def _check_computable(dep: Deployment, k_star: Any) -> None:
    """Refuse a NaN K* (an overflow inside, inf - inf): never a silent NaN, in either compute
    model."""
    if np.isnan(np.asarray(k_star, dtype=np.float64)).any():
        raise KvroofError(
            f"kappa_crit: not computable for {dep.model.name}: a setting is so extreme that "
            "the times overflow a float (look for values such as a latency of 1e300 s)")


def _is_affine(dep: Deployment) -> bool:
    """Whether transfer and compute are affine in K (for K > 0)."""
    terms = dep.terms
    return terms.affine and terms.copies.affine and terms.save.affine \
        and not terms.flops.caps


def kappa_crit(dep: Deployment, new_tokens: ArrayLike, method: Method = "auto") -> KappaResult:
    """Full-mode kappa_crit = K*/T for each ``new_tokens`` T (broadcasts with array settings).

    ``method``: ``closed-form`` (needs sides affine in K: no sliding-window, chunked or
    sparse layers), ``root-finding``, or ``auto`` (closed form when it applies). In kernel mode
    the bracketed root of :mod:`kvroof.cost.kernel_kappa` answers (``auto`` or
    ``root-finding``).

    A deployment that does not fit in memory is computed regardless, with a
    :class:`~kvroof.cost.memory_fit.DoesNotFitWarning`; a ``bandwidth`` override capped by the
    host DRAM gives a :class:`~kvroof.cost.caller_warnings.BandwidthCappedWarning` (once per
    call each; :mod:`kvroof.cost.caller_warnings`).
    """
    result = _kappa_crit(dep, new_tokens, method)
    warn_caller(dep, "kappa_crit")
    return result


def _kappa_crit(dep: Deployment, new_tokens: ArrayLike, method: Method) -> KappaResult:
    t = token_value("new_tokens", new_tokens, at_least_one=True)
    if dep.uses_kernels:
        from kvroof.cost.kernel_kappa import kernel_kappa_crit

        if method == "closed-form":
            raise KvroofError("method: kernel-mode compute is not affine in K; use auto or "
                              "root-finding (or compute_model roofline)")
        if method not in ("auto", "root-finding"):
            raise KvroofError(f"method: expected auto, closed-form or root-finding, got "
                              f"{method!r}")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow: NaN, refused below
            result = kernel_kappa_crit(dep, t)
        _check_computable(dep, result.crossover_tokens)
        return result
    affine = _is_affine(dep)
    if method == "auto":
        method = "closed-form" if affine else "root-finding"
    if method == "closed-form":
        if not affine:
            raise KvroofError(
                f"method: {dep.model.name} has sliding-window, chunked or sparse layers, so "
                "transfer and compute are not affine in K; use root-finding"
            )
        k_star, band = _closed_form(dep, t)
    elif method == "root-finding":
        k_star, band = _root_finding(dep, np.asarray(t, dtype=np.float64))
    else:
        raise KvroofError(f"method: expected auto, closed-form or root-finding, got {method!r}")
    k_star = np.asarray(k_star, dtype=np.float64)
    _check_computable(dep, k_star)
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

    For K beyond any window or cap each cached token costs ``max_j b_j`` seconds to load and
    adds ``max_i s_i(T)`` seconds of compute (attention of the T new tokens over it, the MLA
    up-projection, or reading its KV from HBM); a crossover exists while the first exceeds the
    second. The slopes are read off the timing functions on a log grid of T and the last sign
    change is bisected, so calibrated efficiency curves (which make ``s`` non-linear in T) are
    handled too."""
    def margin(t: Any) -> FloatArray:
        t_arr = np.asarray(t, dtype=np.float64)
        if kernels:
            from kvroof.cost.kernel_kappa import kernel_slope_margin

            return kernel_slope_margin(dep, t_arr)
        far = _far(_saturation(dep, t_arr))
        _, b, _, s = _pieces(dep, t_arr) if _is_affine(dep) else _pieces(
            dep, t_arr, far, 2 * far)
        result: FloatArray = max_of(b) - max_of(s)
        return result

    kernels = dep.uses_kernels
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


def kappa_forms(dep: Deployment, new_tokens: ArrayLike) -> dict[str, Any]:
    """kappa_crit three ways for each ``new_tokens`` T: ``paper`` (Eq. 6, no T), ``roofline``
    (full mode with the whole-model roofline) and ``kernels`` (full mode with the measured
    kernel tables, op by op); ``inf`` where never transfer-bound."""
    roofline = dataclasses.replace(dep, compute_model="roofline")
    kernels = dataclasses.replace(dep, compute_model="kernels")
    forms = {
        "paper": float(kappa_paper_for(dep).kappa_crit),
        "roofline": _kappa_crit(roofline, new_tokens, "auto").kappa_crit,
        "kernels": _kappa_crit(kernels, new_tokens, "auto").kappa_crit,
    }
    warn_caller(dep, "kappa_forms")
    return forms

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
_K_REF = float(2**30)  # where the affine pieces of an affine deployment are read
_DENSE_CHUNK = 1 << 16  # up to this many residues (or head tokens) are scanned one by one
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
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = _difference(dep, t, mid) >= 0
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(hi, 1.0)):
            break
    result: FloatArray = np.where(last_below == fractions.size - 1, full, hi)
    return np.where((last_below == 0) & (diff[1] >= 0), 0.0, result)


def _last_compute_bound(a: Any, b: Any, c: Any, s: Any, k: Any, chunk: float) -> Any:
    """On the residue of ``k`` mod ``chunk``, with the sides affine there (pieces ``a, b, c,
    s``): the last integer ``K`` of that residue at which compute exceeds transfer, or -inf.
    Compute exceeds transfer where some roof does, and below each roof the transfer lies on one
    interval, whose right end :func:`crossover_of_pieces` gives."""
    residue = np.mod(k, chunk)
    result: Any = -np.inf
    for ci, si in zip(c, s, strict=True):
        end = crossover_of_pieces(a, b, [ci], [si])
        with np.errstate(invalid="ignore"):
            steps = np.ceil((end - residue) / chunk) - 1.0
            candidate = residue + chunk * np.maximum(steps, 0.0)
        x = _max_of([aj + bj * candidate for aj, bj in zip(a, b, strict=True)])
        below = (x < ci + si * candidate) & np.isfinite(end) & (end > 0) & (candidate > 0) \
            & (steps >= 0)
        result = np.maximum(result, np.where(below, candidate, -np.inf))
    return result


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
        found = _last_compute_bound(a, b, c, s, r + np.zeros(shape), chunk)
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


def _is_affine(dep: Deployment) -> bool:
    """Whether transfer and compute are affine in K (for K > 0)."""
    terms = dep.terms
    return terms.affine and terms.copies.affine and terms.save.affine \
        and not terms.flops.caps


def kappa_crit(dep: Deployment, new_tokens: ArrayLike, method: Method = "auto") -> KappaResult:
    """Full-mode kappa_crit = K*/T for each ``new_tokens`` T (broadcasts with array settings).

    ``method``: ``closed-form`` (needs sides affine in K: no sliding-window, chunked or
    sparse layers), ``root-finding``, or ``auto`` (closed form when it applies).
    """
    t = token_value("new_tokens", new_tokens, at_least_one=True)
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
    if np.isnan(k_star).any():  # an overflow inside (inf - inf): never a silent NaN
        raise KvroofError(
            f"kappa_crit: not computable for {dep.model.name}: a setting is so extreme that "
            "the times overflow a float (look for values such as a latency of 1e300 s)")
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
        far = _far(_saturation(dep, t_arr))
        _, b, _, s = _pieces(dep, t_arr) if _is_affine(dep) else _pieces(
            dep, t_arr, far, 2 * far)
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

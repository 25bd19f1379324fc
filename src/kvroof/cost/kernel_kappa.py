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
  (``inf``, with the band's reason); so is a result that is never transfer-bound for good but
  transfer-bound at the first cached token (a fixed per-request cost: the roofline's band);
- a side that overflows a float at ``F``: ``NaN``, which :func:`kvroof.cost.kappa.kappa_crit`
  reports as not computable, as it does in roofline mode;
- otherwise the last ``K`` in ``[0, F]`` at which compute still exceeds the transfer is found by
  a scan of a log grid (30 points a decade from one token, plus every point where a side
  changes its rule: window edges, and the tables' points along the context axis at
  ``K = S - T``) and bisection of the last sign change; ``K*`` is that crossing;
- chunked layers make both sides saw-tooth in ``K`` (a load of ``K`` tokens brings back
  ``K mod C`` of a chunked layer): a log grid steps over compute-bound teeth, so the search is
  token-exact instead. Below a multiple of ``C`` past the tables' largest context (and every
  window and cap) every integer ``K`` is evaluated; from there each residue ``K mod C`` has
  sides affine in the tooth number, so its last compute-bound tooth is an integer bisection
  (or, beyond ``F``, the affine continuation). ``K*`` lies inside the token after the last
  compute-bound integer ``K`` (bisected there), as in roofline mode.

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
from kvroof.cost.kernel_model import kernel_model
from kvroof.cost.kernel_time import kernel_compute_time
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError

__all__ = ["METHOD", "kernel_difference", "kernel_kappa_crit", "kernel_slope_margin"]

METHOD: Final = "kernels: bracketed root"
_FAR: Final = float(2**30)
_PER_DECADE: Final = 30
_DENSE_HEAD: Final = 1 << 17  # up to this many K below a chunked model's tail, token by token
_DENSE_CHUNK: Final = 1 << 16  # up to this many residues of a chunk, one by one

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
    # an overflow (a latency of 1e300 s, say): NaN, which kappa_crit reports as not computable
    broken = ~np.isfinite(d_far) | ~np.isfinite(slope)
    losing = (d_far >= 0) & (slope < 0)
    inside = (d_far >= 0) & ~losing & ~broken
    k_star = np.where(losing, np.inf, beyond)
    chunk = _chunk(dep)
    if chunk is not None:  # a saw-tooth: token-exact, per tooth (module docstring)
        k_star = _chunked(dep, t_full, far, shape, chunk)
    elif np.any(inside):
        k_star = np.where(inside, _scan(dep, t_full, far, shape), k_star)
    k_star = np.where(broken, np.nan, k_star)
    # never transfer-bound for good, but transfer-bound from the first cached token: a fixed
    # per-request cost (the roofline's band: transfer's intercept above compute at K = 0)
    band = np.isinf(k_star) & (losing | (kernel_difference(dep, t_full, 1.0) >= 0))
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
    ``far`` (0 when it is from the first cached token): the last sign change of a scan,
    bisected. The scan is a log grid with the points where a side changes its rule added
    (:func:`_structure`), so a window's or a table's kink is never stepped over."""
    decades = math.log10(far)
    base = np.concatenate([[0.0], np.logspace(0.0, decades, int(decades * _PER_DECADE) + 1)])
    fixed, shifted = _structure(dep)
    nd = len(shape)
    static = np.concatenate([base, fixed[(fixed > 0) & (fixed < far)]])
    moved = shifted.reshape((-1,) + (1,) * nd) - t  # table and window kinks at K = S - T
    grid = np.concatenate([np.broadcast_to(static.reshape((-1,) + (1,) * nd),
                                           (static.size, *shape)),
                           np.broadcast_to(np.clip(moved, 0.0, far), (shifted.size, *shape))])
    grid = np.sort(grid, axis=0)
    diff = np.broadcast_to(kernel_difference(dep, t, grid), grid.shape)
    below = diff < 0
    below[0] = True  # K = 0 loads nothing: the transfer-bound region starts above it
    size = grid.shape[0]
    last = size - 1 - np.argmax(below[::-1], axis=0)
    last = np.minimum(last, size - 2)  # compute-bound at far itself: handled by the caller
    lo = np.take_along_axis(grid, last[None], axis=0)[0]
    hi = np.take_along_axis(grid, last[None] + 1, axis=0)[0]
    first = np.take_along_axis(diff, np.argmax(grid > 0, axis=0)[None], axis=0)[0]
    at_zero = (last == 0) & (first >= 0)
    hi = bisect_rise(lambda k: kernel_difference(dep, t, k), lo, hi, 1e-10)
    result: FloatArray = np.where(at_zero, 0.0, hi)
    return result


def _structure(dep: Deployment) -> tuple[FloatArray, FloatArray]:
    """Where kernel-mode sides change rule: at fixed ``K`` (every window edge, and one token
    either side) and at fixed ``S = K + T`` (the tables' points along a context axis and the
    windows, where an interpolation or a window's cap kinks)."""
    model = kernel_model(dep)
    terms = dep.terms
    windows = [w for w, _ in terms.read.windows + terms.load.windows + terms.copies.windows]
    windows += [span for rule, span, _ in terms.flops.caps if rule == "window"]
    fixed = np.array([w + d for w in windows for d in (-1.0, 0.0, 1.0)], dtype=np.float64)
    points = [np.exp(curve.log_points) for top in model.sequence_ops + model.position_ops
              for curve in (top.curve, top.window) if curve is not None]
    shifted = np.unique(np.concatenate([*points, np.array(windows, dtype=np.float64)]))
    return fixed, shifted


def _chunk(dep: Deployment) -> float | None:
    """The chunk size of a model with chunked layers (None without; several sizes refused)."""
    terms = dep.terms
    found = {c for c, _ in terms.read.chunks + terms.load.chunks + terms.copies.chunks}
    found |= {span for rule, span, _ in terms.flops.caps if rule == "chunk"}
    if len(found) > 1:
        raise KvroofError(f"{dep.model.name} has chunked layers of several chunk sizes; "
                          "kappa_crit handles one")
    return found.pop() if found else None


def _table_edge(dep: Deployment, t: FloatArray) -> float:
    """A ``K`` beyond which every kernel-mode side is affine in ``K`` on each chunk residue:
    past every table's largest size along a context axis, every window and top-k cap."""
    model = kernel_model(dep)
    edges = [curve.high for top in model.sequence_ops + model.position_ops
             for curve in (top.curve, top.window) if curve is not None]
    terms = dep.terms
    edges += [w for w, _ in terms.read.windows + terms.load.windows + terms.copies.windows]
    edges += [topk * float(np.max(t)) for topk, _ in terms.read.caps] if t.size else []
    return max(edges, default=0.0)


def _chunked(dep: Deployment, t: FloatArray, far: float, shape: tuple[int, ...],
             chunk: float) -> FloatArray:
    """K* of a chunked model, exact to the token: one past the last integer ``K`` at which
    prefill is compute-bound, then bisected inside that token.

    - below ``head`` (a multiple of the chunk past :func:`_table_edge`): every integer ``K``;
    - from ``head`` on, each residue ``r = K mod C`` on its own (sampled as the roofline does
      for chunks above 2^16 tokens): there both sides are affine in the tooth number ``j``
      (:func:`_table_edge`), so the difference is monotone in ``j`` and the last compute-bound
      tooth is an integer bisection between ``head`` and the far end; beyond the far end the
      affine continuation gives it (``inf`` where a residue never turns transfer-bound)."""
    head = math.ceil((_table_edge(dep, t) + 2.0 * chunk) / chunk) * chunk
    top = math.ceil(max(far, 2.0 * head) / chunk) * chunk
    teeth = (top - head) / chunk
    nd = len(shape)

    def diff(k: Any) -> FloatArray:
        return np.asarray(kernel_difference(dep, t, k), dtype=np.float64)

    step = max(1.0, math.ceil(head / _DENSE_HEAD))
    ks = np.arange(1.0, head, step).reshape((-1,) + (1,) * nd)
    below = np.broadcast_to(diff(ks) < 0, (ks.shape[0], *shape))
    found = below.any(axis=0)
    last: FloatArray = np.where(found, ks.reshape(-1)[ks.shape[0] - 1 - np.argmax(
        below[::-1], axis=0)], -np.inf)
    count = int(chunk) if chunk <= _DENSE_CHUNK else _DENSE_CHUNK
    residues = np.unique(np.floor(np.linspace(0.0, chunk, count, endpoint=False)))
    batch = max(1, (1 << 18) // max(1, math.prod(shape)))
    never = np.zeros(shape, dtype=bool)
    for start in range(0, residues.size, batch):
        r = residues[start:start + batch].reshape((-1,) + (1,) * nd)
        d_head = diff(head + r)
        d_top = diff(top + r)
        slope = (diff(2.0 * top + r) - d_top) / top
        never |= np.any((d_top < 0) & (slope <= 0), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            jumps = np.ceil(-d_top / np.where(slope > 0, slope * chunk, 1.0)) - 1.0
        beyond = np.where((d_top < 0) & (slope > 0), top + r + jumps * chunk, -np.inf)
        within = (d_head < 0) & (d_top >= 0)
        lo = np.zeros(within.shape)
        hi = np.full(within.shape, teeth)
        while np.any(within & (hi - lo > 1)):
            mid = np.floor(0.5 * (lo + hi))
            compute_bound = diff(head + r + mid * chunk) < 0
            lo = np.where(compute_bound, mid, lo)
            hi = np.where(compute_bound, hi, mid)
        inner = np.where(within, head + r + lo * chunk, -np.inf)
        last = np.maximum(last, np.max(np.maximum(beyond, inner), axis=0))
    k_last = np.where(np.isneginf(last), 0.0, last)
    # to the float (no tolerance): a grid of T or of a setting gives each point's scalar K*
    crossing = bisect_rise(diff, k_last, k_last + 1.0, 0.0, steps=80)
    result: FloatArray = np.where(never, np.inf, np.where(np.isneginf(last), 0.0, crossing))
    return result

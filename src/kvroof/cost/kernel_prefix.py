"""Kernel mode's attention over a cached prefix, made non-decreasing in the prefix: the least
scaled time at this ``K`` or any larger one (:class:`PrefixRule`).

The tables time prefills without a prefix, so a call of ``T`` new tokens on ``K`` cached ones is
the table's call at ``S = K + T`` scaled by the new tokens' share of its (query, key) pairs,
``f_T(S) = table(S) (P(S) - P(S - T)) / P(S)`` (``P``: the table call's causal pairs over ``S``
tokens, capped at a window ``W`` a query; :mod:`kvroof.kernels.work`). The table's time is
non-decreasing in ``S`` (the padding rule, :mod:`kvroof.cost.kernel_resolution`), but the share
falls as ``K`` grows, and where the call is launch-bound (its time flat in ``S``) the product
falls: Qwen3-235B-A22B on one H100 at ``T = 4`` took 6.73 us at ``K = 1`` and 6.56 us at
``K >= 12``; a sliding-window layer's share keeps falling towards ``T / S``. A call over fewer
cached tokens can always run as one over more (the extra keys masked), so kvroof takes the least
scaled time at this ``K`` or any larger one, ``h_T(S) = inf over S' >= S of f_T(S')``, which is
non-decreasing in ``K`` by construction and equals ``f_T(S)`` wherever ``f_T`` does not fall
after ``S`` (most of the grid: a compute-bound call grows faster than the share falls).

Where the infimum lies, so that each point costs a few evaluations (no search over ``S'``):

- between two knots of the table's time (its measured sizes and a window's edge ``W``) the time
  is ``C S^a``, and for ``S' <= W + T`` (a window layer's new queries not all capped yet; every
  ``S'`` for full attention) ``log f_T`` is concave in ``log S'``, so ``f_T`` falls only after it
  rises and its least on any stretch lies at the stretch's ends. For full attention
  ``log f_T = log C + (a - 1) log S' + log(2 T S' - T (T - 1)) - log(S' + 1)``: both ``log``
  terms are concave in ``log S'`` for ``T >= 1``, and for ``T < 1`` their sum is, at ``S' >= 1``
  (every table starts at ``S = 1``): it needs ``2 v (S' + 1)^2 <= (2 S' + v)^2`` with
  ``v = 1 - T``, and the difference is at least ``(2 - v)^2 > 0``. For a window's partly
  capped stretch ``W < S' < W + T`` the same concavity was checked numerically (``W`` from 7 to
  4,096, ``T`` from 0.01 to 20,000; the tests check the result by brute force). Beyond the
  table's ends the time is the call's roofline times the end's ratio, and ``f_T`` grows there
  (FLOPs: the new pairs grow; bytes: ``S (2 T S - T (T - 1)) / (S (S + 1))`` grows). So the
  least over ``S' >= S`` before a window caps every query is at ``S`` or at a knot above it;
- at each knot ``q`` the scaled time is ``D_q (P(q) - P(q - T))`` with ``D_q = table(q) / P(q)``,
  a polynomial of degree at most 2 in ``T`` (two pieces for a window knot, meeting at
  ``T = q - W``). For every suffix of knots (those at or above ``q_j``: the queries with
  ``q_(j-1) < S <= q_j``, so ``0 < T <= q_j``) the knots that are least for some such ``T``
  are found once, when the table is read: the order of the polynomials changes only where two
  of them cross or a piece ends, so comparing them between consecutive such ``T`` is exact.
  A point evaluates only its suffix's candidates (a few: the knee where the call stops being
  launch-bound, and the next knot);
- once a window caps every new query (``S' >= W + T``) the scaled time is ``T G(S')`` with
  ``G(S') = table(S') W / P(S')``, free of ``T``. Between knots ``log G = log C + a u -
  log(e^u - (W - 1) / 2)`` (``u = log S'``) is convex, least where ``e^u = a (W - 1) / (2 (a -
  1))`` when that lies inside (``a > 1``); beyond the table ``G`` falls towards
  ``ratio x max(4 h d W / peak, bytes per token / HBM)``, which it never reaches. So the least
  of ``G`` over ``S' >= x`` is ``G(x)`` or a precomputed suffix least over the knots, the
  interior minima and that limit: one more table lookup, at ``x = max(S, W + T)``.

A chunked layer is left as it is: its new tokens score fewer pairs once the prefix crosses a
chunk boundary (a query after ``K = C`` cached tokens sees one key, after ``C - 1`` it sees
``C``), so its work falls with ``K`` and so does its roofline.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.forward_op import Op
from kvroof.kernels.interpolate import LogCurve
from kvroof.kernels.work import attention_pairs, attention_work

__all__ = ["PrefixRule", "prefix_rule"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class PrefixRule:
    """Where the least scaled time over larger prefixes can lie, for one attention op's table
    call: the ``knots`` (sizes ``S`` of the table's time), per suffix of knots (index ``j``: the
    queries with ``q_(j-1) < S <= q_j``; ``j = len(knots)``: beyond the last, no candidate) the
    candidate knots as columns ``j`` of ``coef_a``, ``coef_b`` (full attention: the scaled time
    at knot ``q`` is ``T (a - b T)``) or of ``cand_q``, ``cand_d``, ``cand_p`` (a window:
    ``d (p - P(q - T))``), one row a candidate, a row's extra columns repeating its first
    candidate; for full attention ``t_below`` (per row, the ``T`` below which the time may
    fall after ``S``: :func:`_rising`) and ``s_below`` (no row above it has such a ``T``); and
    for a window ``W`` the capped part: ``g_knots`` and ``g_least`` (the least ``G`` at each
    and above, the last entry the limit beyond every knot)."""

    window: float
    knots: FloatArray
    coef_a: FloatArray
    coef_b: FloatArray
    cand_q: FloatArray
    cand_d: FloatArray
    cand_p: FloatArray
    g_knots: FloatArray
    g_least: FloatArray
    t_below: FloatArray
    s_below: float

    def least(self, t: Any, s: Any, scaled: Any,
              table_at: Callable[[Any], Any]) -> Any:
        """The least scaled time over prefixes at least ``S = s`` long for ``t`` new tokens
        (floats, or broadcasting arrays), given the scaled time ``scaled`` at ``S`` itself (an
        array of the points' shape is lowered in place) and ``table_at`` (the table's call
        time at a size: a window's at ``W + T``)."""
        if type(s) is float and type(t) is float:
            return self._least_float(t, s, float(scaled), table_at)
        return self._least_array(np.asarray(t, dtype=np.float64),
                                 np.asarray(s, dtype=np.float64), scaled, table_at)

    def _least_float(self, t: float, s: float, scaled: float,
                     table_at: Callable[[Any], Any]) -> float:
        n = len(self.knots)
        if self.window <= 0.0 and s > self.s_below:
            return scaled
        j = bisect.bisect_left(self._knots_list, s)
        best = scaled
        if j < n and (self.window > 0.0 or t < self._t_below_list[j]):
            if self.window > 0.0:
                w = self.window
                for q, d, p in self._window_rows[j]:
                    x = q - t
                    m = x if x < w else w
                    value = d * (p - (m * (m + 1.0) / 2.0 + (x - m) * w))
                    best = value if value < best else best
            else:
                for a, b in self._full_rows[j]:
                    value = t * (a - b * t)
                    best = value if value < best else best
        if self.window > 0.0:
            w = self.window
            x = s if s > w + t else w + t
            g = float(table_at(x)) * w / float(attention_pairs(x, w))
            k = bisect.bisect_left(self._g_list, x)
            tail = self._g_least_list[k]
            value = t * (g if g < tail else tail)
            best = value if value < best else best
        return best

    def _least_array(self, t: FloatArray, s: FloatArray, scaled: Any,
                     table_at: Callable[[Any], Any]) -> FloatArray:
        shape = np.broadcast_shapes(t.shape, s.shape)
        if isinstance(scaled, np.ndarray) and scaled.shape == shape \
                and scaled.dtype == np.float64 and scaled.flags.c_contiguous:
            best = scaled  # the caller's own array of scaled times, lowered in place
        else:
            best = np.array(np.broadcast_to(scaled, shape), dtype=np.float64)
        if self.window > 0.0:
            self._window_least(np.broadcast_to(t, shape), np.broadcast_to(s, shape), best,
                               table_at)
            return best
        # only points that may fall later: S up to the last knee, T under the row's bound
        cut = np.broadcast_to(s, shape) <= self.s_below
        if not cut.any():
            return best
        ts = np.broadcast_to(t, shape)[cut]
        row = np.searchsorted(self.knots, np.broadcast_to(s, shape)[cut], side="left")
        keep = ts < self.t_below[row]
        where = np.flatnonzero(cut)[keep]
        ts, row = ts[keep], row[keep]
        a, b = self.coef_a, self.coef_b
        least = a[0].take(row) - b[0].take(row) * ts
        for col in range(1, len(a)):
            np.minimum(least, a[col].take(row) - b[col].take(row) * ts, out=least)
        flat = best.reshape(-1)
        flat[where] = np.minimum(flat[where], least * ts)
        return best

    def _window_least(self, t: FloatArray, s: FloatArray, best: FloatArray,
                      table_at: Callable[[Any], Any]) -> None:
        """:meth:`least` of a window layer on arrays of the points' shape, into ``best``: every
        point takes ``T`` times the least ``G`` at the capped sizes from ``max(S, W + T)`` on
        (past the first knot there; at ``S`` itself, once capped, ``T G(S)`` is the scaled time
        already); a point not yet capped (``S < W + T``) also its row's knots and ``T G(W + T)``."""
        n = len(self.knots)
        w = self.window
        x = np.maximum(s, w + t)
        np.minimum(best, t * self.g_least[np.searchsorted(self.g_knots, x, side="left")],
                   out=best)
        partly = s < w + t
        if not partly.any():
            return
        where = np.flatnonzero(partly)
        ts, ss, xs = t[partly], s[partly], x[partly]
        flat = best.reshape(-1)
        sub = flat[where]
        np.minimum(sub, ts * (np.asarray(table_at(xs), dtype=np.float64) * w
                              / attention_pairs(xs, w)), out=sub)
        j = np.searchsorted(self.knots, ss, side="left")
        inside = j < n
        row = np.minimum(j, n - 1)
        for q, d, p in zip(self.cand_q, self.cand_d, self.cand_p, strict=True):
            y = q.take(row) - ts
            m = np.minimum(y, w)
            value = d.take(row) * (p.take(row) - (m * (m + 1.0) / 2.0 + (y - m) * w))
            np.minimum(sub, value, out=sub, where=inside)
        flat[where] = sub

    _knots_list: list[float] = field(init=False, repr=False)
    _full_rows: list[list[tuple[float, float]]] = field(init=False, repr=False)
    _window_rows: list[list[tuple[float, float, float]]] = field(init=False, repr=False)
    _g_list: list[float] = field(init=False, repr=False)
    _g_least_list: list[float] = field(init=False, repr=False)
    _t_below_list: list[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # plain Python copies for the float path (a scalar TTFT costs microseconds)
        object.__setattr__(self, "_knots_list", self.knots.tolist())
        object.__setattr__(self, "_full_rows", [
            sorted(set(zip(a, b, strict=True)))
            for a, b in zip(self.coef_a.T.tolist(), self.coef_b.T.tolist(), strict=True)])
        object.__setattr__(self, "_window_rows", [
            sorted(set(zip(q, d, p, strict=True))) for q, d, p in zip(
                self.cand_q.T.tolist(), self.cand_d.T.tolist(), self.cand_p.T.tolist(),
                strict=True)])
        object.__setattr__(self, "_g_list", self.g_knots.tolist())
        object.__setattr__(self, "_g_least_list", self.g_least.tolist())
        object.__setattr__(self, "_t_below_list", self.t_below.tolist())


def _pieces(q: FloatArray, p: FloatArray, d: FloatArray, window: float
            ) -> tuple[FloatArray, FloatArray]:
    """Per knot the scaled time's polynomial in ``T`` (coefficients of ``1, T, T^2``): where
    ``q - T <= W`` (every knot of full attention) ``d (p - (q - T)(q - T + 1) / 2)``, and for a
    window knot where ``q - T > W``, ``d W T``."""
    quad = np.stack([d * (p - q * (q + 1.0) / 2.0), d * (q + 0.5), -0.5 * d], axis=-1)
    lin = np.stack([np.zeros_like(d), d * window, np.zeros_like(d)], axis=-1)
    return quad, lin


def _crossings(polys: FloatArray) -> FloatArray:
    """Real roots of the difference of every pair of the polynomials ``polys`` (rows of
    coefficients of ``1, T, T^2``)."""
    i, j = np.triu_indices(len(polys), 1)
    c0, c1, c2 = (polys[i] - polys[j]).T
    roots = []
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = (c2 == 0) & (c1 != 0)
        roots.append(-c0[linear] / c1[linear])
        quad = c2 != 0
        a, b, c = c2[quad], c1[quad], c0[quad]
        disc = b * b - 4.0 * a * c
        real = disc >= 0
        root = np.sqrt(disc[real])
        roots += [(-b[real] + root) / (2.0 * a[real]), (-b[real] - root) / (2.0 * a[real])]
    return np.concatenate(roots)


def _scaled_at_knots(q: FloatArray, p: FloatArray, d: FloatArray, window: float,
                     t: FloatArray) -> FloatArray:
    """``(len(t), len(q))``: the scaled time at every knot for every ``T`` (the exact rule,
    ``P`` capped at the window)."""
    x = q[None, :] - t[:, None]
    capped = attention_pairs(np.maximum(x, 0.0), window) if window > 0 else x * (x + 1.0) / 2.0
    return np.asarray(d[None, :] * (p[None, :] - capped), dtype=np.float64)


def _candidates(q: FloatArray, p: FloatArray, d: FloatArray, window: float) -> list[list[int]]:
    """Per suffix of knots ``j`` (queries with ``0 < T <= q_j``): the knots at or above ``q_j``
    least for some such ``T``, compared between consecutive points where two scaled times
    cross or a window knot's piece ends (their order is fixed in between)."""
    quad, lin = _pieces(q, p, d, window)
    polys = np.concatenate([quad, lin]) if window > 0 else quad
    edges = [q, _crossings(polys)]
    if window > 0:
        edges.append(q - window)
    crit = np.concatenate(edges)
    crit = np.unique(crit[np.isfinite(crit) & (crit > 0) & (crit <= q[-1])])
    crit = np.concatenate([[0.0], crit])
    samples = np.concatenate([crit[1:], (crit[:-1] + crit[1:]) / 2.0])
    values = _scaled_at_knots(q, p, d, window, samples)
    rows = []
    for j in range(len(q)):
        mask = samples <= q[j]
        least = j + np.argmin(values[mask][:, j:], axis=1)
        rows.append(sorted({int(i) for i in least} | {j}))
    return rows


def _rising(q: FloatArray, logs: FloatArray) -> FloatArray:
    """Full attention, per row ``j`` (the points with ``q_(j-1) < S <= q_j``; ``j = len(q)``:
    beyond the table): the ``T`` below which the scaled time may fall somewhere after ``S``
    (0: nowhere). On a stretch where the table's time is ``C S^a``, ``d log f_T / d log S =
    a - 1 + 2 S / (2 S - T + 1) - S / (S + 1)``, which grows with ``T`` and with ``S``'s share
    terms, so it is at least 0 over the stretch once ``T - 1 >= 2 q (R - 1) / R`` with
    ``R = 1 - a + q / (q + 1)`` at the stretch's top ``q`` (where the need is largest); for
    ``T >= 1`` always when ``R <= 1``, and for every ``T`` when ``a >= 1`` (then
    ``2 S / (2 S - T + 1) >= S / (S + 1)``). Beyond the table the time grows."""
    slope = np.diff(logs) / np.diff(np.log(q))
    top = q[1:]
    ratio = 1.0 - slope + top / (top + 1.0)
    need = np.where(ratio > 1.0, 1.0 + 2.0 * top * (ratio - 1.0) / ratio,
                    np.where(slope < 1.0, 1.0, 0.0))
    # row j: the stretches from j - 1 on (row 0: every stretch; the last row: none)
    after = np.maximum.accumulate(need[::-1])[::-1]
    return np.concatenate([after[:1], after, [0.0]]).astype(np.float64)


def _capped_part(times: LogCurve, window: float, ratio_limit: float
                 ) -> tuple[FloatArray, FloatArray]:
    """A window's ``G(S) = table(S) W / P(S)`` at the knots above ``W`` and at each stretch's
    interior minimum, and its least at each and above (the limit beyond the table last)."""
    q = np.exp(times.log_points)
    logs = times.values
    c = (window - 1.0) / 2.0
    extra = []
    for i in range(len(q) - 1):
        if q[i] < window:
            continue
        slope = (logs[i + 1] - logs[i]) / (times.log_points[i + 1] - times.log_points[i])
        if slope > 1.0:
            star = slope * c / (slope - 1.0)
            if q[i] < star < q[i + 1]:
                extra.append(star)
    knots = np.unique(np.concatenate([q[q > window], extra]))
    g = np.exp(times(knots)) * window / attention_pairs(knots, window)
    least = np.minimum.accumulate(np.append(g, ratio_limit)[::-1])[::-1]
    return knots.astype(np.float64), least.astype(np.float64)


def prefix_rule(op: Op, times: LogCurve, window: float, peak: float, hbm: float
                ) -> PrefixRule | None:
    """The :class:`PrefixRule` of an attention op's table call (``times``: its ``log`` seconds,
    made non-decreasing in ``S``; ``window``: the call's window, 0 for full attention); None for
    a chunked layer (its work falls with ``K``: module docstring)."""
    if op.rule not in ("full", "window"):
        return None
    assert op.dtype is not None and op.kv_dtype is not None
    w = window if op.rule == "window" else 0.0
    q = np.exp(times.log_points)
    p = np.asarray(attention_pairs(q, w), dtype=np.float64)
    d = np.exp(times.values) / p
    rows = _candidates(q, p, d, w)
    width = max(len(r) for r in rows)
    # (candidate, row): one contiguous array a candidate column, gathered with take
    index = np.array([r + [r[0]] * (width - len(r)) for r in rows], dtype=np.intp).T.copy()
    empty = np.zeros(0, dtype=np.float64)
    if w <= 0:
        t_below = _rising(q, times.values)
        last = np.flatnonzero(t_below > 0.0)
        return PrefixRule(0.0, q, (d * (q + 0.5))[index], (0.5 * d)[index],
                          empty, empty, empty, empty, empty, t_below,
                          float(q[last[-1]]) if last.size else 0.0)
    flops, size = attention_work(1.0, op.heads, op.kv_heads, op.head_dim, w, op.dtype,
                                 op.kv_dtype)  # one token: 4 h d FLOPs, its bytes
    high = float(q[-1])
    f_high, b_high = attention_work(high, op.heads, op.kv_heads, op.head_dim, w, op.dtype,
                                    op.kv_dtype)
    ratio = float(np.exp(times.values[-1])) / max(f_high / peak, b_high / hbm)
    limit = ratio * max(flops * w / peak, size / hbm)
    g_knots, g_least = _capped_part(times, w, limit)
    every = np.full(len(q) + 1, np.inf)
    return PrefixRule(w, q, empty.reshape(0, len(q)), empty.reshape(0, len(q)), q[index],
                      d[index], p[index], g_knots, g_least, every, np.inf)

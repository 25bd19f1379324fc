"""Multilinear interpolation on a regular grid in the logarithm of the coordinates,
vectorized over the query points (no Python loop over points or grid cells).

Between grid points a value is linear in ``log(x)`` along each axis (multilinear over all of
them); outside an axis's range the coordinate is clamped to the nearest end, so the boundary
value is held, and the point is reported as outside on that axis. :class:`LogCurve` is the same
rule along one axis (a grid's slice, kept for fast repeated evaluation: kernel mode's curves).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.kernels.tables import Grid, KernelTableError

__all__ = ["Interpolated", "LogCurve", "interpolate"]

RELATIVE_TOLERANCE = 1e-9
"""A coordinate this close (relatively) to an end of its axis counts as inside."""


@dataclass(frozen=True, eq=False)
class Interpolated:
    """The interpolated ``values`` (the broadcast shape of the query), ``outside`` (per axis:
    which points lay outside that axis's range and got its boundary value) and ``unmeasured``
    (which points took weight from a cell the derivation filled rather than measured)."""

    values: NDArray[np.float64]
    outside: dict[str, NDArray[np.bool_]]
    unmeasured: NDArray[np.bool_]

    @property
    def extrapolated(self) -> NDArray[np.bool_]:
        """Points outside the grid on any axis."""
        out = np.zeros(self.values.shape, dtype=bool)
        for mask in self.outside.values():
            out |= mask
        return out


@lru_cache(maxsize=8)
def _corner_bits(dims: int) -> NDArray[np.bool_]:
    """``(dims, 2**dims)``: bit ``a`` of corner ``c`` (the upper neighbour on axis ``a``)."""
    corners = np.arange(2**dims)
    return ((corners[None, :] >> np.arange(dims)[:, None]) & 1).astype(bool)


def _cells(logp: NDArray[np.float64], lx: NDArray[np.float64]
           ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Per log coordinate: the lower neighbour's index on the axis ``logp`` and the fraction
    towards the upper one, the coordinate clamped to the axis (the one rule of this module)."""
    if logp.size == 1:
        return np.zeros(lx.shape, dtype=np.intp), np.zeros(lx.shape, dtype=np.float64)
    clamped = np.clip(lx, logp[0], logp[-1])
    i = np.clip(np.searchsorted(logp, clamped, side="right") - 1, 0, logp.size - 2)
    frac = (clamped - logp[i]) / (logp[i + 1] - logp[i])
    return i.astype(np.intp), frac


def _cell(logp: Sequence[float], lx: float) -> tuple[int, float]:
    """:func:`_cells` for one coordinate (pure Python: a scalar lookup costs microseconds)."""
    n = len(logp)
    if n == 1 or lx <= logp[0]:
        return 0, 0.0
    if lx >= logp[-1]:
        return n - 2, 1.0
    i = min(bisect.bisect_right(logp, lx), n - 1) - 1  # NaN: the last cell, a NaN fraction
    return i, (lx - logp[i]) / (logp[i + 1] - logp[i])


def _locate(name: str, x: NDArray[np.float64], logp: NDArray[np.float64]
            ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.bool_]]:
    """Per point: the lower neighbour's index, the fraction towards the upper one (in log
    space, clamped to the axis) and whether the point lay outside the axis."""
    if not np.all(x > 0) or not np.all(np.isfinite(x)):
        raise KernelTableError(f"{name} must be positive and finite for a kernel-table lookup")
    lx = np.log(x)
    outside = (lx < logp[0] - RELATIVE_TOLERANCE) | (lx > logp[-1] + RELATIVE_TOLERANCE)
    i, frac = _cells(logp, lx)
    return i, frac, outside


def _contract(values: NDArray[np.float64], unmeasured: NDArray[np.bool_], axis: int,
              i: int, t: float) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """``values`` interpolated along ``axis`` at one coordinate (lower index ``i``, fraction
    ``t``), and which results took weight from an unmeasured cell."""
    low_v = np.take(values, i, axis=axis)
    low_u = np.take(unmeasured, i, axis=axis)
    if t == 0.0:
        return low_v, low_u
    high_v = np.take(values, i + 1, axis=axis)
    high_u = np.take(unmeasured, i + 1, axis=axis)
    if t == 1.0:
        return high_v, high_u
    return low_v * (1.0 - t) + high_v * t, low_u | high_u


def _point(grid: Grid, xs: list[float]) -> tuple[float, list[bool], bool]:
    """The value at one point (pure Python: a scalar lookup costs microseconds), whether it
    lay outside each axis, and whether it leant on an unmeasured cell."""
    flat_values, flat_measured, log_points = grid.flat_lists
    index0 = 0
    corners: list[tuple[int, float]] = [(0, 1.0)]
    outside: list[bool] = []
    stride = len(flat_values)
    for name, x, logp in zip(grid.axes, xs, log_points, strict=True):
        if not (x > 0 and math.isfinite(x)):
            raise KernelTableError(f"{name} must be positive and finite for a kernel-table "
                                   "lookup")
        stride //= len(logp)
        lx = math.log(x)
        outside.append(lx < logp[0] - RELATIVE_TOLERANCE or lx > logp[-1] + RELATIVE_TOLERANCE)
        if len(logp) == 1:
            continue
        i, t = _cell(logp, lx)
        index0 += i * stride
        if t > 0.0:
            corners = [c for base, w in corners
                       for c in ((base, w * (1.0 - t)), (base + stride, w * t))]
    value = 0.0
    unmeasured = False
    for offset, w in corners:
        if w > 0.0:
            value += flat_values[index0 + offset] * w
            unmeasured = unmeasured or not flat_measured[index0 + offset]
    return value, outside, unmeasured


class LogCurve:
    """Values at increasing positive ``points`` along one axis, evaluated by :func:`interpolate`'s
    rule: linear in the logarithm of the point between two points, the end value held beyond
    either end (a point at or below 0 takes the first value). ``low`` and ``high`` are the ends.
    Call it on a float (pure Python, a float back) or an array (an array back, by
    ``np.interp`` in the logarithm: the same rule in one pass)."""

    __slots__ = ("_lp", "_v", "high", "log_points", "low", "values")

    def __init__(self, points: Sequence[float] | NDArray[np.float64],
                 values: Sequence[float] | NDArray[np.float64]) -> None:
        p = np.asarray(points, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if p.ndim != 1 or p.size == 0 or v.shape != p.shape or not np.all(p > 0) \
                or np.any(np.diff(p) <= 0):
            raise KernelTableError("a curve needs as many values as points, the points "
                                   "positive and strictly increasing")
        self.log_points = np.log(p)
        self.values = v
        self._lp: list[float] = self.log_points.tolist()
        self._v: list[float] = v.tolist()
        self.low = float(p[0])
        self.high = float(p[-1])

    def at(self, x: float) -> float:
        """The value at one point (pure Python)."""
        v = self._v
        i, t = _cell(self._lp, math.log(x) if x > 0.0 else (-math.inf if x <= 0.0 else x))
        if t == 0.0:
            return v[i]
        return v[i] * (1.0 - t) + v[i + 1] * t

    def __call__(self, x: Any) -> Any:
        if type(x) is float:
            return self.at(x)
        # the same rule as _cells and a weighted sum, in numpy's one pass (a kernel-mode grid
        # evaluates curves at a million points)
        with np.errstate(divide="ignore", invalid="ignore"):
            lx = np.log(np.maximum(np.asarray(x, dtype=np.float64), 0.0))
        return np.interp(lx, self.log_points, self.values)


def interpolate(grid: Grid, coords: dict[str, ArrayLike]) -> Interpolated:
    """Values of ``grid`` at ``coords`` (one array-like per axis, broadcast together; sizes,
    all positive).

    Axes queried at a single coordinate are contracted first (the grid is interpolated along
    them once); the remaining axes are interpolated per point, gathering each point's
    ``2**d`` corner cells at once."""
    missing = [a for a in grid.axes if a not in coords]
    if missing:
        raise KernelTableError(f"interpolation needs {', '.join(missing)}")
    arrays = [np.asarray(coords[a], dtype=np.float64) for a in grid.axes]
    shape = np.broadcast_shapes(*(x.shape for x in arrays))
    if all(x.size == 1 for x in arrays):
        value, flags, leaning = _point(grid, [float(x.reshape(-1)[0]) for x in arrays])
        return Interpolated(values=np.full(shape, value),
                            outside={name: np.full(shape, o)
                                     for name, o in zip(grid.axes, flags, strict=True)},
                            unmeasured=np.full(shape, leaning))
    values = grid.values
    unmeasured = ~grid.measured
    outside: dict[str, NDArray[np.bool_]] = {}
    located: list[tuple[NDArray[np.intp], NDArray[np.float64]]] = []
    varying: list[int] = []
    # contract the single-coordinate axes, last first, so earlier axis numbers stay valid
    for a in range(len(grid.axes) - 1, -1, -1):
        name, x = grid.axes[a], arrays[a]
        i, t, out = _locate(name, x, grid.log_points[a])
        outside[name] = np.broadcast_to(out, shape)
        if x.size == 1:
            values, unmeasured = _contract(values, unmeasured, a, int(i.reshape(-1)[0]),
                                           float(t.reshape(-1)[0]))
        else:
            varying.append(a)
            located.append((i, t))
    varying.reverse()
    located.reverse()
    outside = {name: outside[name] for name in grid.axes}
    dims = len(varying)
    if dims == 0:
        return Interpolated(values=np.broadcast_to(values, shape).astype(np.float64),
                            outside=outside,
                            unmeasured=np.broadcast_to(unmeasured, shape).copy())
    sizes = values.shape
    strides = [1] * dims  # of the C-ordered flat remaining grid
    for d in range(dims - 2, -1, -1):
        strides[d] = strides[d + 1] * sizes[d + 1]
    bits = _corner_bits(dims)
    index = np.zeros((*shape, 2**dims), dtype=np.intp)
    weight = np.ones((*shape, 2**dims), dtype=np.float64)
    for d, (i, t) in enumerate(located):
        step = bits[d] if sizes[d] > 1 else np.zeros_like(bits[d])
        index += (np.broadcast_to(i, shape)[..., None] + step) * strides[d]
        frac = np.broadcast_to(t, shape)[..., None]
        weight *= np.where(bits[d], frac, 1.0 - frac)
    flat_values = np.ascontiguousarray(values).reshape(-1)
    flat_unmeasured = np.ascontiguousarray(unmeasured).reshape(-1)
    result = np.einsum("...c,...c->...", flat_values[index], weight)
    leaning = np.any((weight > 0) & flat_unmeasured[index], axis=-1)
    return Interpolated(values=result, outside=outside, unmeasured=leaning)

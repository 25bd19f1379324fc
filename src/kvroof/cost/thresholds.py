"""Hardware thresholds of one request shape (``K = kappa_ratio x T``): the host-link bandwidth at
which it is exactly compute-bound (:func:`required_bandwidth`) and the compute above which it
turns transfer-bound (:func:`transfer_bound_compute`), each found by bisection over the cost
model's own timing functions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import FloatArray, nonnegative, scalar_or_array, token_count
from kvroof.cost.compute import compute_time
from kvroof.cost.deployment import Deployment
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError

__all__ = ["SolveResult", "required_bandwidth", "transfer_bound_compute"]


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
    outlast the transfer).

    A peak FLOP/s is the roofline's input: the kernel tables time each op from measurements.
    Under ``compute_model`` auto the solve is the roofline's (a ``compute`` override keeps auto
    on the roofline, :func:`kvroof.cost.compute_figures.roofline_setting`); under ``kernels`` it
    is refused."""
    if dep.compute_model == "kernels":
        raise KvroofError("compute_model: kernels times each op from the measured kernel "
                          "tables, so no peak compute sets it; transfer_bound_compute solves "
                          "the roofline (use compute_model auto or roofline)")
    t = token_count("new_tokens", new_tokens, at_least_one=True)
    k = nonnegative("kappa_ratio", kappa_ratio) * t
    x = np.asarray(transfer_time(dep, k, t))
    shape = np.broadcast_shapes(x.shape, t.shape)
    keep = dep.compute_efficiency
    if keep is None and dep.calibration is None:
        keep = dep.default_compute_efficiency  # the efficiency stays that of this accelerator

    def transfer_bound(c: FloatArray) -> Any:
        changed = dataclasses.replace(dep, compute=c, compute_efficiency=keep,
                                      compute_model="roofline")
        return np.asarray(compute_time(changed, t, k)) < x

    value, ok_lo, ok_hi = _bisect_log(transfer_bound, 1e6, 1e21, shape)
    value = np.where(ok_lo, 0.0, np.where(ok_hi, value, np.inf))
    reason = np.where(ok_hi, "", "no compute makes it transfer-bound at this K/T (HBM reads "
                                 "or all-reduces outlast the transfer)")
    return SolveResult(scalar_or_array(value), str(reason) if reason.ndim == 0 else reason)

"""Compute time (the GPU's own roofline), and time to first token (prefill only) with and
without overlap.

- compute (per GPU) = ``max(FLOP time, HBM time) + all-reduce time``:
  - FLOP time = prefill FLOPs / (TP x peak x compute efficiency at T);
  - HBM time = bytes one rank reads / (HBM bandwidth x HBM efficiency), the bytes being the
    request's share ``T / N`` of the weights an iteration of ``N`` tokens reads
    (:func:`kvroof.cost.weights.weights_read_per_rank`; ``N = iteration_tokens``, by default
    ``T``: the request alone) plus the KV of the ``K + T`` positions its attention reads
    (:func:`kvroof.cost.transfer.kv_bytes_per_rank`);
  - all-reduce: two per layer for TP > 1 (:func:`kvroof.cost.collectives.allreduce_time`), the
    per-collective latency shared ``T / N`` like the weights.
- transfer: :func:`kvroof.cost.transfer.transfer_time`.
- overlap ``serial`` (the paper's Eq. 5): ``t_x + t_c``; ``ideal``: ``max(t_x, t_c)``;
  ``layerwise`` (load layer ``i+1`` while computing layer ``i``), with ``x = t_x/L`` and
  ``c = t_c/L``: ``x + (L-1) x max(x, c) + c``. Always ``serial >= layerwise >= ideal``.
  An overlap efficiency ``eta`` below 1 (a calibrated system's, or the deployment's
  ``overlap_efficiency``) hides only ``eta`` of the shorter side: each ``max(a, b)`` above
  becomes ``max(a, b) + (1 - eta) x min(a, b)``.

Per request (:func:`ttft`, :func:`ttft_batch`), two engine behaviours: with
``reuse_block_tokens`` B the cached prefix is reused in whole blocks, so the ``K mod B`` cached
tokens after the last whole block are recomputed (``K -> K - K mod B``, ``T -> T + K mod B``), and
``request_overhead`` seconds (serving work outside the prefill: scheduling, the call into the
engine) are added to the TTFT. Neither enters :func:`compute_time`, :func:`transfer_time` or
kappa_crit, which take T and K as given. The default overlap is the deployment's engine's (its
layer-wise or whole-prefix loading), else ``serial``.

Result fields: ttft, compute, transfer, exposed transfer (``ttft - compute - request
overhead``: the transfer time not hidden behind compute), ``p_oh = transfer / compute`` (inf
when there is transfer but no compute, 0 when there is neither), transfer share (``exposed /
ttft``; for serial this is the paper's ``P_OH / (1 + P_OH)``), bound (``"transfer"`` where
transfer > compute, else ``"compute"``), achieved FLOP/s per GPU (``FLOPs / TP / ttft``) and
compute utilization (achieved / peak).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import maximum, minimum, scalar_or_array, token_count, token_value
from kvroof.cost.collectives import allreduce_time
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.terms import ComputeParts, compute_parts, roofline, transfer_parts
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
from kvroof.errors import KvroofError

__all__ = [
    "OVERLAP_MODES",
    "ComputeBreakdown",
    "Overlap",
    "TTFTResult",
    "allreduce_time",
    "combine_overlap",
    "compute_breakdown",
    "compute_time",
    "default_overlap",
    "iteration_tokens_for",
    "reused_tokens",
    "roofline_breakdown",
    "ttft",
    "ttft_batch",
]

Overlap = Literal["serial", "layerwise", "ideal"]
OVERLAP_MODES: tuple[Overlap, ...] = ("serial", "layerwise", "ideal")


def iteration_tokens_for(dep: Deployment, new_tokens: Any) -> Any:
    """Tokens that share the weight read of the request's iteration: ``iteration_tokens`` (which
    must be at least ``T``), or ``None`` (the request alone)."""
    n = dep.terms.iteration_tokens
    if n is None:
        return None
    if np.any(np.asarray(n) < np.asarray(new_tokens)):
        raise KvroofError(
            f"iteration_tokens: {dep.iteration_tokens!r} is fewer than the request's new tokens "
            f"T (max {float(np.max(new_tokens)):g}); an iteration holds at least the request"
        )
    return n


@dataclass(frozen=True)
class ComputeBreakdown:
    """One GPU's compute time and its parts (seconds); arrays broadcast like the inputs."""

    flops: Any
    flop_time: Any
    hbm_bytes: Any
    weight_bytes: Any
    hbm_time: Any
    comm_time: Any

    @property
    def total(self) -> Any:
        """``max(FLOP time, HBM time) + all-reduce time``."""
        return scalar_or_array(np.maximum(self.flop_time, self.hbm_time) + self.comm_time)

    @property
    def limit(self) -> Any:
        """``"flops"`` where FLOPs set the time, ``"hbm"`` where the HBM reads do."""
        limit = np.where(np.asarray(self.hbm_time) > np.asarray(self.flop_time), "hbm", "flops")
        return str(limit) if limit.ndim == 0 else limit


def _breakdown(parts: ComputeParts) -> ComputeBreakdown:
    def out(value: Any) -> Any:
        return value if type(value) is float else scalar_or_array(
            np.asarray(value, dtype=np.float64))

    return ComputeBreakdown(flops=out(parts.flops), flop_time=out(parts.flop_time),
                            hbm_bytes=out(parts.hbm_bytes), weight_bytes=out(parts.weight_bytes),
                            hbm_time=out(parts.hbm_time), comm_time=out(parts.comm_time))


def roofline_breakdown(
    dep: Deployment, flops: Any, tokens: Any, kv_read: Any, iteration_tokens: Any = None
) -> ComputeBreakdown:
    """The GPU roofline for work of ``flops`` FLOPs (whole TP group) over ``tokens`` tokens
    that reads ``kv_read`` KV bytes per rank, when ``iteration_tokens`` tokens (default:
    ``tokens``) share one read of the weights (:func:`kvroof.cost.terms.roofline`)."""
    t = np.asarray(tokens, dtype=np.float64)
    n = None if iteration_tokens is None else np.asarray(iteration_tokens, dtype=np.float64)
    return _breakdown(roofline(dep.terms, np.asarray(flops, dtype=np.float64), t,
                               np.asarray(kv_read, dtype=np.float64), n))


def compute_breakdown(
    dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0
) -> ComputeBreakdown:
    """FLOP time, HBM time and all-reduce time of a prefill of ``new_tokens`` on top of
    ``cached_tokens`` on one GPU (its TP share)."""
    t = token_value("new_tokens", new_tokens)
    k = token_value("cached_tokens", cached_tokens)
    return _breakdown(compute_parts(dep.terms, t, k, iteration_tokens_for(dep, t)))


def compute_time(dep: Deployment, new_tokens: ArrayLike, cached_tokens: ArrayLike = 0) -> Any:
    """Seconds of prefill compute on one GPU: ``max(FLOP time, HBM time) + all-reduce``."""
    return compute_breakdown(dep, new_tokens, cached_tokens).total


def combine_overlap(
    transfer: Any, compute: Any, layers: int, overlap: Overlap, efficiency: Any = 1.0
) -> Any:
    """TTFT from transfer and compute seconds under an overlap mode (broadcasts); ``efficiency``
    is the share of the shorter side that overlap hides."""
    mode = _check_overlap(overlap)
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    eta = np.asarray(efficiency, dtype=np.float64)
    return scalar_or_array(np.asarray(_combine(x, c, layers, mode,
                                               float(eta) if eta.ndim == 0 else eta)))


class TTFTResult:
    """Time to first token and its parts (seconds, per GPU); arrays broadcast like the inputs.

    A result holds ``ttft``, ``compute``, ``transfer`` and ``flops``; the other fields are
    derived from them when read (a 1e7-point grid holds 32 bytes per point).
    """

    __slots__ = ("_cached", "_new", "_peak", "_tp", "compute", "flops", "overhead", "overlap",
                 "transfer", "ttft")

    def __init__(self, ttft: Any, compute: Any, transfer: Any, flops: Any, overlap: Overlap,
                 tp: int, peak: Any, new_tokens: Any = None, cached_tokens: Any = None,
                 overhead: Any = 0.0) -> None:
        self.ttft = ttft
        self.compute = compute
        self.transfer = transfer
        self.flops = flops
        self.overlap: Overlap = overlap
        self.overhead = overhead
        """The deployment's ``request_overhead`` included in ``ttft`` (seconds)."""
        self._tp = tp
        self._peak = peak
        self._new = new_tokens
        self._cached = cached_tokens

    def __repr__(self) -> str:
        return (f"TTFTResult(ttft={self.ttft!r}, compute={self.compute!r}, "
                f"transfer={self.transfer!r}, bound={self.bound!r}, overlap={self.overlap!r})")

    @property
    def exposed_transfer(self) -> Any:
        """Transfer time not hidden behind compute: ``ttft - compute - overhead``."""
        return self.ttft - self.compute - self.overhead

    @property
    def p_oh(self) -> Any:
        """``transfer / compute`` (inf with transfer and no compute, 0 with neither)."""
        x, c = self.transfer, self.compute
        if type(x) is float and type(c) is float:
            return x / c if c > 0 else (math.inf if x > 0 else 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return scalar_or_array(np.where(c > 0, x / np.where(c > 0, c, 1.0),
                                            np.where(x > 0, np.inf, 0.0)))

    @property
    def transfer_share(self) -> Any:
        """``exposed transfer / ttft`` (0 for an empty request)."""
        total, exposed = self.ttft, self.exposed_transfer
        if type(total) is float:
            return exposed / total if total > 0 else 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            return scalar_or_array(np.where(total > 0, exposed
                                            / np.where(total > 0, total, 1.0), 0.0))

    @property
    def bound(self) -> Any:
        """``"transfer"`` where transfer > compute, else ``"compute"``."""
        x, c = self.transfer, self.compute
        if type(x) is float and type(c) is float:
            return "transfer" if x > c else "compute"
        bound = np.where(np.asarray(x) > np.asarray(c), "transfer", "compute")
        return str(bound) if bound.ndim == 0 else bound

    @property
    def transfer_bound(self) -> Any:
        """``True`` where transfer > compute (a boolean array for arrays)."""
        return np.asarray(self.transfer) > np.asarray(self.compute) \
            if not (type(self.transfer) is float and type(self.compute) is float) \
            else self.transfer > self.compute

    @property
    def achieved_flops(self) -> Any:
        """FLOP/s per GPU over the TTFT."""
        total = self.ttft
        if type(total) is float:
            return self.flops / self._tp / total if total > 0 else 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            return scalar_or_array(np.where(total > 0, np.asarray(self.flops) / self._tp
                                            / np.where(total > 0, total, 1.0), 0.0))

    @property
    def compute_utilization(self) -> Any:
        """Achieved over peak FLOP/s."""
        value = self.achieved_flops / self._peak
        return value if type(value) is float else scalar_or_array(np.asarray(value))

    def _repr_html_(self) -> str:
        from kvroof.display import array_summary, html_table, number

        if type(self.ttft) is float:
            rows = [[key, number(value, "s" if key.endswith("_s") else "")]
                    for key, value in self.as_dict().items()]
            return html_table(rows, f"TTFT ({self.overlap})")
        rows = [array_summary(name, getattr(self, name), "s")
                for name in ("ttft", "compute", "transfer", "exposed_transfer")]
        bound = np.asarray(self.transfer_bound)
        rows.append(["transfer-bound", f"{100 * bound.mean():.1f}% of {bound.size} points"])
        return html_table(rows, f"TTFT grid ({self.overlap}); to_frame() for every point")

    def to_frame(self) -> Any:
        """A pandas DataFrame with one row per (T, K) point: ``new_tokens``, ``cached_tokens``
        and every field in SI (``ttft_s``, ``compute_s`` ...)."""
        from kvroof.display import require_pandas

        pandas = require_pandas()
        fields = self.as_dict()
        shape = np.shape(self.ttft)
        columns: dict[str, Any] = {}
        for name, value in (("new_tokens", self._new), ("cached_tokens", self._cached)):
            if value is not None:
                columns[name] = np.broadcast_to(np.asarray(value, dtype=np.float64),
                                                shape).ravel()
        for name, value in fields.items():
            if name != "overlap":
                columns[name] = np.broadcast_to(np.asarray(value), shape).ravel()
        frame = pandas.DataFrame(columns)
        frame["overlap"] = self.overlap
        return frame

    def as_dict(self) -> dict[str, Any]:
        """Fields by name, with ``_s`` on the times (as the CLI's JSON prints them)."""
        return {
            "ttft_s": self.ttft,
            "compute_s": self.compute,
            "transfer_s": self.transfer,
            "exposed_transfer_s": self.exposed_transfer,
            "p_oh": self.p_oh,
            "transfer_share": self.transfer_share,
            "bound": self.bound,
            "flops": self.flops,
            "achieved_flops": self.achieved_flops,
            "compute_utilization": self.compute_utilization,
            "request_overhead_s": self.overhead,
            "overlap": self.overlap,
        }


def _combine(x: Any, c: Any, layers: int, overlap: Overlap, eta: Any) -> Any:
    """:func:`combine_overlap` for validated floats or arrays."""
    if overlap == "serial":
        return x + c
    overlapped = maximum(x, c)
    if not (type(eta) is float and eta == 1.0):
        overlapped = overlapped + (1.0 - eta) * minimum(x, c)
    if overlap == "ideal":
        return overlapped
    return (x + c) / layers + (layers - 1) * overlapped / layers


_OVERFLOW = ("ttft: not computable: a setting is so extreme that the times overflow a float "
             "(look for values such as a compute efficiency of 1e-300 or a latency of 1e300 s)")


def _result(
    dep: Deployment, flops: Any, transfer: Any, compute: Any, overlap: Overlap,
    new_tokens: Any = None, cached_tokens: Any = None,
) -> TTFTResult:
    eta = dep.resolved_overlap_efficiency
    overhead: Any = dep.request_overhead
    if (type(transfer) is float and type(compute) is float and type(flops) is float
            and type(overhead) in (float, int)):
        total = _combine(transfer, compute, dep.model.num_layers, overlap, eta)
        if not math.isfinite(total):
            raise KvroofError(_OVERFLOW)
        peak = dep.terms.peak_rate / dep.tp
        return TTFTResult(total + overhead, compute, transfer, flops, overlap, dep.tp, peak,
                          new_tokens, cached_tokens, float(overhead))
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    o = np.asarray(overhead, dtype=np.float64)
    total = np.asarray(_combine(x, c, dep.model.num_layers, overlap,
                                eta if type(eta) is float else np.asarray(eta))) + o
    if not np.isfinite(total).all():
        raise KvroofError(_OVERFLOW)
    shape = np.broadcast_shapes(x.shape, c.shape, np.shape(flops), o.shape)
    return TTFTResult(
        scalar_or_array(np.broadcast_to(total, shape).copy() if total.shape != shape else total),
        scalar_or_array(np.broadcast_to(c, shape)),
        scalar_or_array(np.broadcast_to(x, shape)),
        scalar_or_array(np.broadcast_to(np.asarray(flops, dtype=np.float64), shape)),
        overlap, dep.tp, np.asarray(dep.peak_compute, dtype=np.float64), new_tokens,
        cached_tokens, float(o) if o.ndim == 0 else scalar_or_array(np.broadcast_to(o, shape)),
    )


def default_overlap(dep: Deployment) -> Overlap:
    """The overlap a deployment's engine loads with (``layerwise`` for layer-wise loading,
    ``serial`` for a whole prefix), else ``serial``."""
    engine = dep.engine
    return "layerwise" if engine is not None and engine.loading == "layerwise" else "serial"


def reused_tokens(dep: Deployment, new_tokens: Any, cached_tokens: Any) -> tuple[Any, Any]:
    """``(T, K)`` as the engine runs them: with ``reuse_block_tokens`` B only whole blocks of
    the cached prefix are reused and the other ``K mod B`` cached tokens are recomputed
    (validated token counts in, the same kind out)."""
    block = dep.reuse_block_tokens
    if block is None or block == 1:
        return new_tokens, cached_tokens
    partial = cached_tokens % block
    return new_tokens + partial, cached_tokens - partial


def _check_overlap(overlap: str) -> Overlap:
    for mode in OVERLAP_MODES:
        if overlap == mode:
            return mode
    raise KvroofError(f"overlap: expected one of {', '.join(OVERLAP_MODES)}, got {overlap!r}")


def ttft(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap | None = None,
) -> TTFTResult:
    """TTFT of one request of ``new_tokens`` (T) on top of ``cached_tokens`` (K) loaded from
    host memory. T and K broadcast (a 1000 x 1000 grid is one call). ``overlap`` defaults to
    the engine's (:func:`default_overlap`); ``reuse_block_tokens`` and ``request_overhead``
    apply (module docstring)."""
    mode = _check_overlap(default_overlap(dep) if overlap is None else overlap)
    t = token_value("new_tokens", new_tokens)
    k = token_value("cached_tokens", cached_tokens)
    run_t, run_k = reused_tokens(dep, t, k)
    terms = dep.terms
    compute = compute_parts(terms, run_t, run_k, iteration_tokens_for(dep, run_t))
    transfer = (transfer_time(dep, run_k, run_t) if terms.tiers
                else transfer_parts(terms, run_k, run_t).total)
    return _result(dep, compute.flops, transfer, compute.total, mode, t, k)


def ttft_batch(
    dep: Deployment,
    new_tokens: ArrayLike,
    cached_tokens: ArrayLike,
    overlap: Overlap | None = None,
) -> TTFTResult:
    """TTFT of a batch prefilled together in one iteration (the last axis of the broadcast T
    and K is the batch): the FLOPs and KV reads add up, the weights are read once for the whole
    batch (``iteration_tokens``, when set, must cover the batch's tokens), the loads and saves
    share the link; then the overlap mode applies (default: the engine's). Each request's
    prefix is reused in whole ``reuse_block_tokens`` blocks; ``request_overhead`` is added once."""
    mode = _check_overlap(default_overlap(dep) if overlap is None else overlap)
    t = token_count("new_tokens", new_tokens)
    k = token_count("cached_tokens", cached_tokens)
    t, k = reused_tokens(dep, t, k)
    t, k = np.broadcast_arrays(t, k)
    if t.ndim == 0:
        t, k = t[None], k[None]
    total = t.sum(axis=-1)
    flops = np.asarray(prefill_flops(dep.model, t, k, dep.mla_mode).total).sum(axis=-1)
    kv = np.where(t > 0, np.asarray(kv_bytes_per_rank(dep, k + t), dtype=np.float64), 0.0)
    compute = roofline_breakdown(dep, flops, total, kv.sum(axis=-1),
                                 iteration_tokens_for(dep, total))
    parts = transfer_breakdown(dep, k, t)
    paths = [np.asarray(path, dtype=np.float64) for path in np.broadcast_arrays(*parts.paths)]
    data = np.maximum.reduce([path.sum(axis=-1) for path in paths])
    transfer = (data + np.asarray(parts.scale_up_time).sum(axis=-1)
                + np.asarray(parts.latency_time).sum(axis=-1))
    return _result(dep, flops, transfer, compute.total, mode)

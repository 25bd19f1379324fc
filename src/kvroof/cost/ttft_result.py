"""The result of a time-to-first-token computation (:class:`TTFTResult`): TTFT, compute and
transfer, and what is derived from them when read.

Fields: ttft, compute, transfer, exposed transfer (``ttft - compute - request overhead - serving
overhead``: the transfer time not hidden behind compute), ``p_oh = transfer / compute`` (inf
when there is transfer but no compute, 0 when there is neither), transfer share (``exposed /
ttft``; for serial this is the paper's ``P_OH / (1 + P_OH)``), bound (``"transfer"`` where
transfer > compute, else ``"compute"``), achieved FLOP/s per GPU (``FLOPs / TP / ttft``) and compute
utilization (achieved / peak). Two labels say what the times are: ``compute_model``
(``roofline`` or ``kernels``: how compute was timed) and ``clock`` (``kernel``: the GPU's work
and the transfer, plus any request overhead set; ``client``: plus the engine's serving overheads,
``serving``, what a client measures). :func:`kvroof.cost.timing.ttft` computes one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvroof.cost.checks import scalar_or_array
from kvroof.cost.overlap import Overlap

__all__ = ["TTFTResult"]


class TTFTResult:
    """Time to first token and its parts (seconds, per GPU); arrays broadcast like the inputs.

    A result holds ``ttft``, ``compute``, ``transfer`` and ``flops``; the other fields are
    derived from them when read (a 1e7-point grid holds 32 bytes per point).
    """

    __slots__ = ("_cached", "_new", "_peak", "_tp", "clock", "compute", "compute_model", "flops",
                 "overhead", "overlap", "serving", "transfer", "ttft")

    def __init__(self, ttft: Any, compute: Any, transfer: Any, flops: Any, overlap: Overlap,
                 tp: int, peak: Any, new_tokens: Any = None, cached_tokens: Any = None,
                 overhead: Any = 0.0, serving: Any = 0.0, compute_model: str = "roofline",
                 clock: str = "kernel") -> None:
        self.ttft = ttft
        self.compute = compute
        self.transfer = transfer
        self.flops = flops
        self.overlap: Overlap = overlap
        self.overhead = overhead
        """The deployment's ``request_overhead`` included in ``ttft`` (seconds)."""
        self.serving = serving
        """The engine's serving overheads included in ``ttft`` (seconds; 0 unless ``clock`` is
        ``client``)."""
        self.compute_model = compute_model
        """How compute was timed: ``roofline`` or ``kernels`` (op by op, measured tables)."""
        self.clock = clock
        """``kernel`` (GPU work and transfer) or ``client`` (plus serving overheads)."""
        self._tp = tp
        self._peak = peak
        self._new = new_tokens
        self._cached = cached_tokens

    def __repr__(self) -> str:
        return (f"TTFTResult(ttft={self.ttft!r}, compute={self.compute!r}, "
                f"transfer={self.transfer!r}, bound={self.bound!r}, overlap={self.overlap!r}, "
                f"compute_model={self.compute_model!r}, clock={self.clock!r})")

    @property
    def exposed_transfer(self) -> Any:
        """Transfer time not hidden behind compute: ``ttft - compute - overhead - serving``."""
        if type(self.serving) is float and self.serving == 0.0:
            return self.ttft - self.compute - self.overhead
        return self.ttft - self.compute - self.overhead - self.serving

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
            if name not in ("overlap", "compute_model", "ttft_clock"):
                columns[name] = np.broadcast_to(np.asarray(value), shape).ravel()
        frame = pandas.DataFrame(columns)
        frame["overlap"] = self.overlap
        frame["compute_model"] = self.compute_model
        frame["ttft_clock"] = self.clock
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
            "serving_overhead_s": self.serving,
            "overlap": self.overlap,
            "compute_model": self.compute_model,
            "ttft_clock": self.clock,
        }

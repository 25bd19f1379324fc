"""Kernel mode's per-op report: each op's share of a prefill or an iteration (:class:`OpTime`:
its seconds, FLOPs and bytes, the model that timed it and where that came from, with notes on
sizes outside its table, :func:`op_notes`) and their sum (:class:`KernelBreakdown`, the
:class:`~kvroof.cost.compute_result.ComputeBreakdown` of kernel mode: FLOP-bound, HBM-bound
and all-reduce time, by model and by kind, one line an op; :func:`breakdown_from_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvroof.cost.checks import scalar_or_array
from kvroof.cost.compute_result import ComputeBreakdown
from kvroof.cost.deployment import Deployment
from kvroof.cost.kernel_resolution import TimedOp
from kvroof.units import Kind, format_quantity

__all__ = ["KernelBreakdown", "OpTime", "breakdown_from_ops", "op_notes"]


@dataclass(frozen=True, eq=False)
class OpTime:
    """One op's share of a prefill: ``seconds`` over all its layers (per rank), its ``flops``
    and ``bytes`` (per rank), the model that timed it and where that came from."""

    timed: TimedOp
    seconds: Any
    flops: Any
    bytes: Any
    notes: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.timed.op.label

    @property
    def kind(self) -> str:
        return self.timed.op.kind

    @property
    def model(self) -> str:
        return self.timed.model

    @property
    def source(self) -> str:
        return self.timed.source

    def as_dict(self) -> dict[str, Any]:
        """The op as plain data (SI units)."""
        op = self.timed.op
        return {"op": op.label, "kind": op.kind, "layers": op.layers, "seconds": self.seconds,
                "flops": self.flops, "bytes": self.bytes, "model": self.model,
                "source": self.source, "notes": list(self.notes)}


@dataclass(frozen=True)
class KernelBreakdown(ComputeBreakdown):
    """Kernel-mode compute: ``total`` is the sum of the ops' times (``ops``); ``flop_time`` the
    ops whose roofline is set by FLOPs, ``hbm_time`` those set by bytes (element-wise kernels
    included; ``limit``, inherited, says which of the two takes more), ``comm_time`` the
    all-reduces; ``hbm_bytes`` and ``weight_bytes`` are the
    roofline's counts, for reference."""

    ops: tuple[OpTime, ...] = ()
    kernel_total: Any = 0.0

    @property
    def total(self) -> Any:
        """The sum of every op's time."""
        return self.kernel_total

    @property
    def compute_model(self) -> str:
        return "kernels"

    def by_model(self) -> dict[str, Any]:
        """Seconds timed by the tables (``kernels``), by the ``roofline`` fallback and by the
        element-wise ``memory rule``."""
        out: dict[str, Any] = {}
        for op in self.ops:
            out[op.model] = out.get(op.model, 0.0) + op.seconds
        return out

    def by_kind(self) -> dict[str, Any]:
        """Seconds by op kind (gemm, attention, moe, allreduce, elementwise, roofline)."""
        out: dict[str, Any] = {}
        for op in self.ops:
            out[op.kind] = out.get(op.kind, 0.0) + op.seconds
        return out

    def describe(self) -> list[str]:
        """One line an op: seconds, model, source and notes (scalar requests)."""
        lines = []
        for op in self.ops:
            value = float(np.max(np.asarray(op.seconds)))
            note = "; ".join(op.notes)
            lines.append(f"{op.label}: {format_quantity(value, Kind.TIME)} ({op.model}: "
                         f"{op.source}{'; ' + note if note else ''})")
        return lines


def op_notes(top: TimedOp, t: Any, k: Any, iteration: Any) -> tuple[str, ...]:
    """The op's notes and, for a request of ``t`` new tokens on ``k`` cached ones (alone, or
    inside an iteration of ``iteration`` tokens), where its size lay outside the table."""
    curve = top.curve
    if curve is None or top.model != "kernels":
        return top.notes
    op = top.op
    size: Any
    if op.scale == "sequence":
        size, axis = t + k, "sequence length"
    elif op.scale == "positions":
        size, axis = t + k, "positions"
    elif op.scale == "logits":
        size, axis = 1.0, "tokens"
    else:
        size = t if iteration is None else iteration
        axis = "tokens"
        if op.kind == "allreduce":
            size, axis = size * op.bytes_per_token, "message bytes"
    values = np.asarray(size, dtype=np.float64)
    above = int(np.count_nonzero(values > curve.high * (1 + 1e-9)))
    below = int(np.count_nonzero((values > 0) & (values < curve.low * (1 - 1e-9))))
    extra = []
    if above:
        held = "grown with the bytes" if op.kind == "allreduce" else "boundary held"
        extra.append(f"{axis} above the table's {curve.high:g} at {above} of {values.size} "
                     f"points ({held})")
    if below:
        extra.append(f"{axis} below the table's {curve.low:g} at {below} of {values.size} "
                     "points (boundary held)")
    return top.notes + tuple(extra)


def breakdown_from_ops(dep: Deployment, rows: list[OpTime], total: Any) -> KernelBreakdown:
    """The :class:`KernelBreakdown` of ``rows`` summing to ``total``: each op's time counted as
    FLOP-bound or HBM-bound by its roofline at the table's peaks (the deployment's where it has
    no table), the all-reduces apart."""
    flop_time: Any = 0.0
    hbm_time: Any = 0.0
    comm_time: Any = 0.0
    for row in rows:
        timed = row.timed
        if timed.op.kind == "allreduce":
            comm_time = comm_time + row.seconds
            continue
        peak = timed.peak or float(np.max(np.asarray(dep.peak_compute)))
        hbm = timed.hbm or dep.accelerator.hbm_bandwidth
        bound = np.asarray(row.flops, dtype=np.float64) / peak >= np.asarray(
            row.bytes, dtype=np.float64) / hbm
        flop_time = flop_time + np.where(bound, row.seconds, 0.0)
        hbm_time = hbm_time + np.where(bound, 0.0, row.seconds)

    def out(value: Any) -> Any:
        return scalar_or_array(np.asarray(value, dtype=np.float64))

    return KernelBreakdown(flops=0.0, flop_time=out(flop_time), hbm_bytes=0.0, weight_bytes=0.0,
                           hbm_time=out(hbm_time), comm_time=out(comm_time), ops=tuple(rows),
                           kernel_total=out(total))

"""Per-GPU power: idle plus the busy share of the dynamic range.

``P = P_idle + (TDP - P_idle) x activity``, the linear utilization model of server power (Fan,
Weber and Barroso, "Power provisioning for a warehouse-sized computer", ISCA 2007:
``P(u) = P_idle + (P_busy - P_idle) u``), with the GPU's spec TDP as ``P_busy`` and its measured
idle draw (``idle_power`` in the accelerator spec, an nvidia-smi reading) as ``P_idle``.

``activity`` of an iteration is the share of its time the GPU's limiting unit is busy at the rate
the cost model gives it: ``max(FLOP time, HBM time) / iteration time``. All-reduce latency,
waiting for a synchronous load and idle time between iterations count as not busy, so an
iteration that runs at the cost model's achievable rate throughout draws the TDP and a GPU that
waits on the host link draws its idle power. Energy per iteration is ``P_idle x time +
(TDP - P_idle) x busy``; over a run, ``P_idle x wall time + (TDP - P_idle) x total busy time``.

Power cap (``cap`` watts, between idle and TDP): an iteration whose power would exceed the cap
runs slower, as a clock-capped GPU does, until it draws exactly the cap: its time becomes
``busy x (TDP - P_idle) / (cap - P_idle)`` (the same busy work, spread thinner; energy is kept,
which ignores the efficiency a lower clock gains).
"""

from __future__ import annotations

import math

from kvroof.errors import KvroofError

__all__ = ["PowerModel"]


class PowerModel:
    """Power of one GPU from its idle draw, TDP and an optional cap (watts)."""

    __slots__ = ("cap", "dynamic", "idle", "slowdown", "tdp")

    def __init__(self, idle: float, tdp: float, cap: float | None = None) -> None:
        if cap is not None and not cap > idle:
            raise KvroofError(f"power_cap: {cap:g} W is not above the GPU's idle power "
                              f"{idle:g} W")
        self.idle = idle
        self.tdp = tdp
        self.dynamic = tdp - idle
        self.cap = cap if cap is not None and cap < tdp else None
        self.slowdown = math.inf if self.cap is None else self.dynamic / (self.cap - idle)
        """Seconds of capped iteration per second of busy time (inf: no cap binds)."""

    def capped_time(self, time: float, busy: float) -> float:
        """An iteration's time under the cap (``time`` uncapped, ``busy`` of it busy)."""
        if self.cap is None:
            return time
        slow = busy * self.slowdown
        return slow if slow > time else time

    def power(self, time: float, busy: float) -> float:
        """Watts of an iteration of ``time`` seconds, ``busy`` of them busy."""
        return self.idle + self.dynamic * (busy / time if time > 0 else 0.0)

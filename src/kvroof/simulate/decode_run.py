"""A planned run of identical decode iterations: the value a replica fast-forwards through.

Between events a replica that only decodes repeats the same batch with every context one token
longer; :class:`DecodeRun` holds such a run before it is applied (its start, its length, the
affine lines of its step times, its FLOPs), so that an arrival can cut it short
(:mod:`kvroof.simulate.fast_forward` plans and applies it; :mod:`kvroof.simulate.affine` sums
its lines).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvroof.simulate.affine import Line, envelope_sum

__all__ = ["DecodeRun"]


@dataclass
class DecodeRun:
    """A planned run of identical decode iterations (not yet applied)."""

    start: float
    steps: int
    decodes: int
    time_lines: list[Line]
    busy_lines: list[Line]
    flops0: float
    flops_slope: float
    limit: int = 0
    last: float = 0.0
    """When its last step starts: the replica's next event while the run is pending (the run is
    applied whole then, as stepping would apply that last step, and its finishes with it)."""

    def duration(self, steps: int) -> float:
        return envelope_sum(self.time_lines, steps)

    def busiest(self, steps: int) -> tuple[float, float]:
        """(time, busy seconds) of the busiest of the first ``steps`` steps: the first or the
        last, as the busy time (the larger of two affine lines) is convex in the step. A step's
        time grows with its busy time alone (its all-reduce is fixed, a power cap scales it),
        so this is also the step that draws the most power."""
        (a_flop, b_flop), (a_hbm, b_hbm) = self.busy_lines
        s = steps - 1
        flop, hbm = a_flop + b_flop * s, a_hbm + b_hbm * s
        if max(flop, hbm) < max(a_flop, a_hbm):
            s = 0
        time = 0.0
        for a, b in self.time_lines:
            value = a + b * s
            if value > time:
                time = value
        busy = a_flop + b_flop * s
        value = a_hbm + b_hbm * s
        return time, (value if value > busy else busy)


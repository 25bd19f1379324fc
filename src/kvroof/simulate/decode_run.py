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

    def duration(self, steps: int) -> float:
        return envelope_sum(self.time_lines, steps)

    @property
    def end(self) -> float:
        return self.start + self.duration(self.steps)


"""A planned run of identical decode iterations: the value a replica fast-forwards through.

Between events a replica that only decodes repeats the same batch with every context one token
longer; :class:`DecodeRun` holds such a run before it is applied (its start, its length, its
step times, its FLOPs), so that an arrival can cut it short (:mod:`kvroof.simulate.fast_forward`
plans and applies it). Its step times come in one of two forms:

- **affine lines** (the roofline): each step's time is the upper envelope of a few lines in the
  step number, summed in closed form (:mod:`kvroof.simulate.affine`);
- **arrays** (kernel mode, :mod:`kvroof.simulate.kernel_steps`): the time, busy seconds and
  FLOPs of every step, computed at once over the run's steps, and their running sums (a step's
  time is not affine there: the ops' measured efficiencies are not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kvroof.simulate.affine import Line, envelope_sum, steps_before

__all__ = ["DecodeRun", "StepArrays"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class StepArrays:
    """A run's steps one by one: ``time`` and ``busy`` seconds of each step, and the running
    sums of time, busy seconds and FLOPs (``steps + 1`` entries from 0)."""

    time: FloatArray
    busy: FloatArray
    time_sum: FloatArray
    busy_sum: FloatArray
    flops_sum: FloatArray

    @classmethod
    def of(cls, time: FloatArray, busy: FloatArray, flops: FloatArray) -> StepArrays:
        """From each step's time, busy seconds and FLOPs."""
        def running(values: FloatArray) -> FloatArray:
            out = np.empty(values.size + 1)
            out[0] = 0.0
            np.cumsum(values, out=out[1:])
            return out

        return cls(time, busy, running(time), running(busy), running(flops))


@dataclass
class DecodeRun:
    """A planned run of identical decode iterations (not yet applied): affine ``time_lines``
    and ``busy_lines`` with ``flops0 + flops_slope x s`` FLOPs at step ``s``, or ``arrays``."""

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
    arrays: StepArrays | None = None

    def duration(self, steps: int) -> float:
        """Seconds of its first ``steps`` steps."""
        if self.arrays is not None:
            return float(self.arrays.time_sum[max(steps, 0)])
        return envelope_sum(self.time_lines, steps)

    def busy(self, steps: int) -> float:
        """Busy seconds of its first ``steps`` steps."""
        if self.arrays is not None:
            return float(self.arrays.busy_sum[steps])
        return envelope_sum(self.busy_lines, steps)

    def flops(self, steps: int) -> float:
        """FLOPs of its first ``steps`` steps."""
        if self.arrays is not None:
            return float(self.arrays.flops_sum[steps])
        return self.flops0 * steps + self.flops_slope * steps * (steps - 1) / 2.0

    def steps_before(self, horizon: float, limit: int | None = None) -> int:
        """How many of its first ``limit`` (default: all) steps start before ``horizon``
        seconds after it starts: the smallest ``n`` with ``duration(n) >= horizon``, capped
        at ``limit``."""
        limit = self.steps if limit is None else limit
        if self.arrays is None:
            return steps_before(self.time_lines, horizon, limit)
        if horizon <= 0:
            return 0
        found = int(np.searchsorted(self.arrays.time_sum[:limit], horizon, side="left"))
        return found if found < limit else limit

    def busiest(self, steps: int) -> tuple[float, float]:
        """(time, busy seconds) of the step that draws the most power among the first
        ``steps`` (the largest busy share of its time)."""
        if self.arrays is not None:
            time = self.arrays.time[:steps]
            busy = self.arrays.busy[:steps]
            with np.errstate(divide="ignore", invalid="ignore"):
                i = int(np.argmax(np.where(time > 0, busy / time, 0.0)))
            return float(time[i]), float(busy[i])
        # the first or the last, as the busy time (the larger of two affine lines) is convex in
        # the step. A step's time grows with its busy time alone (its all-reduce and any fixed
        # step cost are the same every step, a power cap scales it), so this is also the step
        # that draws the most power.
        (a_flop, b_flop), (a_hbm, b_hbm) = self.busy_lines
        s = steps - 1
        flop, hbm = a_flop + b_flop * s, a_hbm + b_hbm * s
        if max(flop, hbm) < max(a_flop, a_hbm):
            s = 0
        time_s = 0.0
        for a, b in self.time_lines:
            value = a + b * s
            if value > time_s:
                time_s = value
        busy_s = a_flop + b_flop * s
        value = a_hbm + b_hbm * s
        return time_s, (value if value > busy_s else busy_s)

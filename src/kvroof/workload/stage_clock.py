"""The clock of a staged run (:mod:`kvroof.workload.stages`): when each stage starts.

Drained, stage ``k + 1`` starts when the last request of stage ``k`` has finished, plus the
plan's interval (inference-perf's ``run_stage`` then ``sleep(interval)``), and its requests
arrive at that start plus their offsets. The finish times come from the simulation, so the
clock is driven by it as a closed loop of users is (:func:`kvroof.simulate.runner.simulate`
calls :meth:`StageClock.finished` from the same callback): it releases each stage's arrivals
when the stage before has drained. A stage none of whose requests is served (every one skipped
as bad) drains at its start.

Undrained, every stage starts at its nominal start (:meth:`StagePlan.nominal_starts`) and all
arrivals are known at once.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kvroof.errors import KvroofError
from kvroof.workload.stages import StagePlan

__all__ = ["StageClock"]


class StageClock:
    """Releases a staged run's arrivals: ``plan`` and a mask ``served`` of the requests the
    simulation serves (the others are skipped and never finish)."""

    def __init__(self, plan: StagePlan, served: NDArray[np.bool_]) -> None:
        if len(served) != len(plan.stage):
            raise KvroofError(f"stages: {len(plan.stage):,} staged requests but {len(served):,} "
                              "in the trace (stages.staged_trace cuts a trace to its plan)")
        self.plan = plan
        self.served = np.flatnonzero(served)
        stage_of = plan.stage[self.served]
        self._members = [self.served[stage_of == k] for k in range(len(plan))]
        self._left = [int(m.size) for m in self._members]
        self.starts: list[float] = []
        """Each started stage's start (s)."""
        self.ends: list[float] = []
        """Each drained stage's end: its last request's finish (its start if it had none)."""

    def start(self) -> list[tuple[float, int]]:
        """The first arrivals as (time, request): every request when stages do not drain, else
        the first stage's."""
        if not self.plan.drain:
            times = self.plan.concatenated()
            self.starts = self.plan.nominal_starts().tolist()
            return [(float(times[i]), int(i)) for i in self.served]
        return self._release(0.0)

    def finished(self, request: int, time: float) -> list[tuple[float, int]]:
        """Arrivals released by request ``request`` finishing at ``time`` (s): the next stage's
        when it was the last of its stage and stages drain, else none."""
        if not self.plan.drain:
            return []
        stage = int(self.plan.stage[request])
        self._left[stage] -= 1
        if self._left[stage]:
            return []
        self.ends.append(time)
        if stage + 1 == len(self.plan):
            return []
        return self._release(time + self.plan.interval)

    def _release(self, start: float) -> list[tuple[float, int]]:
        """Start the next stage at ``start``; a stage with nothing served drains at once."""
        while True:
            stage = len(self.starts)
            self.starts.append(start)
            members = self._members[stage]
            if members.size:
                times = start + self.plan.offset[members]
                return [(float(t), int(i)) for t, i in zip(times, members, strict=True)]
            self.ends.append(start)
            if stage + 1 == len(self.plan):
                return []
            start += self.plan.interval

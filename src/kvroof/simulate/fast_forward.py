"""Fast-forwarding: a run of identical decode iterations summed in closed form.

Between events, an iteration that only decodes repeats with every context one token longer;
such runs are planned as a :class:`kvroof.simulate.decode_run.DecodeRun` (step times as affine
lines, :mod:`kvroof.simulate.affine`) up to the next finish, the next time HBM runs out, the next
load completion or held request's release, and applied whole or, when a routed arrival cuts
them, up to the first iteration boundary after it. Where a capped decode rule (a sliding
window below its span, a chunk) makes a step's cost non-affine, the replica steps instead.
"""

from __future__ import annotations

import heapq
import math

from kvroof.errors import KvroofError
from kvroof.simulate.affine import Line, envelope_sum, steps_before
from kvroof.simulate.decode_run import DecodeRun
from kvroof.simulate.iteration import ReplicaIterations
from kvroof.simulate.request import DECODE, LOADING

__all__ = ["ReplicaFastForward"]


class ReplicaFastForward(ReplicaIterations):
    """A replica that plans and applies runs of identical decode iterations."""

    def _plan_run(self, decodes: int) -> bool:
        """Plan a run of identical decode iterations from now (the first one's KV is already
        allocated); False when it would be a single iteration."""
        finishes = self.finishes
        while finishes and (finishes[0][2].state != DECODE
                            or finishes[0][2].finish_step != finishes[0][0]):
            heapq.heappop(finishes)
        limit = finishes[0][0] - self.step_no if finishes else 1
        limit = min(limit, 1 + self.pool.available // decodes)
        if limit <= 1:
            return False
        if self.caps:  # closed form only where every capped rule is saturated
            if any(rule != "window" for rule, _ in self.caps):
                return False  # a chunk's keys fall back to 1 at every chunk boundary
            if min(self._contexts(self.step_no)) + 1 < max(span for _, span in self.caps):
                return False
        horizon = math.inf
        while self.loads and self.loads[0][2].state != LOADING:
            heapq.heappop(self.loads)
        if self.loads:
            horizon = self.loads[0][0]
        if self.held_until > self.now:
            horizon = min(horizon, self.held_until)
        f0, k0 = self._decode_cost(decodes, self.step_no)
        f1, k1 = self._decode_cost(decodes, self.step_no + 1)
        m = self.m
        a_flop, a_hbm, comm = m.breakdown(decodes, f0, k0)
        b_flop, b_hbm, _ = m.breakdown(decodes, f1, k1)
        busy_lines: list[Line] = [(a_flop, b_flop - a_flop), (a_hbm, b_hbm - a_hbm)]
        time_lines: list[Line] = [(a + comm, b) for a, b in busy_lines]
        if self.power.cap is not None:
            k = self.power.slowdown
            time_lines += [(a * k, b * k) for a, b in busy_lines]
        steps = steps_before(time_lines, horizon - self.now, limit)
        if steps <= 1:
            return False
        self.pending = DecodeRun(self.now, steps, decodes, time_lines, busy_lines, f0, f1 - f0)
        self.next_time = self.pending.end
        self._chunks = []
        return True

    def _apply_run(self, run: DecodeRun, steps: int) -> None:
        """The first ``steps`` iterations of a planned run."""
        decodes = run.decodes
        if steps > 1 and not self.pool.allocate(decodes * (steps - 1)):
            raise KvroofError(f"replica {self.index}: fast-forward ran out of KV space "
                              "(internal error)")
        duration = run.duration(steps)
        busy = envelope_sum(run.busy_lines, steps)
        flops = run.flops0 * steps + run.flops_slope * steps * (steps - 1) / 2.0
        self.dynamic_joules += self.power.dynamic * busy * self.res.gpus
        self.log.add(self.index, run.start, duration, steps, 0, decodes, 0, 0.0, busy, flops,
                     self.power.power(duration, busy))
        if self.check:
            self._check(decodes)
        self.limits[run.limit] += steps
        self.step_no += steps
        self.now = run.start + duration
        self._finish_decodes(self.now)

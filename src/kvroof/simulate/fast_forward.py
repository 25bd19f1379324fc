"""Fast-forwarding: a run of identical decode iterations summed in closed form, exactly.

Between events, an iteration that only decodes repeats with every context one token longer;
such runs are planned as a :class:`kvroof.simulate.decode_run.DecodeRun`: by the roofline, step
times as affine lines (:mod:`kvroof.simulate.affine`; where a capped decode rule, a sliding
window below its span or a chunk, makes a step's cost non-affine, the replica steps instead);
in kernel mode, every step's time computed at once as arrays over the run's steps
(:meth:`kvroof.simulate.kernel_steps.KernelSteps.run`: each step's contexts, its time, their
running sum), whatever the rules. An engine's step cost (``iteration_overhead``) is in every
step either way.

A run makes the decisions stepping would make, iteration by iteration (docs/simulate.md,
"Speed"); what it must respect:

- **What others read.** A stepped iteration takes effect when it starts (its finishes, its
  KV); so a pending run's next event is the start of its last step, where it is applied whole
  (its finishes with it), and a router that looks up cached prefixes first applies the steps
  that have started (:meth:`ReplicaFastForward.settle`) when their KV evicted cached blocks. A
  request routed to the replica cuts the run after the steps that started before it.
- **What the skipped steps' admissions would see.** Each stepped iteration offers the waiting
  requests a place again; a run repeats the outcome of its first. So it ends before the next
  finish, the next time HBM runs out, a load landing, a held request's release, a write-back
  landing while requests wait with sequence slots free, and the first step whose KV would
  evict a cached block a waiting request found (:meth:`ReplicaFastForward._steps_keeping`); and
  the engine plans none after an iteration that evicted from host DRAM, one that preempted (it
  offered nothing; the next step offers again), or a utilization-aware one that started a load
  (the link backlog and aging credits it changed can change the next offer).
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from kvroof.errors import KvroofError
from kvroof.simulate.affine import Line
from kvroof.simulate.decode_run import DecodeRun, StepArrays
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
        limit = min(limit, 1 + self.pool.available // (decodes * self.pool.full_units))
        if self._tried and limit > 1:
            limit = self._steps_keeping(decodes, limit)
        if limit <= 1:
            return False
        kernel = self.kernel_steps
        if self.caps and kernel is None:  # closed form only where every capped rule is
            # saturated (kernel mode sums the steps one by one: any rule)
            if any(rule != "window" for rule, _ in self.caps):
                return False  # a chunk's keys fall back to 1 at every chunk boundary
            if min(self._contexts(self.step_no)) + 1 < max(span for _, span in self.caps):
                return False
        horizon = math.inf
        loads = self.loads
        while loads and (loads[0][2].state != LOADING or loads[0][2].load_done != loads[0][0]):
            heapq.heappop(loads)  # landed, or an earlier load of a request loading again
        if loads:
            horizon = loads[0][0]
        if self.held_until > self.now:
            horizon = min(horizon, self.held_until)
        if self.saves and self.waiting and len(self.running) < self.res.max_seqs:
            # a write-back landing in host DRAM can change what a waiting request finds there
            horizon = min(horizon, self.saves[0][0])
        if kernel is not None:
            run = self._kernel_run(decodes, limit)
        else:
            run = self._affine_run(decodes, limit)
        steps = run.steps_before(horizon - self.now, limit)
        if steps <= 1:
            return False
        run.steps = steps
        run.last = self.now + run.duration(steps - 1)
        self.pending = run
        self.next_time = run.last
        self._chunks = []
        return True

    def _affine_run(self, decodes: int, limit: int) -> DecodeRun:
        """A run of at most ``limit`` steps timed by the roofline: affine lines in the step."""
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
        overhead = self.step_overhead
        if overhead:
            time_lines = [(a + overhead, b) for a, b in time_lines]
        return DecodeRun(self.now, limit, decodes, time_lines, busy_lines, f0, f1 - f0)

    def _kernel_run(self, decodes: int, limit: int) -> DecodeRun:
        """A run of at most ``limit`` steps in kernel mode: every step's time at once, as
        arrays over the steps (:meth:`kvroof.simulate.kernel_steps.KernelSteps.run`)."""
        kernel = self.kernel_steps
        assert kernel is not None
        step = self.step_no
        contexts = np.asarray(self._contexts(step), dtype=np.float64)
        busy, comm = kernel.run(decodes, float(self.decode_base + decodes * step),
                                lambda: contexts, limit)
        time = busy + comm
        if self.power.cap is not None:
            np.maximum(time, busy * self.power.slowdown, out=time)
        if self.step_overhead:
            time += self.step_overhead
        flops = self.m.decode_flops(decodes, contexts, limit)
        arrays = StepArrays.of(time, busy, flops)
        return DecodeRun(self.now, limit, decodes, [], [], float(flops[0]), 0.0, arrays=arrays)

    def _steps_keeping(self, decodes: int, limit: int) -> int:
        """Steps (at most ``limit``) whose KV evicts none of the cached blocks that a waiting
        request found in this step's admissions: losing one changes what its next try finds
        (a shorter hit, another chunk, a hold), so the run must end before."""
        pool = self.pool
        free = pool.capacity - pool.used
        per_step = decodes * pool.full_units  # a hybrid pool's windows do not grow in decode
        need = (limit - 1) * per_step - free  # what the whole run would evict
        if need <= 0:
            return limit
        found: set[int] = set()
        for request, blocks in self._tried:
            found.update(request.block_ids[:blocks])
            if self.groups is not None:  # and their window blocks
                found.update(~block for block in request.block_ids[:blocks])
        room = free  # KV the run may take before it evicts a found block
        for block, size in pool.lru.items():  # oldest first: evicted in this order
            if block in found:
                break
            room += size
            if room - free >= need:
                return limit
        return min(limit, 1 + room // per_step)

    def _apply_run(self, run: DecodeRun, steps: int) -> None:
        """The first ``steps`` iterations of a planned run."""
        decodes = run.decodes
        if steps > 1 and not self.pool.allocate(decodes * (steps - 1) * self.pool.full_units):
            raise KvroofError(f"replica {self.index}: fast-forward ran out of KV space "
                              "(internal error)")
        duration = run.duration(steps)
        busy = run.busy(steps)
        flops = run.flops(steps)
        self.dynamic_joules += self.power.dynamic * busy * self.res.gpus
        self.log.add(self.index, run.start, duration, steps, 0, decodes, 0, 0.0, busy, flops,
                     self.power.power(duration, busy))
        peak = self.power.power(*run.busiest(steps))
        if peak > self.peak_power:
            self.peak_power = peak
        if self.check:
            self._check(decodes)
        self.limits[run.limit] += steps
        self.step_no += steps
        self.now = run.start + duration
        self._finish_decodes(self.now)

    def _cut(self, time: float) -> None:
        """Apply the steps of the pending run that start before ``time`` (at least its first,
        which started when it was planned); the replica's next iteration starts where they
        end."""
        run = self.pending
        assert run is not None
        self.pending = None
        steps = run.steps_before(time - run.start)
        self._apply_run(run, steps if steps > 1 else 1)
        self.next_time = self.now

    def settle(self, time: float) -> bool:
        """Bring the prefix cache in HBM to what stepping would show at ``time``: the steps of
        a pending run that start before ``time`` evict cached blocks when their KV needs the
        room, so apply them (True: the replica's next event moved). Its queues and counts need
        nothing: a run's finishes come with its last step, which is applied when it starts."""
        run = self.pending
        if run is None or time <= run.start:
            return False
        fits = 1 + (self.pool.capacity - self.pool.used) // (run.decodes * self.pool.full_units)
        # (steps evicting nothing)
        if fits >= run.steps or run.duration(fits) >= time - run.start:
            return False  # its first evicting step has not started: the cache is as it was
        self._cut(time)
        return True

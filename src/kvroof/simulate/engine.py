"""One replica: vLLM-v1-style iterations timed by the cost model.

Each iteration (at :attr:`Engine.now`):

1. Running requests first: every decoding request gets one token, every request with prompt
   left gets its next chunk (admission order) while the token budget lasts; their new KV must
   fit in HBM, else the newest running request is preempted (its KV freed, its prompt and
   output so far recomputed later; vLLM's recompute preemption) until it does. The last one
   running is not preempted while loaded requests waiting behind it hold KV: the newest of
   them gives it back first (it loads again later; else that request could never finish).
   Each chunk's full prompt blocks join the HBM prefix cache as it is scheduled
   (:mod:`kvroof.simulate.prefix_blocks`), so a preempted request keeps them, evictable, and
   resumes from them as an HBM hit.
2. Unless step 1 preempted (vLLM v1 admits no waiting request then: ``if not preempted_reqs:`` in
   vllm/v1/core/sched/scheduler.py, github.com/vllm-project/vllm at commit
   b4622cf924bc72504aed99e486062d6633fde39e), waiting requests by the scheduler's policy
   (:mod:`kvroof.simulate.scheduler`), up to ``max_num_seqs`` running and the token budget. A
   request's cached prefix is looked up in HBM, then host DRAM, then the further tier
   (:meth:`Engine.lookup`, :mod:`kvroof.simulate.admission`); at most ``prompt - 1`` tokens are
   taken from caches, as vLLM computes at least the last one. Loaded tokens take HBM but no token
   budget; their full blocks join the HBM prefix cache when they land (with the step that waits for
   them, or, for an ``async`` load, at the first step boundary after it), and a request that needs
   blocks another request's load is bringing waits for that load instead of loading them again.
3. The iteration's time: the cost model's compute time of its prefill chunks and decodes
   (:class:`kvroof.cost.iteration.IterationModel`), stretched by a power cap, and combined with
   the loads it waits for: ``sync`` adds them (the whole batch stalls), ``layerwise`` overlaps
   them layer by layer (:func:`kvroof.cost.timing.combine_overlap`), ``async`` loads never enter
   an iteration (the request joins once its KV is in HBM); see :mod:`kvroof.simulate.iteration`.
4. Its effects: prompts that finish prefilling emit their first token; the prompt blocks the
   iteration completed are stored to host DRAM on the link's device-to-host direction (after the
   iteration, not blocking it; :mod:`kvroof.simulate.offload_store`); decodes that reach their
   output length finish.

Between events, an iteration that only decodes repeats with every context one token longer;
such runs are fast-forwarded in closed form (:mod:`kvroof.simulate.fast_forward`,
:mod:`kvroof.simulate.affine`) up to the next finish, the next time HBM runs out, the next load
completion, or a routed arrival (which cuts a run at the first iteration boundary after it),
with the same outcome as stepping them (the conditions are in that module).

This module holds the step itself (steps 1 and 2, arrivals, preemption). :class:`Engine`
inherits the replica's state (:mod:`kvroof.simulate.replica_state`) and the parts named above;
each lives in its own module and depends only on the state and the parts below it.
"""

from __future__ import annotations

import heapq
import math

from kvroof.errors import KvroofError
from kvroof.simulate.admission import ReplicaAdmission
from kvroof.simulate.fast_forward import ReplicaFastForward
from kvroof.simulate.kv_groups import chunk_window, close_window, slide_window
from kvroof.simulate.prefix_blocks import cache_upto
from kvroof.simulate.replica_state import Finish
from kvroof.simulate.request import LOADING, PREFILL, READY, WAITING, Request
from kvroof.simulate.scheduler import LIMITS, admit

__all__ = ["Engine", "Finish"]


class Engine(ReplicaFastForward, ReplicaAdmission):
    """One replica's queues, KV space, caches and link, stepped iteration by iteration.

    Built as ``Engine(index, resources, settings, log, on_finish, check=False)``
    (:class:`kvroof.simulate.replica_state.ReplicaState`)."""

    # -- arrivals ---------------------------------------------------------------------------------
    def accept(self, request: Request, time: float) -> None:
        """A request routed here at ``time`` (an iteration boundary at or after it sees it)."""
        if self.pending is not None:
            self._cut(time)
        if self.now < time:
            self.now = time
        request.replica = self.index
        self.waiting.append(request)
        self.outstanding += 1
        self.next_time = self.now

    # -- the step ---------------------------------------------------------------------------------
    def advance(self) -> None:
        """Apply a pending run, or schedule and run the iteration at :attr:`now` (or plan a run
        of decode iterations); sets :attr:`next_time`."""
        if self.pending is not None:
            run = self.pending
            self.pending = None
            self._apply_run(run, run.steps)
            self.next_time = self.now
            return
        if not self.running and not self.waiting:
            self.next_time = math.inf
            return
        self._apply_saves(self.now)
        if self.loads:
            self._land_loads()
        decodes, budget, preempted = self._schedule_running()
        self._load_end = self.now
        if self._tried:
            self._tried.clear()
        seq = self.seq
        evicted = self.host.evicted
        if preempted:  # vLLM v1 admits no waiting request in a step that preempted
            limit = LIMITS.index("kv")
        else:
            _, limit = admit(self, budget, self.skip, self.settings.aging_limit)
        chunks = self._chunks
        if not chunks and decodes == 0:
            self._idle()
            return
        # a run repeats this step's admissions unchanged: not after a utilization-aware step
        # started a load (the link's backlog and the aging credits it changed can change the
        # next step's), nor after one that evicted from host DRAM
        if (not chunks and not preempted and self._load_end == self.now
                and self.settings.fast_forward
                and (self.seq == seq or not self.skip) and self.host.evicted == evicted
                and self._plan_run(decodes)):
            assert self.pending is not None
            self.pending.limit = limit
            return
        self.limits[limit] += 1
        self._run_iteration(decodes, sum(chunk[1] for chunk in chunks))

    def _idle(self) -> None:
        """Nothing could be scheduled: sleep until a load lands or held requests may go."""
        wake = math.inf
        loads = self.loads
        while loads and (loads[0][2].state != LOADING or loads[0][2].load_done != loads[0][0]
                         or loads[0][0] <= self.now):
            done, _, landed = heapq.heappop(loads)
            if landed.state == LOADING and landed.load_done == done:
                self._land(landed)  # landed, but the queue never reached it
        if self.loads:
            wake = self.loads[0][0]
        if self.held_until > self.now:
            wake = min(wake, self.held_until)
        if math.isinf(wake):
            if self.waiting and self._unstick():
                self.next_time = self.now
                return
            if self.waiting:
                raise KvroofError(f"replica {self.index}: {len(self.waiting)} request(s) can "
                                  "never be scheduled (internal error)")
            self.next_time = math.inf
            return
        self.now = max(self.now, wake)
        self.next_time = self.now

    def _unstick(self) -> bool:
        """Nothing runs and the queue's head cannot fit because loaded requests behind it hold
        the KV space (FIFO stops at the head, so they never run): give back the newest loaded
        request's space (it loads again later). vLLM would wait here forever."""
        for request in reversed(self.waiting):
            if request.state in (READY, LOADING) and request.private > 0:
                if request.loading:
                    self._forget_load(request)
                self.pool.release(request.private)
                self.pool.unpin(request.pinned)
                request.private = 0
                request.window = 0
                request.pinned = []
                request.cached = 0
                request.state = WAITING
                request.preemptions += 1
                self.preemptions += 1
                return True
        return False

    def _schedule_running(self) -> tuple[int, int, bool]:
        """Decode tokens and running prefill chunks, preempting until their KV fits; returns
        the decodes, the budget left and whether anything was preempted. Each chunk's full
        blocks join the HBM prefix cache as it is scheduled
        (:mod:`kvroof.simulate.prefix_blocks`)."""
        pool = self.pool
        preempted = False
        while True:
            decodes = self.decodes
            left = self.res.budget - decodes
            chunks: list[tuple[Request, int, int, bool]] = []
            units = pool.full_units
            groups = self.groups
            need = decodes * units
            windows: list[int] = []
            for request in self.prefilling:
                if left <= 0:
                    break
                rest = request.prompt - request.prefilled
                n = rest if rest < left else left
                chunks.append((request, n, request.prefilled, n == rest))
                left -= n
                need += n * units
                if groups is not None:  # what fell behind the window is freed first
                    slide_window(pool, request, groups, request.prefilled)
                    window = chunk_window(request, groups, n, n == rest)
                    windows.append(window)
                    need += window * groups.window_units
            if pool.allocate(need):
                caching = pool.caching
                for i, (request, n, done, _) in enumerate(chunks):
                    request.private += n * units
                    if groups is not None:
                        request.window += windows[i]
                        request.private += windows[i] * groups.window_units
                    if caching:
                        cache_upto(pool, request, done + n)
                self._chunks = chunks
                return decodes, left, preempted
            if not self.running:
                raise KvroofError(f"replica {self.index}: KV space exhausted with nothing to "
                                  "preempt (internal error)")
            preempted = True
            if len(self.running) == 1 and self._unstick():
                continue  # loaded requests would starve the last running one: they load again
            self._preempt(next(reversed(self.running.values())))

    def _preempt(self, request: Request) -> None:
        del self.running[request.index]
        if request.state == PREFILL:
            self.prefilling.remove(request)
        else:
            self.decodes -= 1
            self.decode_base -= request.decode_base
            request.private += (self.step_no - request.join_step) * self.pool.full_units
        if request.window:
            assert self.groups is not None
            close_window(self.pool, request, self.groups)
        self.pool.release(request.private)
        self.pool.unpin(request.pinned)
        request.private = 0
        request.pinned = []
        request.cached = 0  # its cached blocks stay in the cache, evictable: it resumes from them
        request.prompt = request.input + request.generated
        request.state = WAITING
        request.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(request)

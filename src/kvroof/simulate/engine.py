"""One replica: vLLM-v1-style iterations timed by the cost model.

Each iteration (at :attr:`Engine.now`):

1. Running requests first: every decoding request gets one token, every request with prompt
   left gets its next chunk (admission order) while the token budget lasts; their new KV must
   fit in HBM, else the newest running request is preempted (its KV freed, its prompt and
   output so far recomputed later; vLLM's recompute preemption) until it does.
2. Waiting requests by the scheduler's policy (:mod:`kvroof.simulate.scheduler`), up to
   ``max_num_seqs`` running and the token budget. A request's cached prefix is looked up in HBM,
   then host DRAM, then the further tier (:meth:`Engine.lookup`); at most ``prompt - 1`` tokens
   are taken from caches, as vLLM computes at least the last one. Loaded tokens take HBM but no
   token budget.
3. The iteration's time: the cost model's compute time of its prefill chunks and decodes
   (:class:`kvroof.cost.iteration.IterationModel`), stretched by a power cap, and combined with
   the loads it waits for: ``sync`` adds them (the whole batch stalls), ``layerwise`` overlaps
   them layer by layer (:func:`kvroof.cost.timing.combine_overlap`), ``async`` loads never enter
   an iteration (the request joins once its KV is in HBM).
4. Its effects: prompts that finish prefilling emit their first token, their blocks join the HBM
   prefix cache, and their new KV is written back to host DRAM on the link's device-to-host
   direction (after the iteration, not blocking it); decodes that reach their output length
   finish.

Between events, an iteration that only decodes repeats with every context one token longer;
such runs are fast-forwarded in closed form (:mod:`kvroof.simulate.affine`) up to the next
finish, the next time HBM runs out, the next load completion, or a routed arrival (which cuts
a run at the first iteration boundary after it).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.split import balanced_split
from kvroof.cost.timing import combine_overlap
from kvroof.errors import KvroofError
from kvroof.simulate.affine import Line, envelope_sum, steps_before
from kvroof.simulate.link import Link
from kvroof.simulate.memory import HbmPool
from kvroof.simulate.metrics import IterationLog
from kvroof.simulate.power import PowerModel
from kvroof.simulate.request import (
    DECODE,
    DONE,
    LOADING,
    PREFILL,
    READY,
    WAITING,
    Request,
    block_sizes,
)
from kvroof.simulate.resources import ReplicaResources
from kvroof.simulate.scheduler import (
    ADMITTED,
    BLOCKED,
    HELD,
    LIMITS,
    LOADING_STARTED,
    NO_SEAT,
    admit,
)
from kvroof.simulate.settings import SimSettings
from kvroof.simulate.tiers import LruTier

__all__ = ["Engine"]

Finish = Callable[[Request, float], None]


@dataclass
class _Run:
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


class Engine:
    """One replica's queues, KV space, caches and link, stepped iteration by iteration."""

    def __init__(self, index: int, res: ReplicaResources, settings: SimSettings,
                 log: IterationLog, on_finish: Finish, check: bool = False) -> None:
        self.index = index
        self.res = res
        self.settings = settings
        self.log = log
        self.on_finish = on_finish
        self.check = check
        self.m = res.model
        self.pool = HbmPool(res.hbm_tokens, settings.prefix_caching)
        self.tier = LruTier(res.tier_tokens) if res.tier_model is not None else None
        self.host = LruTier(res.dram_tokens, self.tier)
        self.external = settings.cache_policy != "recompute"
        self.write_back = self.external and res.dep.write_back and res.dram_tokens > 0
        self.h2d = Link()
        self.d2h = Link()
        self.power = PowerModel(res.idle_power, res.tdp, settings.power_cap)
        self.skip = settings.scheduler == "utilization-aware"
        self.caps = self.m.caps  # decode rules not linear in the context (windows, chunks)
        self.now = 0.0
        self.next_time = math.inf
        self.pending: _Run | None = None
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}
        self.prefilling: list[Request] = []
        self.decodes = 0
        self.decode_base = 0  # sum of (context at join - join step) over decoding requests
        self.step_no = 0
        self.finishes: list[tuple[int, int, Request]] = []
        self.loads: list[tuple[float, int, Request]] = []
        self.saves: list[tuple[float, int, list[int], list[int]]] = []
        self.seq = 0
        self.outstanding = 0
        self.preemptions = 0
        self.dynamic_joules = 0.0
        self.held_until = -math.inf
        self.limits = [0] * len(LIMITS)  # iterations by what limited their batch
        # the iteration being scheduled
        self._chunks: list[tuple[Request, int, int, bool]] = []
        self._load_end = 0.0

    # -- arrivals ---------------------------------------------------------------------------------
    def accept(self, request: Request, time: float) -> None:
        """A request routed here at ``time`` (an iteration boundary at or after it sees it)."""
        if self.pending is not None and time < self.pending.end:
            run = self.pending
            self.pending = None
            steps = steps_before(run.time_lines, time - run.start, run.steps)
            if steps:
                self._apply_run(run, steps)
            else:  # nothing of the run has started: give back its first step's KV
                self.pool.release(run.decodes)
        if self.now < time:
            self.now = time
        request.replica = self.index
        self.waiting.append(request)
        self.outstanding += 1
        self.next_time = self.now if self.pending is None else self.pending.end

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
        decodes, budget = self._schedule_running()
        self._load_end = self.now
        _, limit = admit(self, budget, self.skip, self.settings.aging_limit)
        chunks = self._chunks
        if not chunks and decodes == 0:
            self._idle()
            return
        if (not chunks and self._load_end == self.now and self.settings.fast_forward
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
        while loads and (loads[0][2].state != LOADING or loads[0][0] <= self.now):
            _, _, landed = heapq.heappop(loads)
            if landed.state == LOADING:  # landed, but the queue never reached it
                landed.state = READY
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
                self.pool.release(request.private)
                self.pool.unpin(request.pinned)
                request.private = 0
                request.pinned = []
                request.state = WAITING
                request.preemptions += 1
                self.preemptions += 1
                return True
        return False

    def _schedule_running(self) -> tuple[int, int]:
        """Decode tokens and running prefill chunks, preempting until their KV fits; returns
        the decodes and the budget left."""
        pool = self.pool
        while True:
            decodes = self.decodes
            left = self.res.budget - decodes
            chunks: list[tuple[Request, int, int, bool]] = []
            need = decodes
            for request in self.prefilling:
                if left <= 0:
                    break
                rest = request.prompt - request.prefilled
                n = rest if rest < left else left
                chunks.append((request, n, request.prefilled, n == rest))
                left -= n
                need += n
            if pool.allocate(need):
                for request, n, _, _ in chunks:
                    request.private += n
                self._chunks = chunks
                return decodes, left
            if not self.running:
                raise KvroofError(f"replica {self.index}: KV space exhausted with nothing to "
                                  "preempt (internal error)")
            self._preempt(next(reversed(self.running.values())))

    def _preempt(self, request: Request) -> None:
        del self.running[request.index]
        if request.state == PREFILL:
            self.prefilling.remove(request)
        else:
            self.decodes -= 1
            self.decode_base -= request.decode_base
            request.private += self.step_no - request.join_step
        self.pool.release(request.private)
        self.pool.unpin(request.pinned)
        request.private = 0
        request.pinned = []
        request.prompt = request.input + request.generated
        request.state = WAITING
        request.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(request)

    # -- admission ------------------------------------------------------------------------------
    def lookup(self, request: Request) -> tuple[int, int, int, int]:
        """(HBM blocks, HBM tokens, host tokens, tier tokens) of the request's cached prefix,
        at most ``prompt - 1`` tokens in all."""
        ids = request.block_ids
        ends = request.block_ends
        hbm = self.pool.match(ids) if self.pool.caching else 0
        host = tier = 0
        if self.external:
            host = self.host.match_from(ids, hbm)
            if self.tier is not None:
                tier = self.tier.match_from(ids, hbm + host)
        hbm_tokens = ends[hbm - 1] if hbm else 0
        upto = hbm + host + tier
        total = ends[upto - 1] if upto else 0
        host_tokens = (ends[hbm + host - 1] if hbm + host else 0) - hbm_tokens
        tier_tokens = total - hbm_tokens - host_tokens
        cut = total - (request.prompt - 1)
        if cut > 0:  # compute at least the last token
            take = min(cut, tier_tokens)
            tier_tokens -= take
            cut -= take
            take = min(cut, host_tokens)
            host_tokens -= take
            cut -= take
            hbm_tokens -= cut
        return hbm, hbm_tokens, host_tokens, tier_tokens

    def load_seconds(self, host_tokens: int, tier_tokens: int) -> float:
        seconds = self.m.load_time(host_tokens) if host_tokens else 0.0
        if tier_tokens:
            assert self.res.tier_model is not None
            seconds += self.res.tier_model.load_time(tier_tokens)
        return seconds

    def alone_compute(self, new_tokens: int, context: int) -> float:
        """Compute seconds of a prefill of ``new_tokens`` on ``context`` cached tokens, alone."""
        flops, kv = self.m.prefill_chunk(new_tokens, context, True)
        return self.m.time(new_tokens, flops, kv)

    def _split(self, request: Request, hbm_tokens: int, host: int, tier: int) -> int:
        """Tokens of the host and tier hits to load under the ``split`` policy."""
        prompt = request.prompt

        def load(loaded: NDArray[np.int64]) -> list[float]:
            return [self.load_seconds(min(int(x), host), max(int(x) - host, 0)) for x in loaded]

        def compute(loaded: NDArray[np.int64]) -> list[float]:
            return [self.alone_compute(prompt - hbm_tokens - int(x), hbm_tokens + int(x))
                    for x in loaded]

        return int(balanced_split(load, compute, [host + tier])[0])

    def try_admit(self, request: Request, budget: int, hold: bool) -> tuple[int, int]:
        """Admit ``request`` into the iteration being scheduled, or start its async load:
        (status, budget tokens used); see :mod:`kvroof.simulate.scheduler`."""
        if len(self.running) >= self.res.max_seqs:
            return NO_SEAT, 0
        pool = self.pool
        if request.state == READY:
            rest = request.prompt - request.prefilled
            n = rest if rest < budget else budget
            if not pool.allocate(n):
                return BLOCKED, 0
            request.private += n
            self._start(request, n)
            return ADMITTED, n
        if request.preload and self.external:  # the trace says these are in host DRAM
            self.host.insert(request.block_ids[:request.preload], request.preload_sizes)
        blocks, hbm_tokens, host, tier = self.lookup(request)
        recompute = 0
        if host + tier and self.settings.cache_policy == "split":
            loaded = self._split(request, hbm_tokens, host, tier)
            recompute = host + tier - loaded
            if loaded < host:
                host, tier = loaded, 0
            else:
                tier = loaded - host
        external = host + tier
        seconds = self.load_seconds(host, tier) if external else 0.0
        if hold and external and self.now < self.h2d.free_at - self.settings.admission_backlog:
            new = request.prompt - hbm_tokens - external
            if seconds > self.alone_compute(new, hbm_tokens + external):
                self.held_until = self.h2d.free_at - self.settings.admission_backlog
                return HELD, 0
        asynchronous = external > 0 and self.settings.load_mode == "async"
        rest = request.prompt - hbm_tokens - external
        n = 0 if asynchronous else (rest if rest < budget else budget)
        state = self.res.state_tokens  # a linear layer's fixed state, once per request
        pinned = request.block_ids[:blocks]
        if pinned:
            pool.pin(pinned)
        if not pool.allocate(external + n + state):
            if pinned:
                pool.unpin(pinned)
            return BLOCKED, 0
        request.pinned = list(pinned)
        request.hbm_blocks = blocks
        request.hbm_hit = hbm_tokens
        request.host_hit = host
        request.tier_hit = tier
        request.split_recomputed = recompute
        request.computed = request.prompt - hbm_tokens - external - recompute
        request.loaded = external
        request.load_time = seconds
        request.private = external + n + state
        request.prefilled = hbm_tokens + external
        if external:
            self._touch(request, blocks, host, tier)
        if asynchronous:
            request.state = LOADING
            request.load_done = self.h2d.reserve(self.now, seconds)
            self.seq += 1
            heapq.heappush(self.loads, (request.load_done, self.seq, request))
            return LOADING_STARTED, 0
        if external:
            self._load_end = self.h2d.reserve(self._load_end, seconds)
        self._start(request, n)
        return ADMITTED, n

    def _touch(self, request: Request, blocks: int, host: int, tier: int) -> None:
        ids = request.block_ids
        ends = request.block_ends
        start = ends[blocks - 1] if blocks else 0
        count = 0
        while blocks + count < len(ids) and ends[blocks + count] <= start + host:
            count += 1
        if count:
            self.host.touch(ids[blocks:blocks + count])

    def _start(self, request: Request, n: int) -> None:
        request.state = PREFILL
        self.running[request.index] = request
        self.prefilling.append(request)
        self._chunks.append((request, n, request.prefilled, request.prefilled + n ==
                             request.prompt))

    # -- an iteration ---------------------------------------------------------------------------
    def _decode_cost(self, decodes: int, step: int) -> tuple[float, float]:
        context_sum = self.decode_base + decodes * step
        if not self.caps:
            return self.m.decode_batch(decodes, context_sum)
        return self.m.decode_batch(decodes, context_sum, self._capped_sums(step))

    def _contexts(self, step: int) -> list[int]:
        return [r.decode_base + step for r in self.running.values() if r.state == DECODE]

    def _capped_sums(self, step: int) -> tuple[float, ...]:
        """Keys the decodes score under each capped rule (window, chunk) at ``step``."""
        return self.m.capped_sums(self._contexts(step))

    def _run_iteration(self, decodes: int, prefill_tokens: int) -> None:
        m = self.m
        flops = kv = 0.0
        if decodes:
            flops, kv = self._decode_cost(decodes, self.step_no)
        for _, n, context, final in self._chunks:
            f, k = m.prefill_chunk(n, context, final)
            flops += f
            kv += k
        tokens = decodes + prefill_tokens
        flop_s, hbm_s, comm = m.breakdown(tokens, flops, kv)
        busy = flop_s if flop_s > hbm_s else hbm_s
        compute = self.power.capped_time(busy + comm, busy)
        loads = self._load_end - self.now
        mode = self.settings.load_mode
        if loads > 0 and mode != "async":
            time = float(combine_overlap(loads, compute, self.res.layers,
                                         "serial" if mode == "sync" else "layerwise",
                                         self.res.overlap_efficiency))
        else:
            time = compute
        start = self.now
        end = start + time
        power = self.power.power(time, busy)
        self.dynamic_joules += self.power.dynamic * busy * self.res.gpus
        self.log.add(self.index, start, time, 1, prefill_tokens, decodes, len(self._chunks),
                     loads if loads > 0 else 0.0, busy, flops, power)
        if self.check:
            self._check(tokens)
        self.now = end
        if decodes:
            self.step_no += 1
        chunks = self._chunks
        self._chunks = []
        for request, n, _, _ in chunks:
            request.prefilled += n
            if request.prefilled == request.prompt:
                self._prefill_done(request, end)
        self._finish_decodes(end)
        self.next_time = self.now

    def _check(self, tokens: int) -> None:
        pool = self.pool
        if tokens > self.res.budget or pool.used > pool.capacity or pool.evictable < 0 \
                or len(self.running) > self.res.max_seqs:
            raise AssertionError(f"replica {self.index} broke a limit: tokens {tokens} of "
                                 f"{self.res.budget}, KV {pool.used} of {pool.capacity}, "
                                 f"running {len(self.running)} of {self.res.max_seqs}")

    def _prefill_done(self, request: Request, time: float) -> None:
        self.prefilling.remove(request)
        request.generated += 1
        if request.first_token_time < 0:
            request.first_token_time = time
        if self.pool.caching:
            ids = request.block_ids
            ends = request.block_ends
            start = request.hbm_blocks
            if start < len(ids):
                pinned, moved = self.pool.insert(ids[start:], block_sizes(ends, start))
                request.pinned.extend(pinned)
                request.private -= moved
        if self.write_back and request.saved == 0:
            self._save(request, time)
        if request.generated >= request.output:
            del self.running[request.index]
            self._finish(request, time)
            return
        request.state = DECODE
        request.join_step = self.step_no
        request.decode_base = request.prompt - self.step_no
        self.decodes += 1
        self.decode_base += request.decode_base
        request.finish_step = self.step_no + request.output - request.generated
        heapq.heappush(self.finishes, (request.finish_step, request.index, request))

    def _save(self, request: Request, time: float) -> None:
        """Write the prompt's blocks that host DRAM lacks back to it (device-to-host)."""
        ids = request.block_ids
        ends = request.block_ends
        have = self.host.match_from(ids, 0)
        if have == len(ids):
            return
        tokens = ends[-1] - (ends[have - 1] if have else 0)
        done = self.d2h.reserve(time, self.m.save_time(tokens))
        self.seq += 1
        heapq.heappush(self.saves, (done, self.seq, ids[have:], block_sizes(ends, have)))
        request.saved = tokens

    def _apply_saves(self, time: float) -> None:
        saves = self.saves
        while saves and saves[0][0] <= time:
            _, _, ids, sizes = heapq.heappop(saves)
            self.host.insert(ids, sizes)

    def _finish_decodes(self, time: float) -> None:
        finishes = self.finishes
        step = self.step_no
        while finishes and finishes[0][0] <= step:
            due, _, request = heapq.heappop(finishes)
            if request.state != DECODE or request.finish_step != due:
                continue  # preempted since (a stale entry)
            del self.running[request.index]
            self.decodes -= 1
            self.decode_base -= request.decode_base
            request.private += step - request.join_step
            self._finish(request, time)

    def _finish(self, request: Request, time: float) -> None:
        self.pool.release(request.private)
        self.pool.unpin(request.pinned)
        request.private = 0
        request.pinned = []
        request.state = DONE
        request.finish_time = time
        request.block_ids = request.block_ends = []  # done with them: keep memory flat
        self.outstanding -= 1
        self.on_finish(request, time)

    # -- fast-forwarding --------------------------------------------------------------------------
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
        self.pending = _Run(self.now, steps, decodes, time_lines, busy_lines, f0, f1 - f0)
        self.next_time = self.pending.end
        self._chunks = []
        return True

    def _apply_run(self, run: _Run, steps: int) -> None:
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

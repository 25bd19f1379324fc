"""Admitting one waiting request into a replica's next iteration.

A request's cached prefix is looked up in HBM, then host DRAM, then the further tier
(:meth:`ReplicaAdmission.lookup`); at most ``prompt - 1`` tokens are taken from caches, as vLLM
computes at least the last one. Under the ``split`` cache policy only part of the host and tier
hits is loaded and the rest recomputed (:func:`kvroof.cost.split.balanced_split`). The request
is admitted when a sequence slot is free and its KV (cached prefix loaded, first chunk) fits in
HBM; loaded tokens take HBM but no token budget. Under ``async`` loading the load starts
instead and the request waits in the queue until its KV is in HBM. The full blocks a request
loads join the HBM prefix cache when they land (:mod:`kvroof.simulate.prefix_blocks`); a request
whose host hit includes blocks another request's async load is bringing waits for that load
(``DELAYED``) rather than loading them twice. Which requests are offered, in what order, is the
scheduler's (:mod:`kvroof.simulate.scheduler`), which also names the outcomes (``ADMITTED``,
``LOADING_STARTED``, ``BLOCKED``, ``NO_SEAT``, ``HELD``, ``DELAYED``).
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.split import balanced_split
from kvroof.simulate.kv_groups import chunk_window, slide_window, window_hit
from kvroof.simulate.prefix_blocks import cache_upto, touched_blocks
from kvroof.simulate.replica_state import ReplicaState
from kvroof.simulate.request import LOADING, PREFILL, READY, Request
from kvroof.simulate.scheduler import ADMITTED, BLOCKED, DELAYED, HELD, LOADING_STARTED, NO_SEAT

__all__ = ["ReplicaAdmission"]


class ReplicaAdmission(ReplicaState):
    """A replica that looks up cached prefixes and admits (or starts loading) one request."""

    def lookup(self, request: Request) -> tuple[int, int, int, int]:
        """(HBM blocks, HBM tokens, host tokens, tier tokens) of the request's cached prefix,
        at most ``prompt - 1`` tokens in all."""
        ids = request.block_ids
        ends = request.block_ends
        hbm = self.pool.match(ids) if self.pool.caching else 0
        if hbm and self.groups is not None:  # the window layers' blocks at the hit point
            hbm = window_hit(self.pool, request, hbm, self.groups.need)[0]
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
        if request.loading and request.state == READY:
            self._land(request)  # landed since the step began (the scheduler saw it first)
        if len(self.running) >= self.res.max_seqs:
            return NO_SEAT, 0
        pool = self.pool
        if request.state == READY:
            rest = request.prompt - request.prefilled
            n = rest if rest < budget else budget
            groups = self.groups
            window = 0
            if groups is not None:
                slide_window(pool, request, groups, request.prefilled)
                window = chunk_window(request, groups, n, n == rest) * groups.window_units
            if not pool.allocate(n * pool.full_units + window):
                return BLOCKED, 0
            request.private += n * pool.full_units + window
            if window:
                assert groups is not None
                request.window += window // groups.window_units
            if pool.caching:
                cache_upto(pool, request, request.prefilled + n)
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
        loading: list[int] = []
        if external and pool.caching:
            loading = touched_blocks(request, blocks, hbm_tokens + external)
            if self.in_flight and not self.in_flight.keys().isdisjoint(loading):
                # another request's load brings some of these blocks: wait for it, as vLLM's
                # OffloadingConnector does (get_num_new_matched_tokens returns None while a hit
                # block is in _blocks_being_loaded), and find them in HBM once it lands
                self._tried.append((request, blocks))
                return DELAYED, 0
        seconds = self.load_seconds(host, tier) if external else 0.0
        if hold and external and self.now < self.h2d.free_at - self.settings.admission_backlog:
            new = request.prompt - hbm_tokens - external
            if seconds > self.alone_compute(new, hbm_tokens + external):
                self.held_until = self.h2d.free_at - self.settings.admission_backlog
                self._tried.append((request, blocks))
                return HELD, 0
        asynchronous = external > 0 and self.settings.load_mode == "async"
        rest = request.prompt - hbm_tokens - external
        n = 0 if asynchronous else (rest if rest < budget else budget)
        state = self.res.state_tokens  # a linear layer's fixed state, once per request
        pinned = request.block_ids[:blocks]
        units = (external + n) * pool.full_units + state
        groups = self.groups
        window = window_from = 0
        if groups is not None:  # the hit's window blocks; the window of what it loads
            if blocks:
                pinned = pinned + window_hit(pool, request, blocks, groups.need)[1]
            window_from = max(hbm_tokens, hbm_tokens + external - groups.need)
            request.window = hbm_tokens + external - window_from
            window = request.window + chunk_window(request, groups, n,
                                                   n == rest and not asynchronous)
            units += window * groups.window_units
        if pinned:
            pool.pin(pinned)
        if not pool.allocate(units):
            request.window = 0
            if pinned:
                pool.unpin(pinned)
            self._tried.append((request, blocks))
            return BLOCKED, 0
        request.pinned = list(pinned)
        request.cached = blocks
        request.hbm_blocks = blocks
        request.hbm_hit = hbm_tokens
        request.host_hit = host
        request.tier_hit = tier
        request.split_recomputed = recompute
        request.computed = request.prompt - hbm_tokens - external - recompute
        request.loaded = external
        request.load_time = seconds
        request.private = units
        request.window = window
        request.window_from = window_from
        request.prefilled = hbm_tokens + external
        if external:
            self._touch(request, blocks, host, tier)
        if asynchronous:
            request.state = LOADING
            request.load_done = self.h2d.reserve(self.now, seconds)
            self.seq += 1
            heapq.heappush(self.loads, (request.load_done, self.seq, request))
            if loading:
                request.loading = loading
                in_flight = self.in_flight
                for block in loading:
                    in_flight[block] = in_flight.get(block, 0) + 1
            return LOADING_STARTED, 0
        if external:
            self._load_end = self.h2d.reserve(self._load_end, seconds)
        if pool.caching:  # loaded blocks (the step waits for them) and the first chunk's
            cache_upto(pool, request, request.prefilled + n)
        self._start(request, n)
        return ADMITTED, n

    def _land_loads(self) -> None:
        """Async loads that have landed by :attr:`now`: their requests are ``READY`` and their
        blocks join the HBM prefix cache (stale entries, of requests that load again, go)."""
        loads = self.loads
        now = self.now
        while loads and loads[0][0] <= now:
            done, _, request = heapq.heappop(loads)
            if request.state == LOADING and request.load_done == done:
                self._land(request)

    def _land(self, request: Request) -> None:
        """``request``'s async load has landed: it is ``READY`` and the full blocks it loaded
        are cached in HBM, pinned by it (vLLM caches them once the load finishes:
        ``Scheduler._update_waiting_for_remote_kv``)."""
        request.state = READY
        if request.loading:
            self._forget_load(request)
            if self.pool.caching:
                cache_upto(self.pool, request, request.prefilled)

    def _forget_load(self, request: Request) -> None:
        """``request``'s blocks are no longer on their way (landed or given up)."""
        in_flight = self.in_flight
        for block in request.loading:
            count = in_flight[block] - 1
            if count:
                in_flight[block] = count
            else:
                del in_flight[block]
        request.loading = []

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

"""One iteration of a replica and its effects.

The iteration's time is the cost model's compute time of its prefill chunks and decodes
(:class:`kvroof.cost.iteration.IterationModel`), stretched by a power cap and combined with the
loads it waits for (``sync`` adds them, ``layerwise`` overlaps them layer by layer:
:func:`kvroof.cost.timing.combine_overlap`). Its effects: prompts that finish prefilling emit
their first token, their blocks join the HBM prefix cache and their new KV is written back to
host DRAM on the link's device-to-host direction; decodes that reach their output length
finish and give back their KV. The decode cost of a step (:meth:`ReplicaIterations._decode_cost`)
is shared with fast-forwarding (:mod:`kvroof.simulate.fast_forward`).
"""

from __future__ import annotations

import heapq

from kvroof.cost.timing import combine_overlap
from kvroof.simulate.replica_state import ReplicaState
from kvroof.simulate.request import DECODE, DONE, Request, block_sizes

__all__ = ["ReplicaIterations"]


class ReplicaIterations(ReplicaState):
    """A replica that runs the iteration it has scheduled and applies its effects."""

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
        if power > self.peak_power:
            self.peak_power = power
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

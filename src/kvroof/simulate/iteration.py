"""One iteration of a replica and its effects.

The iteration's time is the cost model's compute time of its prefill chunks and decodes (the
deployment's compute model: the roofline, :class:`kvroof.cost.iteration.IterationModel`, or the
kernel tables op by op, :class:`kvroof.simulate.kernel_steps.KernelSteps`), stretched by a power
cap and combined with the loads it waits for (``sync`` adds them, ``layerwise`` overlaps them
layer by layer: :func:`kvroof.cost.timing.combine_overlap`), plus the engine's fixed cost of a
step (``iteration_overhead``, GPU idle). A request's first token and finish reach the client
its frontend cost later (``serving_overhead`` and its share per prompt token). Its effects:
prompts that finish prefilling emit
their first token (their blocks joined the HBM prefix cache when scheduled:
:mod:`kvroof.simulate.prefix_blocks`); the prompt blocks the iteration completed are stored to
host DRAM on the link's device-to-host direction (:mod:`kvroof.simulate.offload_store`); decodes
that reach their output length
finish and give back their KV. The decode cost of a step (:meth:`ReplicaIterations._decode_cost`)
is shared with fast-forwarding (:mod:`kvroof.simulate.fast_forward`).
"""

from __future__ import annotations

import heapq

from kvroof.cost.timing import combine_overlap
from kvroof.simulate.kv_groups import close_window, slide_window
from kvroof.simulate.prefix_blocks import full_blocks
from kvroof.simulate.replica_state import ReplicaState
from kvroof.simulate.request import DECODE, DONE, Request

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

    def _client_delay(self, request: Request) -> float:
        """Seconds the client sees a token of ``request`` after the engine emits it: the
        engine profile's serving overhead and its share per prompt token (HTTP, tokenizing,
        detokenizing: the frontend's work, off the engine's critical path; 0 without
        ``engine_overhead``)."""
        fixed, per_token = self.frontend
        return fixed + per_token * request.input if (fixed or per_token) else 0.0

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
        kernel = self.kernel_steps
        if kernel is None:  # the roofline
            flop_s, hbm_s, comm = m.breakdown(tokens, flops, kv)
            busy = flop_s if flop_s > hbm_s else hbm_s
        else:  # kernel mode: op by op (kvroof.simulate.kernel_steps)
            step = self.step_no
            busy, comm = kernel.iteration(
                decodes, float(self.decode_base + decodes * step), lambda: self._contexts(step),
                [(n, context, final) for _, n, context, final in self._chunks])
        compute = self.power.capped_time(busy + comm, busy)
        loads = self._load_end - self.now
        mode = self.settings.load_mode
        if loads > 0 and mode != "async":
            time = float(combine_overlap(loads, compute, self.res.layers,
                                         "serial" if mode == "sync" else "layerwise",
                                         self.res.overlap_efficiency))
        else:
            time = compute
        if self.step_overhead:  # the engine's CPU time of the step (scheduling, sampling)
            time += self.step_overhead
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
        store = self.store
        for request, n, _, _ in chunks:
            request.prefilled += n
            if store:
                self._store(request, end)
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
            request.first_token_time = time + self._client_delay(request)
        if request.generated >= request.output:
            del self.running[request.index]
            self._finish(request, time)
            return
        request.state = DECODE
        if self.groups is not None:  # the window keeps need + 1 positions while it decodes
            slide_window(self.pool, request, self.groups, request.prompt)
        request.join_step = self.step_no
        request.decode_base = request.prompt - self.step_no
        self.decodes += 1
        self.decode_base += request.decode_base
        request.finish_step = self.step_no + request.output - request.generated
        heapq.heappush(self.finishes, (request.finish_step, request.index, request))

    def _store(self, request: Request, time: float) -> None:
        """Store the prompt blocks this iteration completed (every full block up to
        ``prefilled``; the last, partial one with the prompt's last token) that host DRAM
        neither has nor is receiving, device-to-host from ``time`` (vLLM's OffloadingConnector:
        docs/simulate.md, "Offloading")."""
        ends = request.block_ends
        start = request.stored
        if start >= len(ends) or ends[start] > request.prefilled:
            return
        stop = full_blocks(request, request.prefilled)
        request.stored = stop
        ids = request.block_ids
        host = self.host.blocks
        storing = self.storing
        new = [i for i in range(start, stop) if ids[i] not in host and ids[i] not in storing]
        if not new:
            return
        blocks = [ids[i] for i in new]
        sizes = [ends[i] - (ends[i - 1] if i else 0) for i in new]
        tokens = sum(sizes)
        done = self.d2h.reserve(time, self.saver.save_time(tokens))
        self.seq += 1
        heapq.heappush(self.saves, (done, self.seq, blocks, sizes))
        storing.update(blocks)
        request.saved += tokens

    def _apply_saves(self, time: float) -> None:
        saves = self.saves
        while saves and saves[0][0] <= time:
            _, _, ids, sizes = heapq.heappop(saves)
            self.storing.difference_update(ids)
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
            request.private += (step - request.join_step) * self.pool.full_units
            self._finish(request, time)

    def _finish(self, request: Request, time: float) -> None:
        if request.window:
            assert self.groups is not None
            close_window(self.pool, request, self.groups)
        self.pool.release(request.private)
        self.pool.unpin(request.pinned)
        request.private = 0
        request.pinned = []
        request.state = DONE
        time += self._client_delay(request)  # the frontend's cost, as the client sees it
        request.finish_time = time
        request.block_ids = request.block_ends = []  # done with them: keep memory flat
        self.outstanding -= 1
        self.on_finish(request, time)

"""Which waiting requests join the next iteration.

Both policies walk the waiting queue in arrival order (preempted requests go back to its head,
as in vLLM) while the iteration has token budget left, asking the replica to admit each request
(:meth:`kvroof.simulate.admission.ReplicaAdmission.try_admit`, through the :class:`Admitter`
protocol): a request is admitted when a sequence slot is free and its KV (cached prefix
loaded, first chunk) fits in HBM; an async load starts instead when its KV must come from the
host first (it waits outside the batch, in the queue, and is picked up once loaded). A request
whose blocks another request is loading waits for that load (``DELAYED``) without stopping the
walk. The engine does not call the policy at all in a step that preempted a running request
(vLLM v1: ``if not preempted_reqs:`` around the scheduling of waiting requests,
vllm/v1/core/sched/scheduler.py at commit b4622cf924bc72504aed99e486062d6633fde39e).

- ``fifo`` (vLLM v1's default): stop at the first request that does not fit.
- ``utilization-aware`` (the seed paper's proposal, made concrete here): skip a request that does
  not fit and keep filling the token budget with later ones, so that small requests fill the
  slots a large one leaves. Aging credits bound the unfairness: each time a later request is
  admitted past a waiting one, that one earns a credit, and a request with ``aging_limit``
  credits may no longer be passed (the walk stops there, as FIFO would). Admission control:
  while more than ``admission_backlog`` seconds of copies are queued on the host link, a request
  whose load would outlast its own prefill (high kappa_ratio) is held back and compute-heavy
  requests go first; held requests earn credits too, so they are never held forever. The walk
  looks at most :data:`LOOKAHEAD` requests per iteration.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from kvroof.simulate.request import LOADING, READY, Request

__all__ = ["ADMITTED", "BLOCKED", "DELAYED", "HELD", "LOADING_STARTED", "LOOKAHEAD", "NO_SEAT",
           "Admitter", "admit"]

ADMITTED = 0
LOADING_STARTED = 1
BLOCKED = 2
NO_SEAT = 3
HELD = 4
DELAYED = 5
"""Some of the blocks the request would load are on their way into HBM for another request: it
waits for that load (and then finds them in HBM) instead of loading them again; the walk goes
on past it, as vLLM's scheduler skips a request whose connector lookup returns ``None``."""

LOOKAHEAD = 256
"""Waiting requests the utilization-aware scheduler examines per iteration (bounds its cost on
a long queue)."""


LIMITS = ("queue", "budget", "seats", "kv", "link")
"""Why a batch is no larger: the queue ran out (nothing else could start), the token budget ran
out, every sequence slot is taken, a waiting request's KV did not fit in HBM, or a request was
held back for the host link (utilization-aware admission control)."""


class Admitter(Protocol):
    """What a policy needs of a replica: its waiting queue, its clock and admitting one request
    (:class:`kvroof.simulate.engine.Engine` is one). The policy depends on this, not on the
    engine, so that the engine may depend on the policy."""

    waiting: deque[Request]
    now: float

    def try_admit(self, request: Request, budget: int, hold: bool) -> tuple[int, int]:
        """(status, budget tokens used): one of the statuses above."""
        ...


def admit(engine: Admitter, budget: int, skip: bool, aging_limit: int) -> tuple[int, int]:
    """Admit waiting requests into the iteration being scheduled; returns the budget left and
    what limited the batch (an index into :data:`LIMITS`). ``skip``: utilization-aware (skip
    what does not fit), else FIFO."""
    waiting = engine.waiting
    now = engine.now
    i = 0
    scanned = 0
    passed_over: list[Request] = []
    limit = 0
    while i < len(waiting) and budget > 0:
        if skip:
            if scanned >= LOOKAHEAD:
                break
            scanned += 1
        request = waiting[i]
        if request.state == LOADING:
            if request.load_done > now:
                i += 1
                continue
            request.state = READY
        urgent = not skip or request.passed >= aging_limit
        status, used = engine.try_admit(request, budget, hold=not urgent)
        if status == NO_SEAT:
            return budget, 2
        if status == DELAYED:
            i += 1
            continue
        if status in (BLOCKED, HELD):
            if limit != 3:
                limit = 3 if status == BLOCKED else 4
            if urgent:
                break
            passed_over.append(request)
            i += 1
            continue
        stop = False
        for other in passed_over:
            other.passed += 1
            stop = stop or other.passed >= aging_limit
        if status == LOADING_STARTED:
            i += 1
        else:
            del waiting[i]
            budget -= used
        if stop:  # a passed-over request has used up its credits: nobody else passes it
            limit = 3
            break
    if budget <= 0 and limit == 0:
        return budget, 1
    return budget, limit

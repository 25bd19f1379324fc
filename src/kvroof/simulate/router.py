"""Which replica gets a request. Each router sees the replicas as they are at the arrival (a
replica in the middle of an iteration shows that iteration's end, whether its iterations are
stepped or fast-forwarded: :mod:`kvroof.simulate.fast_forward`), and only replicas whose KV
space can hold the request are candidates.

- ``round-robin``: the next replica in turn.
- ``least-loaded``: the fewest outstanding requests (waiting, loading or running); ties to the
  lowest index.
- ``prefix-affinity``: SGLang's cache-aware routing: the replica holding the longest prefix of
  the request (HBM, host DRAM or the further tier) when that prefix is at least
  :data:`CACHE_THRESHOLD` of the prompt, least-loaded otherwise, and least-loaded whenever the
  load is out of balance (the busiest replica has more than :data:`BALANCE_ABS` more
  outstanding requests than the idlest, and more than :data:`BALANCE_REL` times as many).
- ``kappa``: the seed paper's proposal, routing by kappa_ratio across replicas of different
  hardware. Each replica has a critical ratio ``c / x``: its compute seconds per new token in a
  full iteration over its load seconds per cached token (the cost model's, per replica). A
  request's ratio is ``K / T`` with ``K`` the longest prefix any replica holds; it goes to the
  least-loaded replica on which it stays compute-bound (ratio at most the replica's critical
  one), or, when there is none, to the least-loaded of the replicas with the highest critical
  ratio (the best link for its compute).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvroof.simulate.engine import Engine
from kvroof.simulate.request import Request

__all__ = ["BALANCE_ABS", "BALANCE_REL", "CACHE_THRESHOLD", "Router"]

CACHE_THRESHOLD = 0.5
"""Prefix share above which ``prefix-affinity`` follows the cache (SGLang router's
``--cache-threshold`` default, sgl-project/sglang router README)."""
BALANCE_ABS = 32
BALANCE_REL = 1.1
"""Imbalance thresholds of ``prefix-affinity`` (outstanding requests; the kind SGLang's router
uses, ``balance_abs_threshold`` / ``balance_rel_threshold``; these values are kvroof's)."""


class Router:
    """Chooses a replica for each arriving request."""

    def __init__(self, kind: str, engines: Sequence[Engine]) -> None:
        self.kind = kind
        self.engines = engines
        self.turn = 0
        self.settled: list[int] = []
        """Replicas whose pending decode run the last :meth:`choose` applied in part (their
        next event moved)."""
        self.critical: list[float] = []
        if kind == "kappa":
            for engine in engines:
                m = engine.m
                budget = engine.res.budget
                per_new = m.time(budget, *m.prefill_chunk(budget, 0.0, True)) / budget
                per_cached = m.load_time(10_000.0) / 10_000.0
                self.critical.append(per_new / per_cached)

    def _least(self, candidates: Sequence[int]) -> int:
        engines = self.engines
        return min(candidates, key=lambda i: engines[i].outstanding)

    def choose(self, request: Request, candidates: Sequence[int], time: float,
               preloaded: int = 0) -> int:
        """A replica among ``candidates`` (indices of replicas that can hold the request);
        ``preloaded`` tokens of its prefix are in host DRAM wherever it goes (a table's K)."""
        kind = self.kind
        if self.settled:
            self.settled.clear()
        if len(candidates) == 1:
            return candidates[0]
        if kind == "round-robin":
            choice = candidates[self.turn % len(candidates)]
            self.turn += 1
            return choice
        if kind == "least-loaded":
            return self._least(candidates)
        matches = []
        settled = self.settled
        for i in candidates:
            engine = self.engines[i]
            if engine.settle(time):
                settled.append(i)
            engine._apply_saves(time)
            _, hbm, host, tier = engine.lookup(request)
            matches.append(max(hbm + host + tier, min(preloaded, request.prompt - 1)))
        if kind == "prefix-affinity":
            loads = [self.engines[i].outstanding for i in candidates]
            busiest, idlest = max(loads), min(loads)
            balanced = not (busiest - idlest > BALANCE_ABS and busiest > BALANCE_REL * idlest)
            best = max(range(len(candidates)), key=lambda j: (matches[j], -loads[j]))
            if balanced and matches[best] >= CACHE_THRESHOLD * request.prompt:
                return candidates[best]
            return self._least(candidates)
        cached = max(matches)
        ratio = cached / max(request.prompt - cached, 1)
        fits = [i for i in candidates if ratio <= self.critical[i]]
        if fits:
            return self._least(fits)
        top = max(self.critical[i] for i in candidates)
        return self._least([i for i in candidates if self.critical[i] == top])

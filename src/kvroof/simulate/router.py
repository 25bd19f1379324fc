"""Which replica gets a request. Each router sees the replicas as they are at the arrival (a
replica in the middle of an iteration shows that iteration's end, whether its iterations are
stepped or fast-forwarded: :mod:`kvroof.simulate.fast_forward`), and only replicas whose KV
space can hold the request are candidates. Wherever a rule leaves a tie, the replica chosen
least recently wins (never chosen: the lowest index), so that ties spread over the replicas
instead of piling onto replica 0.

- ``round-robin``: the next replica in turn.
- ``least-loaded``: the fewest outstanding requests (waiting, loading or running).
- ``prefix-affinity``: SGLang's cache-aware routing (sgl-project/sglang,
  ``sgl-router/src/policies/cache_aware.rs``, commit b6f20641ad6b). SGLang's router matches
  the prompt against its own radix tree of what it sent to each worker, a picture of the
  workers' GPU prefix caches; it knows nothing of their host tiers. So the affinity here is the
  HBM prefix only: the replica holding the longest HBM prefix when that prefix is more than
  :data:`CACHE_THRESHOLD` of the prompt (ties: the longer prefix in HBM and host tiers
  together, then the fewer outstanding requests), least-loaded otherwise (ties: the longer
  prefix in HBM and the host tiers together, which loads instead of being computed). Whenever
  the load is out of balance (the busiest replica has more than :data:`BALANCE_ABS` more
  outstanding requests than the idlest, and more than :data:`BALANCE_REL` times as many),
  least-loaded. Where SGLang
  sends a request below the threshold to the worker with the smallest tree, kvroof sends it to
  the least-loaded one.
- ``kappa``: the seed paper's proposal, routing by kappa_ratio across replicas of different
  hardware. Each replica has a critical ratio ``c / x``: its compute seconds per new token in a
  full iteration over its load seconds per cached token (the cost model's, per replica). A
  request's ratio is ``K / T`` with ``K`` the longest prefix any replica holds; it goes to the
  least-loaded replica on which it stays compute-bound (ratio at most the replica's critical
  one), or, when there is none, to the least-loaded of the replicas with the highest critical
  ratio (the best link for its compute); its ties go to the lowest index.
- ``scoring``: llm-d's endpoint picker, a weighted sum of scorers
  (:mod:`kvroof.simulate.scoring_router`, weights
  :class:`kvroof.simulate.router_weights.RouterWeights`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvroof.simulate.engine import Engine
from kvroof.simulate.request import Request
from kvroof.simulate.router_weights import RouterWeights
from kvroof.simulate.scoring_router import ScoringRouter

__all__ = ["BALANCE_ABS", "BALANCE_REL", "CACHE_THRESHOLD", "Router"]

CACHE_THRESHOLD = 0.5
"""HBM prefix share above which ``prefix-affinity`` follows the cache (SGLang's
``CacheAwareConfig`` default ``cache_threshold``, ``sgl-router/src/policies/mod.rs``; the
command line's default is 0.3; the comparison is strict, ``match_rate > cache_threshold``, as
in ``cache_aware.rs``)."""
BALANCE_ABS = 32
BALANCE_REL = 1.1
"""Imbalance thresholds of ``prefix-affinity`` in outstanding requests (SGLang's
``CacheAwareConfig`` defaults ``balance_abs_threshold`` 32 and ``balance_rel_threshold`` 1.1,
``sgl-router/src/policies/mod.rs``; its command line defaults to 64 and 1.5)."""


class Router:
    """Chooses a replica for each arriving request (``weights``: the ``scoring`` router's)."""

    def __init__(self, kind: str, engines: Sequence[Engine],
                 weights: RouterWeights | None = None) -> None:
        self.kind = kind
        self.engines = engines
        self.turn = 0
        self.chosen = 0
        self.last = [-1] * len(engines)
        """When each replica was last chosen (a count of choices; -1: never)."""
        self.settled: list[int] = []
        """Replicas whose pending decode run the last :meth:`choose` applied in part (their
        next event moved)."""
        self.scoring = ScoringRouter(engines, weights or RouterWeights()) \
            if kind == "scoring" else None
        self.critical: list[float] = []
        if kind == "kappa":
            for engine in engines:
                m = engine.m
                budget = engine.res.budget
                per_new = m.time(budget, *m.prefill_chunk(budget, 0.0, True)) / budget
                per_cached = m.load_time(10_000.0) / 10_000.0
                self.critical.append(per_new / per_cached)

    def _least(self, candidates: Sequence[int]) -> int:
        """The fewest outstanding requests; ties to the least recently chosen."""
        engines = self.engines
        last = self.last
        return min(candidates, key=lambda i: (engines[i].outstanding, last[i]))

    def _least_by_index(self, candidates: Sequence[int]) -> int:
        """The fewest outstanding requests; ties to the lowest index (``kappa``'s rule)."""
        engines = self.engines
        return min(candidates, key=lambda i: engines[i].outstanding)

    def choose(self, request: Request, candidates: Sequence[int], time: float,
               preloaded: int = 0) -> int:
        """A replica among ``candidates`` (indices of replicas that can hold the request);
        ``preloaded`` tokens of its prefix are in host DRAM wherever it goes (a table's K)."""
        if self.settled:
            self.settled.clear()
        choice = self._pick(request, candidates, time, preloaded)
        self.chosen += 1
        self.last[choice] = self.chosen
        return choice

    def _pick(self, request: Request, candidates: Sequence[int], time: float,
              preloaded: int) -> int:
        kind = self.kind
        if len(candidates) == 1 and kind != "scoring":  # scoring: a cold request moves the LRU
            return candidates[0]
        if kind == "round-robin":
            choice = candidates[self.turn % len(candidates)]
            self.turn += 1
            return choice
        if kind == "least-loaded":
            return self._least(candidates)
        hbm_hits = []
        matches = []
        settled = self.settled
        floor = min(preloaded, request.prompt - 1)
        for i in candidates:
            engine = self.engines[i]
            if engine.settle(time):
                settled.append(i)
            engine._apply_saves(time)
            _, hbm, host, tier = engine.lookup(request)
            hbm_hits.append(hbm)
            total = hbm + host + tier
            matches.append(total if total > floor else floor)
        if kind == "prefix-affinity":
            return self._affinity(request, candidates, hbm_hits, matches)
        if kind == "scoring":
            return self._score(request, candidates, hbm_hits, matches)
        cached = max(matches)
        ratio = cached / max(request.prompt - cached, 1)
        fits = [i for i in candidates if ratio <= self.critical[i]]
        if fits:
            return self._least_by_index(fits)
        top = max(self.critical[i] for i in candidates)
        return self._least_by_index([i for i in candidates if self.critical[i] == top])

    def _affinity(self, request: Request, candidates: Sequence[int], hbm: list[int],
                  matches: list[int]) -> int:
        engines = self.engines
        last = self.last
        loads = [engines[i].outstanding for i in candidates]
        busiest, idlest = max(loads), min(loads)
        if busiest - idlest > BALANCE_ABS and busiest > BALANCE_REL * idlest:
            return self._least(candidates)
        order = range(len(candidates))
        best = max(order, key=lambda j: (hbm[j], matches[j], -loads[j], -last[candidates[j]]))
        if hbm[best] > CACHE_THRESHOLD * request.prompt:
            return candidates[best]
        pick = min(order, key=lambda j: (loads[j], -matches[j], last[candidates[j]]))
        return candidates[pick]

    def _score(self, request: Request, candidates: Sequence[int], hbm: list[int],
               matches: list[int]) -> int:
        assert self.scoring is not None
        totals = self.scoring.scores(candidates, request.prompt, hbm, matches)
        last = self.last
        pick = max(range(len(candidates)), key=lambda j: (totals[j], -last[candidates[j]]))
        self.scoring.chose(candidates[pick], hbm)
        return candidates[pick]

"""The ``scoring`` router: llm-d's endpoint picker (EPP) as a weighted sum of scorers, each
mapping a replica to [0, 1] as llm-d's scorer does, the highest total winning.

- ``queue`` (llm-d ``queue-scorer``, gateway-api-inference-extension
  ``pkg/epp/scheduling/framework/plugins/scorer/queue.go``, commit c729d434c1e6): requests
  waiting on the replica (vLLM's ``num_requests_waiting``: queued, loading or loaded but not
  yet running), min-max normalized over the candidates, ``(max - q) / (max - min)``; 1 for all
  when every queue is the same length.
- ``kv-utilization`` (``kv-cache-utilization-scorer``, ``kvcache_utilization.go``, commit
  62d14799093a): ``1 - usage`` with usage vLLM's ``kv_cache_usage_perc``, the share of the KV
  space held by running requests (cached blocks no request holds count as free, as in vLLM's
  free-block queue).
- ``prefix`` (``prefix-cache-scorer`` on the GPU cache, ``plugins/multi/prefix/plugin.go``,
  commit 4bc4889d1216: matched blocks over the request's blocks): the prompt's share found in
  the replica's HBM prefix cache (kvroof sees the cache itself, as llm-d's precise prefix
  scorer does, where the approximate one guesses it from past routing).
- ``host-prefix`` (the tiered-prefix-cache guide's ``cpu-prefix-cache-scorer``, a
  ``prefix-cache-scorer`` over a CPU-tier index): the prompt's share found in HBM or the host
  tiers. vLLM's CPU offloading stores every block it computes, so the CPU index's match from the
  first block is what HBM and host DRAM hold together.
- ``no-hit-lru`` (llm-d-inference-scheduler ``pkg/plugins/scorer/no_hit_lru.go``, commit
  0af62db8fe26): for a request no replica has an HBM prefix hit for ("cold"), replicas never
  given a cold request score highest (``1 - i / (n - 1)`` in candidate order), then the others
  from the least recently given one (rank ``never + position``, ``max(0, 1 - rank / (n -
  1))``); for any other request 0.5 each. A cold request's replica becomes the most recent.

Ties of the weighted total (llm-d's max-score picker picks one of them at random) go to the
replica chosen least recently, which spreads ties the same way without a random draw.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kvroof.simulate.engine import Engine
from kvroof.simulate.router_weights import RouterWeights

__all__ = ["ScoringRouter"]


class ScoringRouter:
    """Scores replicas for one request at a time; keeps the no-hit LRU order."""

    def __init__(self, engines: Sequence[Engine], weights: RouterWeights) -> None:
        self.engines = engines
        self.weights = weights
        self.cold: OrderedDict[int, None] = OrderedDict()
        """Replicas given a cold request, least recent first."""

    def scores(self, candidates: Sequence[int], prompt: int, hbm: Sequence[int],
               cached: Sequence[int]) -> list[float]:
        """Weighted totals of ``candidates`` for a request of ``prompt`` tokens with ``hbm``
        tokens of its prefix in each candidate's HBM and ``cached`` in its HBM or host tiers."""
        w = self.weights
        engines = self.engines
        n = len(candidates)
        totals = [0.0] * n
        if w.queue:
            queues = [len(engines[i].waiting) for i in candidates]
            low, high = min(queues), max(queues)
            if high == low:
                totals = [w.queue] * n
            else:
                span = high - low
                totals = [w.queue * (high - q) / span for q in queues]
        if w.kv_utilization:
            for j, i in enumerate(candidates):
                pool = engines[i].pool
                totals[j] += w.kv_utilization * (1.0 - pool.in_use / pool.capacity)
        if w.prefix:
            for j in range(n):
                totals[j] += w.prefix * hbm[j] / prompt
        if w.host_prefix:
            for j in range(n):
                totals[j] += w.host_prefix * cached[j] / prompt
        if w.no_hit_lru:
            for j, score in enumerate(self._lru_scores(candidates, hbm)):
                totals[j] += w.no_hit_lru * score
        return totals

    def _lru_scores(self, candidates: Sequence[int], hbm: Sequence[int]) -> list[float]:
        n = len(candidates)
        if any(hbm):
            return [0.5] * n
        if n == 1:
            return [1.0]
        position = {replica: k for k, replica in enumerate(self.cold)}
        never = [i for i in candidates if i not in position]
        order = {replica: k for k, replica in enumerate(never)}
        out = []
        for i in candidates:
            rank = order[i] if i in order else len(never) + position[i]
            out.append(max(0.0, 1.0 - rank / (n - 1)))
        return out

    def chose(self, replica: int, hbm: Sequence[int]) -> None:
        """Record the choice: a cold request's replica becomes the most recent in the LRU."""
        if self.weights.no_hit_lru and not any(hbm):
            self.cold.pop(replica, None)
            self.cold[replica] = None

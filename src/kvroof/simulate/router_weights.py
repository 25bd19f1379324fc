"""The weights of the ``scoring`` router (:mod:`kvroof.simulate.scoring_router`): one per
scorer, read from ``KEY=WEIGHT,...`` text (``--router-weights``).

The defaults are llm-d's published endpoint-picker configuration for a vLLM deployment with
CPU offloading, the case kvroof's host tier models: ``queue-scorer``,
``kv-cache-utilization-scorer``, ``gpu-prefix-cache-scorer``, ``cpu-prefix-cache-scorer`` and
``no-hit-lru-scorer`` at weight 1 each (llm-d/llm-d,
``guides/tiered-prefix-cache/router/single-host/tiered-prefix-cache-cpu.values.yaml`` at commit
68d37a35451e378d59d9f3d0a90c9139f305c96b, no weight given, so 1; the guide's README: "The
current weight configuration defaults to 1:1:1:1:1"). llm-d PR 1654 (merged 2026-06-02)
replaced the earlier profile, queue 2, kv-utilization 2, GPU prefix 1, CPU prefix 1 and no
no-hit-lru scorer (``guides/tiered-prefix-cache/cpu/router/tiered-prefix-cache-cpu.values.yaml``,
commit c2405cdfdfab189dc493de38b692fc21321d2421). llm-d's HBM-only profile
(``guides/inference-scheduling/scheduler/inference-scheduling.values.yaml``, commit
086f217d643a6932b261a60f8f337b2ca2629d80) has queue 2, kv-utilization 2, prefix 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from kvroof.errors import KvroofError

__all__ = ["SCORERS", "RouterWeights"]

SCORERS: dict[str, str] = {
    "queue": "queue",
    "kv-utilization": "kv_utilization",
    "prefix": "prefix",
    "host-prefix": "host_prefix",
    "no-hit-lru": "no_hit_lru",
}
"""Scorer names as written in ``--router-weights`` -> :class:`RouterWeights` fields."""


@dataclass(frozen=True)
class RouterWeights:
    """Weights of the scoring router's scorers (non-negative, at least one positive)."""

    queue: float = 1.0
    kv_utilization: float = 1.0
    prefix: float = 1.0
    host_prefix: float = 1.0
    no_hit_lru: float = 1.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            key = item.name.replace("_", "-")
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise KvroofError(f"router_weights: {key} expected a non-negative number, got "
                                  f"{value!r}")
        if not any(getattr(self, item.name) > 0 for item in fields(self)):
            raise KvroofError("router_weights: every weight is 0; give at least one positive")

    @classmethod
    def parse(cls, text: str, base: RouterWeights | None = None) -> RouterWeights:
        """``KEY=WEIGHT[,KEY=WEIGHT]`` over ``base`` (default: the defaults); keys are
        ``queue``, ``kv-utilization``, ``prefix``, ``host-prefix``, ``no-hit-lru``."""
        changes: dict[str, float] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise KvroofError(f"router_weights: expected KEY=WEIGHT[,KEY=WEIGHT], got "
                                  f"{text!r}")
            if key not in SCORERS:
                raise KvroofError(f"router_weights: unknown scorer {key!r} (one of "
                                  f"{', '.join(SCORERS)})")
            name = SCORERS[key]
            if name in changes:
                raise KvroofError(f"router_weights: {key} given twice")
            try:
                number = float(value)
            except ValueError:
                raise KvroofError(f"router_weights: {key} expected a number, got "
                                  f"{value.strip()!r}") from None
            if not math.isfinite(number) or number < 0:
                raise KvroofError(f"router_weights: {key} expected a non-negative number, got "
                                  f"{value.strip()}")
            changes[name] = number
        return replace(base or cls(), **changes)

    def text(self) -> str:
        """The weights as ``--router-weights`` takes them."""
        return ",".join(f"{key}={getattr(self, name):g}" for key, name in SCORERS.items())

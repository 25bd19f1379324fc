"""The ``scoring`` router (llm-d's endpoint picker): scorers and totals computed by hand, its
weights' parsing and errors, and a run end to end."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kvroof.errors import KvroofError
from kvroof.simulate.router_weights import RouterWeights
from kvroof.simulate.runner import simulate
from kvroof.simulate.scoring_router import ScoringRouter
from kvroof.simulate.settings import SimSettings
from kvroof.workload.records import Workload
from kvroof.workload.requests import requests_from_workload
from tests.simulate.helpers import paper_testbed


def stub(waiting: int, in_use: int, capacity: int) -> Any:
    """What the scorers read of a replica: its waiting queue and KV space."""
    return SimpleNamespace(waiting=[None] * waiting,
                           pool=SimpleNamespace(in_use=in_use, capacity=capacity))


def test_scores_by_hand() -> None:
    """Three replicas, llm-d's earlier tiered-prefix-cache weights (queue 2, kv-utilization 2,
    prefix 1, host-prefix 1, no no-hit-lru; commit c2405cd), a 1,000-token prompt. By hand:

    - queue: waiting 0, 2, 4 -> (4 - q) / (4 - 0) = 1, 0.5, 0 -> x 2 = 2, 1, 0;
    - kv-utilization: in use 500, 250, 0 of 1,000 -> 1 - usage = 0.5, 0.75, 1 -> x 2 = 1, 1.5, 2;
    - prefix: HBM 800, 0, 0 of 1,000 -> 0.8, 0, 0;
    - host-prefix: HBM or host 800, 999, 0 of 1,000 -> 0.8, 0.999, 0.

    Totals 4.6, 3.499, 2."""
    engines = [stub(0, 500, 1000), stub(2, 250, 1000), stub(4, 0, 1000)]
    router = ScoringRouter(engines, RouterWeights(queue=2, kv_utilization=2, prefix=1,
                                                  host_prefix=1, no_hit_lru=0))
    totals = router.scores([0, 1, 2], 1000, [800, 0, 0], [800, 999, 0])
    assert totals == pytest.approx([4.6, 3.499, 2.0], abs=1e-12)
    # equal queues: llm-d's queue scorer gives every replica 1
    engines = [stub(3, 0, 1000), stub(3, 0, 1000)]
    router = ScoringRouter(engines, RouterWeights(queue=1, kv_utilization=0, prefix=0,
                                                  host_prefix=0, no_hit_lru=0))
    assert router.scores([0, 1], 100, [0, 0], [0, 0]) == [1.0, 1.0]


def test_no_hit_lru_by_hand() -> None:
    """llm-d's no-hit-lru scorer on three replicas (weight 1, the others 0). A cold request
    (no HBM hit anywhere) with no cold history: never-used replicas in candidate order score
    1 - i / (3 - 1) = 1, 0.5, 0. After cold requests went to replica 2, then replica 0, the LRU
    is [2, 0] (oldest first): replica 1 never used scores 1; replica 2 rank 1 + 0 = 1 scores
    0.5; replica 0 rank 1 + 1 = 2 scores 0. A warm request (an HBM hit somewhere) scores 0.5
    everywhere and leaves the LRU as it is."""
    engines = [stub(0, 0, 1000)] * 3
    weights = RouterWeights(queue=0, kv_utilization=0, prefix=0, host_prefix=0, no_hit_lru=1)
    router = ScoringRouter(engines, weights)
    assert router.scores([0, 1, 2], 100, [0, 0, 0], [0, 0, 0]) == [1.0, 0.5, 0.0]
    router.chose(2, [0, 0, 0])
    router.chose(0, [0, 0, 0])
    assert router.scores([0, 1, 2], 100, [0, 0, 0], [0, 0, 0]) == [0.0, 1.0, 0.5]
    assert router.scores([0, 1, 2], 100, [0, 50, 0], [0, 50, 0]) == [0.5, 0.5, 0.5]
    router.chose(1, [0, 50, 0])
    assert list(router.cold) == [2, 0]


def test_scoring_run_by_hand() -> None:
    """Two replicas, default weights (1 each), questions on documents A, B, A, B 20 s apart
    (each done before the next: every queue empty and every KV space free of running requests,
    so queue and kv-utilization give 1 + 1 to both). A1: no HBM hit anywhere (cold), no cold
    history: no-hit-lru scores 1, 0 in candidate order: replica 0. B1: cold, replica 0 was
    used: replica 1 (never used) scores 1, replica 0 scores 0: replica 1. A2: replica 0 holds
    A's 8,000 document tokens in HBM (and host DRAM) of the 8,100-token prompt (warm: no-hit-lru
    0.5 on both): 2.5 + 2 x 8,000 / 8,100 against 2.5 on replica 1: replica 0. B2 likewise
    replica 1."""
    n = 4
    w = Workload.from_columns([100] * n, [8000] * n, output_tokens=[1] * n,
                              arrival_time=[20.0 * i for i in range(n)],
                              group_id=["A", "B"] * 2)
    trace = requests_from_workload(w, "docqa")
    result = simulate(trace, [paper_testbed()] * 2, SimSettings(router="scoring"))
    assert result.requests["replica"].tolist() == [0, 1, 0, 1]
    assert result.requests["hbm_hit"].tolist() == [0, 0, 8000, 8000]
    assert result.settings["router_weights"] == {"queue": 1.0, "kv_utilization": 1.0,
                                                 "prefix": 1.0, "host_prefix": 1.0,
                                                 "no_hit_lru": 1.0}


def test_weights_parse() -> None:
    weights = RouterWeights.parse("queue=1, prefix=3,no-hit-lru=2")
    assert weights == RouterWeights(queue=1, kv_utilization=1, prefix=3, host_prefix=1,
                                    no_hit_lru=2)
    assert RouterWeights.parse(weights.text()) == weights


@pytest.mark.parametrize(("text", "message"), [
    ("bogus=1", "router_weights: unknown scorer 'bogus'"),
    ("queue=-1", "router_weights: queue expected a non-negative number, got -1"),
    ("queue=1,queue=2", "router_weights: queue given twice"),
    ("queue=x", "router_weights: queue expected a number, got 'x'"),
    ("queue", "router_weights: expected KEY=WEIGHT"),
    ("queue=nan", "router_weights: queue expected a non-negative number"),
    ("queue=0,kv-utilization=0,prefix=0,host-prefix=0,no-hit-lru=0",
     "router_weights: every weight is 0"),
])
def test_weights_errors(text: str, message: str) -> None:
    with pytest.raises(KvroofError) as error:
        RouterWeights.parse(text)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_weights_apply_to_the_scoring_router_only() -> None:
    with pytest.raises(KvroofError, match="router_weights: apply to the scoring router"):
        SimSettings(router="prefix-affinity", router_weights=RouterWeights(prefix=3))
    with pytest.raises(KvroofError, match="router_weights: queue expected a non-negative"):
        RouterWeights(queue=-0.5)


def test_weights_as_text() -> None:
    """Sweep configs give settings as text: ``router_weights: "prefix=3"`` reads as the weights
    with prefix 3 and the rest at their defaults."""
    settings = SimSettings(router="scoring", router_weights="prefix=3")  # type: ignore[arg-type]
    assert settings.router_weights == RouterWeights(prefix=3)

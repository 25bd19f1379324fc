"""Routing ties and prefix affinity (issue 21, cause 1): the replica imbalance of the old
``prefix-affinity`` rule (host-DRAM hits counted as affinity, ties to the lowest index)
reproduced on a hand-built case, and the new rule's spread derived by hand."""

from __future__ import annotations

import numpy as np

from kvroof.simulate.runner import simulate
from kvroof.simulate.settings import SimSettings
from kvroof.workload.records import Workload
from kvroof.workload.requests import RequestTrace, requests_from_workload
from tests.simulate.helpers import paper_testbed

DOC = 8000
QUESTION = 100
KV_TOKENS = 9000


def two_documents(pairs: int, gap: float = 20.0) -> RequestTrace:
    """Questions alternating between documents A and B (8,000 shared tokens each, 100 new
    tokens per question, one output token), ``gap`` seconds apart: every request has finished
    before the next arrives (a 8,100-token prefill of Llama-3.1-70B at TP 8 takes well under a
    second on the paper's testbed), so every replica is idle at each arrival."""
    n = 2 * pairs
    w = Workload.from_columns([QUESTION] * n, [DOC] * n, output_tokens=[1] * n,
                              arrival_time=[gap * i for i in range(n)],
                              group_id=["A", "B"] * pairs)
    return requests_from_workload(w, "docqa")


def test_old_rule_imbalance_reproduced_and_spread() -> None:
    """Hand derivation, two replicas of 9,000 KV tokens, A, B, A, B, ... (4 of each):

    Old rule (host hits counted as affinity, ties to replica 0): A1 finds no cache anywhere,
    least-loaded, both idle: replica 0. B1: no cache of B anywhere, both idle: replica 0. B1's
    8,100 prompt tokens need room: 900 are free, and A1's cached blocks (512-token blocks, the
    trace's, then 320 to the document's end and the 100-token question) go last block first:
    100 + 320 + 13 x 512 = 6,976 < 7,200 <= 100 + 320 + 14 x 512 = 7,588, so only A's first
    512-token block stays; A1's blocks were written back to host DRAM. A2: replica 0 holds A's
    document in HBM (512) and host DRAM (the rest: 8,000 - 512 = 7,488; the question is new),
    8,000 >= half the prompt: replica 0. Every later request likewise: 8 to replica 0, none
    to replica 1 -- the same run as one replica alone, whose A and B questions after the first
    two load their document from host DRAM.

    New rule (HBM prefix only, ties to the least recently chosen): A1 to replica 0 (neither
    chosen yet: the lower index); B1: no HBM prefix anywhere, equal loads, equal cached prefix
    (none), replica 1 never chosen: replica 1. A2: replica 0 holds all of A's 8,000 document
    tokens in HBM (its question's 100 are new), 8,000 > 0.5 x 8,100: replica 0; B2 likewise to
    replica 1. Counts 4 and 4, and every question after the first of its document hits HBM for
    8,000 tokens and loads nothing."""
    trace = two_documents(4)
    dep = paper_testbed()
    new = simulate(trace, [dep, dep], SimSettings(router="prefix-affinity",
                                                  kv_tokens=KV_TOKENS))
    replica = new.requests["replica"]
    assert replica.tolist() == [0, 1] * 4
    assert [r["requests"] for r in new.summary["per_replica"]] == [4, 4]
    assert new.requests["hbm_hit"].tolist() == [0, 0] + [DOC] * 6
    assert new.requests["host_hit"].tolist() == [0] * 8

    # the old rule's run: everything on replica 0, as one replica serves it alone
    alone = simulate(trace, [dep], SimSettings(kv_tokens=KV_TOKENS))
    assert alone.requests["hbm_hit"].tolist() == [0, 0] + [512] * 6
    assert alone.requests["host_hit"].tolist() == [0, 0] + [DOC - 512] * 6
    assert alone.summary["replica_share_max"] == 1.0


def test_least_loaded_ties_go_round() -> None:
    """Three idle replicas at every arrival (requests 20 s apart, each done in well under a
    second): the old tie rule sent all six to replica 0; least recently chosen gives 0, 1, 2, 0,
    1, 2 (hand derivation: each choice makes that replica the most recent)."""
    trace = two_documents(3)
    dep = paper_testbed()
    result = simulate(trace, [dep] * 3, SimSettings(router="least-loaded"))
    assert result.requests["replica"].tolist() == [0, 1, 2, 0, 1, 2]
    assert result.summary["replica_imbalance"] == 1.0


def test_simultaneous_arrivals_alternate() -> None:
    """All 40 questions on document A arrive at once on two replicas. A1 goes to replica 0; the
    rest arrive in the same instant, before A1's prefill, so no replica holds A in HBM yet: the
    rule is least-loaded with ties to the least recently chosen, alternating 1, 0, 1, ...: 20
    each (hand derivation)."""
    n = 40
    w = Workload.from_columns([QUESTION] * n, [DOC] * n, output_tokens=[1] * n,
                              arrival_time=[0.0] * n, group_id=["A"] * n)
    trace = requests_from_workload(w, "docqa")
    result = simulate(trace, [paper_testbed()] * 2, SimSettings(router="prefix-affinity"))
    counts = np.bincount(result.requests["replica"], minlength=2)
    assert counts.tolist() == [20, 20]


def test_affinity_holds_until_the_balance_threshold() -> None:
    """A1 alone at t = 0 leaves document A in replica 0's HBM; 60 more questions on A arrive
    together at t = 10 s (nothing finishes in that instant). Hand derivation with SGLang's
    thresholds (imbalanced when busiest - idlest > 32 and busiest > 1.1 x idlest): replica 0
    holds 8,000 of 8,100 tokens in HBM, so it takes requests until its 33 outstanding against 0
    are out of balance; the 34th goes to replica 1 (least-loaded); at 33 against 1 the spread
    is 32, balanced again: replica 0; at 34 against 1 replica 1 again, and so on alternating.
    The 60: 33 to replica 0, then 27 alternating from replica 1: 14 to replica 1 and 13 to
    replica 0. In all replica 0 serves 1 + 33 + 13 = 47 and replica 1 14."""
    n = 61
    w = Workload.from_columns([QUESTION] * n, [DOC] * n, output_tokens=[1] * n,
                              arrival_time=[0.0] + [10.0] * (n - 1), group_id=["A"] * n)
    trace = requests_from_workload(w, "docqa")
    result = simulate(trace, [paper_testbed()] * 2, SimSettings(router="prefix-affinity"))
    replica = result.requests["replica"]
    assert replica[:34].tolist() == [0] * 34
    assert replica[34:].tolist() == [1, 0] * 13 + [1]
    assert [r["requests"] for r in result.summary["per_replica"]] == [47, 14]

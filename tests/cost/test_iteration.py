"""One serving iteration: against ttft for a one-request batch, and by hand for decodes."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.cost.deployment import deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.iteration import iteration_cost
from kvroof.cost.timing import compute_breakdown, compute_time
from kvroof.cost.weights import weights_read_per_rank
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
DEP = deployment("qwen3-235b-a22b", system="dgx-h100", registry=REG, tp=8)


def test_one_prefill_equals_the_request_alone() -> None:
    for t, k in ((128, 0), (64, 65536), (4096, 1000)):
        cost = iteration_cost(DEP, [t], [k])
        assert cost.time == pytest.approx(float(compute_time(DEP, t, k)), rel=1e-12)
        assert cost.tokens == t and cost.decode_tokens == 0


def test_decode_only_by_hand() -> None:
    """64 decodes at contexts 1000..64000: FLOPs = sum of one-token prefills (absorbed MLA,
    logits each); HBM = weights touched by 64 tokens + the KV of each context + its new token,
    a quarter per rank; the iteration is HBM-bound (decode)."""
    contexts = np.linspace(1000, 64000, 64)
    cost = iteration_cost(DEP, decode_context=contexts)
    model = REG.model("qwen3-235b-a22b")
    flops = float(np.sum(prefill_flops(model, 1.0, contexts, "absorbed").total))
    kv = float(np.sum((contexts + 1) * 192512 / 4))
    hbm = (weights_read_per_rank(DEP, 64) + kv) / (3.35e12 * 0.8)
    assert cost.compute.flops == pytest.approx(flops, rel=1e-12)
    assert cost.compute.hbm_time == pytest.approx(hbm, rel=1e-12)
    assert cost.compute.limit == "hbm"
    assert cost.tokens == 64


def test_batching_shares_the_weight_read() -> None:
    """A prefill and 100 decodes in one iteration cost less than apart: the weights are read
    once for 612 tokens instead of once per forward pass."""
    together = iteration_cost(DEP, [512], [2048], np.full(100, 4000.0)).time
    apart = (iteration_cost(DEP, [512], [2048]).time
             + iteration_cost(DEP, decode_context=np.full(100, 4000.0)).time)
    assert together < apart


def test_only_final_chunks_compute_logits() -> None:
    whole = iteration_cost(DEP, [256, 256], [0, 256]).compute.flops
    chunked = iteration_cost(DEP, [256, 256], [0, 256], prefill_final=[False, True]).compute.flops
    lm_head = 2 * 4096 * 151936
    assert whole - chunked == pytest.approx(lm_head)


def test_bad_iterations() -> None:
    with pytest.raises(KvroofError, match="at least one token"):
        iteration_cost(DEP)
    with pytest.raises(KvroofError, match="same length"):
        iteration_cost(DEP, [1, 2], [3])
    with pytest.raises(KvroofError, match="prefill_final: expected 1 flags"):
        iteration_cost(DEP, [1], [3], prefill_final=[True, False])
    with pytest.raises(KvroofError, match="decode_context: must not be negative"):
        iteration_cost(DEP, decode_context=[-1])
    # the breakdown of a lone prefill is the one ttft uses
    assert iteration_cost(DEP, [128], [0]).compute.flop_time == pytest.approx(
        float(compute_breakdown(DEP, 128, 0).flop_time))

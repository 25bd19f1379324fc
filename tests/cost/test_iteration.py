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
# the hand derivation of a decode and the simulator's fast path (IterationModel) are the
# whole-model roofline's formulas, so those tests time compute with the roofline
ROOFLINE_DEP = deployment("qwen3-235b-a22b", system="dgx-h100", registry=REG, tp=8,
                          compute_model="roofline")


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
    cost = iteration_cost(ROOFLINE_DEP, decode_context=contexts)
    model = REG.model("qwen3-235b-a22b")
    flops = float(np.sum(prefill_flops(model, 1.0, contexts, "absorbed").total))
    kv = float(np.sum((contexts + 1) * 192512 / 4))
    hbm = (weights_read_per_rank(ROOFLINE_DEP, 64) + kv) / (3.35e12 * 0.8)
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


@pytest.mark.parametrize("model", ["qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b"])
def test_iteration_model_equals_iteration_cost(model: str) -> None:
    """The float twin accumulates the same FLOPs and KV reads and times them the same (with the
    roofline, the only compute model it has), on random batches (sliding-window gpt-oss needs
    the windowed context sum)."""
    from kvroof.cost.iteration import IterationModel

    dep = deployment(model, system="hgx-h200", registry=REG, tp=8, compute_model="roofline")
    fast = IterationModel(dep)
    rng = np.random.default_rng(0)
    for _ in range(20):
        chunks = rng.integers(1, 2048, size=rng.integers(0, 4)).astype(float)
        contexts = rng.integers(0, 50_000, size=chunks.size).astype(float)
        final = rng.random(chunks.size) < 0.5
        decodes = rng.integers(0, 100_000, size=rng.integers(1, 50)).astype(float)
        flops = kv = 0.0
        for t, k, f in zip(chunks, contexts, final, strict=True):
            a, b = fast.prefill_chunk(t, k, bool(f))
            flops, kv = flops + a, kv + b
        windowed = float(np.minimum(decodes + 1, fast.window).sum()) if fast.window else 0.0
        a, b = fast.decode_batch(decodes.size, float(decodes.sum()), windowed)
        flops, kv = flops + a, kv + b
        slow = iteration_cost(dep, chunks, contexts, decodes, prefill_final=final)
        tokens = float(chunks.sum()) + decodes.size
        assert flops == pytest.approx(slow.compute.flops, rel=1e-12)
        assert kv == pytest.approx(float(slow.compute.hbm_bytes - slow.compute.weight_bytes),
                                   rel=1e-12)
        assert fast.time(tokens, flops, kv) == pytest.approx(slow.time, rel=1e-12)
        assert sum(fast.breakdown(tokens, flops, kv)) > 0


def test_iteration_model_link_times() -> None:
    """load_time is the request's transfer with nothing to save; save_time the write-back of
    new tokens with nothing to load."""
    from kvroof.cost.iteration import IterationModel
    from kvroof.cost.transfer import transfer_time

    fast = IterationModel(DEP)
    assert fast.load_time(65536) == pytest.approx(float(transfer_time(DEP, 65536, 0)))
    assert fast.save_time(512) == pytest.approx(float(transfer_time(DEP, 0, 512)))
    assert fast.load_time(0) == 0.0 and fast.save_time(0) == 0.0

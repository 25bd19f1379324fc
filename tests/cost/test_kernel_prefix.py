"""Kernel mode's attention over a cached prefix never falls as the prefix grows: the table's call
at ``S = K + T`` scaled by the new tokens' share of its (query, key) pairs is taken as the least
such time at this ``K`` or any larger one (kvroof.cost.kernel_prefix). Checked by brute force
over dense ``K`` grids for several models and accelerators (full attention, gpt-oss's sliding
window, DeepSeek-V3's MLA, which has no table), against an independent write-out of the rule
(tests/cost/padded_times.py: the least over densely sampled larger prefixes), and on the case
that exposed it (Qwen3-235B-A22B on one H100, T = 4: K = 1 took longer than K = 12)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.cost.compute import compute_breakdown, compute_time
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.forward_op import query_key_pairs
from kvroof.cost.kernel_model import kernel_model
from kvroof.cost.kernel_op_time import attention_seconds
from kvroof.cost.kernel_resolution import TimedOp
from kvroof.kernels.work import attention_pairs, attention_work
from kvroof.specs.registry import Registry
from tests.cost.padded_times import least_over_larger_prefixes, padded_curve

CASES = [
    ("llama-3.1-8b", {"accelerator": "h100"}),
    ("llama-3.1-8b", {"accelerator": "a100-sxm"}),
    ("qwen3-235b-a22b", {"accelerator": "h100"}),
    ("qwen3-235b-a22b", {"system": "dgx-h100", "tp": 8}),
    ("gpt-oss-120b", {"accelerator": "h100"}),          # sliding window of 128 every other layer
    ("deepseek-v3", {"system": "hgx-h200", "tp": 8}),   # MLA: no attention table (roofline)
]
NEW = (1.0, 4.0, 64.0, 1024.0)
# every K to 2,100, then ~0.5% steps to 2e6 (past every table's largest S of 16,384), and
# fractional K between
K = np.unique(np.concatenate([np.arange(0.0, 2100.0), np.arange(0.5, 300.0, 7.0),
                              np.geomspace(1.0, 2e6, 3000)]))


def _dep(registry: Registry, model: str, settings: dict[str, Any], **more: Any) -> Deployment:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some of these do not fit; compute is computed anyway
        return deployment(model, registry=registry, compute_model="kernels",
                          **settings, **more)


def _assert_non_decreasing(times: Any, where: object) -> None:
    times = np.asarray(times, dtype=np.float64)
    steps = np.diff(times)
    worst = int(np.argmin(steps / times[1:]))
    # rounding only: a window's new pairs, prefix(K + T) - prefix(K), lose ~1e-13 of their
    # value to cancellation at K ~ 2e6 (kvroof.cost.pairs), and the least follows them
    assert steps[worst] >= -1e-12 * times[worst + 1], (
        where, K[worst], K[worst + 1], times[worst], times[worst + 1])


@pytest.mark.parametrize(("model", "settings"), CASES)
def test_every_attention_call_is_non_decreasing_in_cached_tokens(
        registry: Registry, model: str, settings: dict[str, Any]) -> None:
    """Brute force: each attention op (table-timed or roofline), alone (with its per-call floor)
    and inside an iteration (without it), at about 5,100 prefixes for T = 1, 4, 64 and 1024; the
    float path agrees with the array path."""
    dep = _dep(registry, model, settings)
    km = kernel_model(dep)
    rates = km.rates(1.0)
    for top in km.sequence_ops:
        for t in NEW:
            for floor in (True, False):
                times = attention_seconds(top, np.full_like(K, t), K, rates, floor)
                _assert_non_decreasing(times, (top.op.label, top.model, t, floor))
                for i in (0, 1, 500, 2200, len(K) - 1):
                    scalar = attention_seconds(top, t, float(K[i]), rates, floor)
                    assert scalar == pytest.approx(times[i], rel=1e-12), (t, K[i], floor)


@pytest.mark.parametrize(("model", "settings"), CASES)
def test_prefill_compute_is_non_decreasing_in_cached_tokens(
        registry: Registry, model: str, settings: dict[str, Any]) -> None:
    """The whole prefill's compute (alone, and inside an 8,192-token iteration) at a fixed T
    never falls as K grows (only the request's attention depends on K)."""
    for busy in (None, 8192.0):
        dep = _dep(registry, model, settings, iteration_tokens=busy)
        for t in NEW:
            times = compute_time(dep, np.full_like(K, t), K)
            _assert_non_decreasing(times, (model, t, busy))


def test_qwen3_on_one_h100_at_four_new_tokens(registry: Registry) -> None:
    """The case that exposed the fall: Qwen3-235B-A22B on one H100, T = 4, inside an
    8,192-token iteration (no per-call floor). Before the rule its attention took 12.11 us a
    layer at K = 1 and 6.03 us at K = 12 (the launch-bound call's time barely grows from
    S = 5 to S = 16 while the new tokens' share of its pairs falls from 14/15 to 58/136); now
    K = 1 costs at most what K = 12 costs, and so does the whole prefill. Alone, the call's
    floor (the table's call of 4 tokens, 12.77 us a layer) holds it at every K here."""
    for busy in (8192.0, None):
        dep = _dep(registry, "qwen3-235b-a22b", {"accelerator": "h100"}, iteration_tokens=busy)

        def attention(k: float, dep: Deployment = dep) -> float:
            ops = compute_breakdown(dep, 4.0, k).ops  # type: ignore[attr-defined]
            return sum(float(op.seconds) for op in ops if op.timed.op.name == "attention")

        assert attention(1.0) <= attention(12.0), busy
        assert compute_time(dep, 4.0, 1.0) <= compute_time(dep, 4.0, 12.0), busy


def _independent_least(dep: Deployment, top: TimedOp, t: float, k: float) -> float:
    """The rule written out (tests/cost/padded_times.py) from kvroof.kernels' public lookups:
    the table's own call made non-decreasing in S (the padding rule; a window's edge is one of
    the sizes), scaled by the new tokens' share of its pairs, least over every larger prefix,
    and at least the call's own bytes at the table's bandwidth."""
    op = top.op
    acc = dep.accelerator
    system = kernels.tables(acc)
    peak, hbm = system.peak_flops["bf16"], system.hbm_bandwidth
    window = op.span if op.rule == "window" else 0.0
    assert op.kv_dtype is not None
    variant = system.tables["attention"].variants[0]
    points = [float(p) for p in variant.grid.points[variant.grid.axes.index("seq_len")]]
    if points[0] < window < points[-1]:
        points = sorted({*points, window})

    def roof(x: Any) -> Any:
        flops, size = attention_work(x, op.heads, op.kv_heads, op.head_dim, window, "bf16",
                                     op.kv_dtype)
        return np.maximum(flops / peak, size / hbm)

    seconds = []
    for x in points:
        shape = {"seq_len": x, "heads": op.heads, "kv_heads": op.kv_heads,
                 "head_dim": op.head_dim, "kv_dtype": op.kv_dtype, "window": window}
        eff, _ = kernels.efficiency(acc, "attention", "bf16", **shape)
        measured, _ = kernels.op_time(acc, "attention", "bf16", **shape)
        seconds.append(float(measured) * max(float(eff), 1.0))  # capped at the roofline
    table = padded_curve(seconds, roof, points)
    least = least_over_larger_prefixes(
        table, lambda s: attention_pairs(s, window),
        lambda tt, kk: query_key_pairs(op.rule, op.span, tt, kk), t, k, points)
    _, own_bytes = op.work(0.0, t, k)
    return max(least, own_bytes / hbm)


@pytest.mark.parametrize(("model", "settings"), [CASES[0], CASES[1], CASES[2], CASES[4]])
def test_prefix_time_is_the_least_over_larger_prefixes(
        registry: Registry, model: str, settings: dict[str, Any]) -> None:
    """Inside an iteration (no per-call floor) a table-timed attention call's time is the least
    scaled time over every prefix at least as long (the independent brute force above, sampled
    densely: it is an upper bound within ~1e-8 of the least, hence the tolerance)."""
    dep = _dep(registry, model, settings)
    km = kernel_model(dep)
    rates = km.rates(1.0)
    checked = 0
    for top in km.sequence_ops:
        if top.model != "kernels":
            continue
        for t in NEW:
            for k in (0.0, 1.0, 5.0, 100.0, 1000.0, 5000.0, 20000.0):
                got = attention_seconds(top, t, k, rates, False)
                want = _independent_least(dep, top, t, k)
                assert got == pytest.approx(want, rel=1e-7), (top.op.label, t, k)
                assert got <= want * (1 + 1e-12), (top.op.label, t, k)
                checked += 1
    assert checked >= 28


def test_a_chunked_layer_keeps_its_falling_work(registry: Registry) -> None:
    """A chunked layer's new tokens score fewer pairs once the prefix crosses a chunk boundary
    (T = 1: C keys at K = C - 1, one key at K = C), so its time is not made non-decreasing in K
    (the roofline falls there too): the rule is for full and sliding-window attention."""
    dep = _dep(registry, "llama-4-scout-17b-16e", {"accelerator": "h100", "tp": 8})
    km = kernel_model(dep)
    chunked = [top for top in km.sequence_ops if top.op.rule == "chunk"]
    assert chunked
    top = chunked[0]
    rates = km.rates(1.0)
    c = top.op.span
    before = attention_seconds(top, 1.0, c - 1.0, rates, False)
    after = attention_seconds(top, 1.0, c, rates, False)
    assert after < before

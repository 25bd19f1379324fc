"""Kernel mode counts every op once: Op.work is kvroof.kernels.work's counts (the ones the
tables' efficiencies are defined with) for every op kind and data type, the times are computed
from exactly those counts (so a breakdown's FLOPs and bytes are the ones its seconds came
from), and a table-timed op's time at a grid point is the measured latency."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.forward_op import ExpertsRead, Op, gemm_op
from kvroof.cost.kernel_model import kernel_model
from kvroof.cost.kernel_op_time import attention_seconds, gemm_seconds, moe_seconds
from kvroof.cost.kernel_resolution import Curve, TimedOp
from kvroof.cost.kernel_time import kernel_breakdown
from kvroof.cost.ops import forward_ops
from kvroof.kernels.interpolate import LogCurve
from kvroof.kernels.work import GEMM_DTYPES, MOE_DTYPES, attention_work, gemm_work, moe_work
from kvroof.specs.registry import Registry
from tests.cost.padded_times import padded

M = np.array([1.0, 7.0, 64.0, 1000.0, 8192.0])


def _dep(registry: Registry, model: str, accelerator: str, **settings: object) -> Deployment:
    return deployment(model, accelerator=accelerator, registry=registry,
                      compute_model="kernels", **settings)  # type: ignore[arg-type]


def _ops(registry: Registry, model: str, accelerator: str, **settings: object
         ) -> tuple[TimedOp, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops: tuple[TimedOp, ...] = kernel_model(_dep(registry, model, accelerator,
                                                     **settings)).ops
        return ops


def _find(ops: tuple[TimedOp, ...], label: str) -> TimedOp:
    return next(top for top in ops if top.op.label == label)


# --- Op.work is kvroof.kernels.work --------------------------------------------------------

@pytest.mark.parametrize("dtype", [*sorted(GEMM_DTYPES), None])
def test_gemm_op_counts_are_the_kernels(dtype: str | None) -> None:
    op = gemm_op("qkv", "full", 32, 12288.0, 4096.0, dtype, 4.0)
    flops, size = op.work(M)
    want_flops, want_size = gemm_work(M, 12288.0, 4096.0, dtype,
                                      weight_bytes=None if dtype else 4.0)
    np.testing.assert_array_equal(flops, want_flops)
    np.testing.assert_array_equal(size, want_size)
    a, w = ((GEMM_DTYPES[dtype].activation_bytes, GEMM_DTYPES[dtype].weight_bytes) if dtype
            else (2.0, 4.0))  # a table type's own bytes; else 16-bit activations
    np.testing.assert_array_equal(size, M * 4096 * a + 4096 * 12288 * w + 2 * M * 12288)
    for i, m in enumerate(M):
        assert op.work(float(m)) == (flops[i], size[i])


@pytest.mark.parametrize("dtype", [*sorted(MOE_DTYPES), None])
@pytest.mark.parametrize("read", ["bound", "expected"])
def test_moe_op_counts_are_the_kernels(dtype: str | None, read: ExpertsRead) -> None:
    op = Op(name="moe", kind="moe", group="moe", layers=48, scale="tokens", dtype=dtype,
            weight_bytes=0.7, hidden=4096.0, inter_per_rank=192.0, experts=128, top_k=8,
            experts_read=read)
    flops, size = op.work(M)
    w = MOE_DTYPES[dtype].weight_bytes if dtype else 0.7
    touched = (np.minimum(128.0, 8 * M) if read == "bound"
               else 128.0 * (1.0 - (1.0 - 8 / 128) ** M))
    np.testing.assert_array_equal(flops, 6 * M * 8 * 4096 * 192)
    np.testing.assert_allclose(size, touched * 3 * 4096 * 192 * w + 4 * M * 4096, rtol=1e-14)
    if read == "bound":
        want = moe_work(M, 4096.0, 192.0, 128.0, 8.0, dtype,
                        weight_bytes=None if dtype else 0.7)
        np.testing.assert_array_equal(size, want[1])
    for i, m in enumerate(M):
        f, b = op.work(float(m))
        assert type(b) is float and f == flops[i] and b == pytest.approx(size[i], rel=1e-15)


@pytest.mark.parametrize(("model", "tp", "kv_dtype"), [
    ("llama-3.1-8b", 1, "bf16"), ("llama-3.1-8b", 2, "fp8"), ("llama-3.1-8b", 1, "fp16"),
    ("gemma-3-27b", 2, "bf16"),  # sliding-window layers
])
def test_attention_op_without_a_prefix_is_the_kernels_call(registry: Registry, model: str,
                                                           tp: int, kv_dtype: str) -> None:
    s = np.array([1.0, 100.0, 1024.0, 5000.0])
    ops = [op for op in forward_ops(_dep(registry, model, "h100-sxm", tp=tp, kv_dtype=kv_dtype))
           if op.kind == "attention"]
    assert ops
    for op in ops:
        assert op.table and op.rule in ("full", "window") and op.kv_dtype is not None
        window = op.span if op.rule == "window" else 0.0
        flops, size = op.work(0.0, s, 0.0)
        want = attention_work(s, op.heads, op.kv_heads, op.head_dim, window, "bf16",
                              op.kv_dtype)
        np.testing.assert_allclose(flops, want[0], rtol=1e-15)
        np.testing.assert_allclose(size, want[1], rtol=1e-15)


# --- the times come from the same counts ---------------------------------------------------

@pytest.mark.parametrize(("model", "accelerator", "settings"), [
    ("llama-2-7b", "a100-sxm", {"weight_dtype": "fp8"}),   # fp8 GEMMs without a table
    ("llama-2-7b", "b200", {"weight_dtype": "nvfp4"}),     # nvfp4 GEMMs with one
    ("qwen3-30b-a3b", "a100-sxm", {}),                      # MoE without a balanced table
    ("qwen3-30b-a3b", "h100-sxm", {"weight_dtype": "fp8"}),
    ("llama-3.1-8b", "mi300x", {"compute_dtype": "fp8"}),  # no tables at all
    ("deepseek-v3", "b200", {"tp": 8}),
])
def test_breakdown_counts_are_what_its_seconds_came_from(
        registry: Registry, model: str, accelerator: str, settings: dict[str, object]) -> None:
    dep = _dep(registry, model, accelerator, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = kernel_model(dep)
        t = 64.0
        rows = {row.label: row for row in kernel_breakdown(dep, t, 0.0).ops}
    rates = km.rates(t)
    checked = 0
    for top in km.token_ops:
        if top.op.kind not in ("gemm", "moe"):
            continue
        flops, size = top.op.work(t)
        if top.curve is not None:  # the op's counts over the curve, padded (padded_times.py)
            curve, op = top.curve, top.op

            def roof(m: float, op: Op = op, timed: TimedOp = top) -> float:
                f, b = op.work(m)
                return float(max(f / timed.peak, b / timed.hbm))

            def at(m: float, op: Op = op, curve: LogCurve = curve) -> float:
                return roof(m, op) / min(curve(m), 1.0)

            want = padded(at, roof, [float(p) for p in np.exp(curve.log_points)], t)
        else:
            want = max(flops / rates.compute, size / rates.hbm)
        seconds = (gemm_seconds if top.op.kind == "gemm" else moe_seconds)(top, t, rates)
        assert seconds == pytest.approx(want, rel=1e-12)
        row = rows[top.op.label]
        assert (row.flops, row.bytes) == (top.op.layers * flops, top.op.layers * size)
        assert row.seconds == pytest.approx(top.op.layers * seconds, rel=1e-14)
        checked += 1
    assert checked


def test_fp8_gemm_fallback_counts_fp8_activations(registry: Registry) -> None:
    """Llama-2-7B on an A100 (no fp8 GEMM table) with fp8 weights: ``qkv`` at 64 tokens is a
    roofline over the fp8 kernel's counts, 1-byte activations and weights, and the breakdown
    shows the bytes its time came from."""
    dep = _dep(registry, "llama-2-7b", "a100-sxm", weight_dtype="fp8")
    km = kernel_model(dep)
    top = _find(km.ops, "full: qkv")
    assert top.model == "roofline" and top.op.dtype == "fp8"
    size = 64 * 4096 * 1 + 4096 * 12288 * 1 + 2 * 64 * 12288
    rates = km.rates(64.0)
    seconds = max(2 * 64 * 12288 * 4096 / rates.compute, size / rates.hbm)
    assert gemm_seconds(top, 64.0, rates) == pytest.approx(seconds, rel=1e-14)
    row = next(r for r in kernel_breakdown(dep, 64.0, 0.0).ops if r.label == "full: qkv")
    assert row.bytes == 32 * size
    assert row.seconds == pytest.approx(32 * seconds, rel=1e-14)


def test_moe_reads_the_tables_experts_only_when_a_table_times_it(registry: Registry) -> None:
    timed = _find(_ops(registry, "qwen3-30b-a3b", "h100-sxm"), "moe: moe")
    fallback = _find(_ops(registry, "qwen3-30b-a3b", "a100-sxm"), "moe: moe")
    assert (timed.model, timed.op.experts_read) == ("kernels", "bound")
    assert (fallback.model, fallback.op.experts_read) == ("roofline", "expected")
    assert isinstance(timed.curve, LogCurve) and Curve is LogCurve


# --- a table-timed op's time at a grid point is the measured time --------------------------

def test_times_at_grid_points_are_the_measured_latencies(registry: Registry) -> None:
    """The latencies of tests/kernels/test_lookup.py (copied from aiconfigurator's rows; stored
    efficiencies keep 4 digits): Llama-3.1-70B's ``o`` (m x 8192 x 8192) at TP 1, its
    attention at TP 8 (8 heads, 1 KV head), Qwen3-235B-A22B's MoE layer at TP 8, on H100."""
    ops = _ops(registry, "llama-3.1-70b", "h100-sxm", tp=1)
    rates = kernel_model(_dep(registry, "llama-3.1-70b", "h100-sxm", tp=1)).rates(64.0)
    o = _find(ops, "full: o")
    assert (o.op.n, o.op.k, o.model) == (8192.0, 8192.0, "kernels")
    assert gemm_seconds(o, 8192.0, rates) == pytest.approx(1.541708e-3, rel=1e-3)
    assert gemm_seconds(o, 64.0, rates) == pytest.approx(0.047361e-3, rel=1e-3)
    attention = _find(_ops(registry, "llama-3.1-70b", "h100-sxm", tp=8), "full: attention")
    assert (attention.op.heads, attention.op.kv_heads) == (8.0, 1.0)
    assert attention_seconds(attention, 8192.0, 0.0, rates) == pytest.approx(0.221435e-3,
                                                                             rel=1e-3)
    assert float(attention_seconds(attention, np.array([8192.0]), np.array([0.0]), rates)[0]) \
        == pytest.approx(0.221435e-3, rel=1e-3)
    moe = _find(_ops(registry, "qwen3-235b-a22b", "h100-sxm", tp=8), "moe: moe")
    assert moe_seconds(moe, 4096.0, rates) == pytest.approx(0.652624e-3, rel=1e-3)


@pytest.mark.parametrize(("model", "accelerator", "settings"), [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-8b", "h100-sxm", {"weight_dtype": "fp8", "kv_dtype": "fp8"}),
    ("deepseek-v3", "h100-sxm", {"tp": 8}),                # fp8_block
    ("qwen3-30b-a3b", "b200", {"weight_dtype": "nvfp4"}),
    ("gemma-3-27b", "b200", {"tp": 2}),                     # windowed attention
    ("gpt-oss-20b", "h100-sxm", {}),                        # MXFP4 experts
])
def test_table_timed_ops_are_the_tables_op_time(registry: Registry, model: str,
                                                accelerator: str,
                                                settings: dict[str, object]) -> None:
    """At every point of a table-timed op's curve its time is kvroof.kernels.op_time (the
    table's roofline over its efficiency, the measured time at a measured cell), or that time
    raised to the roofline where the stored efficiency exceeds 1 (kernel mode's cap), then the
    least of those at that size or any larger one (a kernel runs padded to more rows:
    tests/cost/padded_times.py; for a window, its edge is one of the sizes)."""
    dep = _dep(registry, model, accelerator, **settings)
    acc = dep.accelerator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = kernel_model(dep)
    rates = km.rates(1.0)
    kinds = set()
    for top in km.ops:
        if top.model != "kernels" or top.op.kind not in ("gemm", "moe", "attention"):
            continue
        assert top.curve is not None
        op = top.op
        points = np.exp(top.curve.log_points)
        window = op.span if op.kind == "attention" and op.rule == "window" else 0.0
        sizes = np.unique(np.append(points, window)) if points[0] < window < points[-1] \
            else points
        wants, got = [], {}
        for x in sizes:
            if op.kind == "gemm":
                assert op.dtype is not None
                seconds = gemm_seconds(top, float(x), rates)
                eff, _ = kernels.gemm_efficiency(acc, x, op.n, op.k, op.dtype)
                measured, _ = kernels.op_time(acc, "gemm", op.dtype, m=x, n=op.n, k=op.k)
            elif op.kind == "moe":
                assert op.dtype is not None
                seconds = moe_seconds(top, float(x), rates)
                shape = {"tokens": x, "hidden": int(op.hidden),
                         "inter_per_rank": op.inter_per_rank, "experts": op.experts,
                         "top_k": op.top_k, "distribution": dep.moe_routing}
                eff, _ = kernels.efficiency(acc, "moe", op.dtype, **shape)
                measured, _ = kernels.op_time(acc, "moe", op.dtype, **shape)
            else:
                assert op.kv_dtype is not None
                seconds = attention_seconds(top, float(x), 0.0, rates)
                shape = {"seq_len": x, "heads": op.heads, "kv_heads": op.kv_heads,
                         "head_dim": op.head_dim, "kv_dtype": op.kv_dtype,
                         "window": op.span if op.rule == "window" else 0.0}
                eff, _ = kernels.efficiency(acc, "attention", "bf16", **shape)
                measured, _ = kernels.op_time(acc, "attention", "bf16", **shape)
            wants.append(float(measured) * max(float(eff), 1.0))
            got[float(x)] = seconds
        least = [min(wants[i:]) for i in range(len(wants))]
        for x, want in zip(sizes, least, strict=True):
            if x in points:
                assert got[float(x)] == pytest.approx(want, rel=1e-9), (op.label, x)
        kinds.add(op.kind)
    assert kinds >= ({"gemm"} if model == "deepseek-v3" else {"gemm", "attention"})  # MLA

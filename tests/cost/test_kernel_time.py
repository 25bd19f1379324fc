"""Kernel mode (compute_model kernels): the op list of a forward pass, each op timed from the
measured kernel tables, checked against a brute-force loop over layers written here with the
public lookups of kvroof.kernels; one GEMM derived by hand at a grid point; the fallback said
per op; the default (roofline) untouched."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.cost.compute import compute_breakdown, compute_time
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.flop_terms import flop_terms, prefill_flops_total
from kvroof.cost.iteration import iteration_cost
from kvroof.cost.kernel_time import ELEMENTWISE_FLOOR, KernelBreakdown, kernel_model, uses_kernels
from kvroof.cost.ops import Op, forward_ops
from kvroof.cost.pairs import capped_pairs
from kvroof.cost.timing import ttft, ttft_batch
from kvroof.kernels.work import GEMM_DTYPES, MOE_DTYPES, attention_work, gemm_work, moe_work
from kvroof.specs.registry import Registry
from tests.cost.padded_times import padded, padded_allreduce, table_points


def _dep(registry: Registry, model: str, **settings: object) -> Deployment:
    settings.setdefault("compute_model", "kernels")
    return deployment(model, registry=registry, **settings)  # type: ignore[arg-type]


# --- the op list --------------------------------------------------------------------------

def _op_flops(op: Op, t: float, k: float) -> float:
    """FLOPs of all of ``op``'s calls on one rank, from its fields alone."""
    if op.kind == "gemm":
        m = {"tokens": t, "positions": k + t, "logits": 1.0}[op.scale]
        return op.layers * 2.0 * m * op.n * op.k
    if op.kind == "attention":
        if op.rule == "full":
            pairs = t * k + t * (t + 1) / 2
        else:
            pairs = capped_pairs("chunk" if op.rule == "chunk" else "window", op.span, t, k)
        return op.layers * op.flops_per_pair * pairs
    if op.kind == "moe":
        return op.layers * 6.0 * t * op.top_k * op.hidden * op.inter_per_rank
    if op.kind == "roofline":
        return op.layers * op.flops_per_token * t
    return 0.0


@pytest.mark.parametrize(("model", "tp", "mla"), [
    ("llama-3.1-8b", 2, "expanded"),        # GQA, TP <= KV heads
    ("qwen3-30b-a3b", 4, "expanded"),       # MoE: the router on every rank
    ("deepseek-v3", 8, "expanded"),         # MLA: q_a/kv_a on every rank, kv_b over K + T
    ("deepseek-v3", 8, "absorbed"),
    ("gemma-3-27b", 2, "expanded"),         # sliding-window layers
    ("qwen3-next-80b-a3b", 2, "expanded"),  # linear attention
])
def test_ops_add_up_to_the_prefill_flops(registry: Registry, model: str, tp: int,
                                          mla: str) -> None:
    """Summed over the ranks (an op every rank repeats counted once) the ops' FLOPs are the
    cost model's prefill FLOPs."""
    dep = _dep(registry, model, accelerator="h200", tp=tp, mla_mode=mla)
    terms = flop_terms(dep.model, dep.mla_mode)
    for t, k in ((128.0, 0.0), (512.0, 4096.0), (3.0, 70000.0)):
        total = sum(_op_flops(op, t, k) * (1 if op.replicated else tp) for op in forward_ops(dep))
        assert total == pytest.approx(float(prefill_flops_total(terms, t, k)), rel=1e-9)


def test_work_every_rank_repeats_is_counted_per_rank(registry: Registry) -> None:
    """MLA's down-projections and the router run whole on every rank; GQA KV heads are
    duplicated once TP exceeds their count (Qwen3-235B-A22B: 4 KV heads, TP 8)."""
    ops = {op.label: op for op in forward_ops(_dep(registry, "deepseek-v3", accelerator="h200",
                                                   tp=8))}
    qkv_a = ops["full: qkv_a"]
    assert qkv_a.replicated and qkv_a.n == 1536 + 512 + 64 and qkv_a.k == 7168
    assert ops["moe: router"].replicated and ops["moe: router"].n == 256
    assert not ops["full: q_b"].replicated and ops["full: q_b"].n == 128 / 8 * 192
    qwen = {op.label: op for op in forward_ops(_dep(registry, "qwen3-235b-a22b",
                                                    accelerator="h100", tp=8))}
    assert qwen["full: qkv"].n == 64 / 8 * 128 + 2 * 1 * 128  # one KV head per rank, not 0.5
    assert qwen["full: attention"].kv_heads == 1 and qwen["full: attention"].heads == 8


def test_fp8_and_fp4_checkpoints_use_their_gemm_tables(registry: Registry) -> None:
    """DeepSeek-V3's FP8 checkpoint (128 x 128 blocks) is priced at the fp8_block GEMM table,
    gpt-oss's MXFP4 experts at the MXFP4 MoE table, an FP8 weight_dtype at per-tensor fp8."""
    model = kernel_model(_dep(registry, "deepseek-v3", system="hgx-h200", tp=8))
    gemms = {top.op.label: top for top in model.ops}
    assert gemms["full: q_b"].op.dtype == "fp8_block"
    assert gemms["full: q_b"].model == "kernels"
    assert "fp8" in gemms["full: q_b"].source.lower() or "Fp8" in gemms["full: q_b"].source
    assert gemms["moe: moe"].op.dtype == "fp8_block" and gemms["moe: moe"].model == "kernels"
    oss = {top.op.label: top for top in kernel_model(_dep(registry, "gpt-oss-120b",
                                                          accelerator="h100")).ops}
    assert oss["moe: moe"].op.dtype == "w4a16_mxfp4" and oss["moe: moe"].model == "kernels"
    assert "mxfp4" in oss["moe: moe"].source
    llama = forward_ops(_dep(registry, "llama-2-7b", accelerator="h100", weight_dtype="fp8",
                             compute_dtype="fp8"))
    assert {op.dtype for op in llama if op.name in ("qkv", "o", "gate_up", "down")} == {"fp8"}


# --- one GEMM by hand ---------------------------------------------------------------------

def test_one_gemm_is_its_roofline_over_the_table_efficiency(registry: Registry) -> None:
    """Llama-3.1-8B's QKV projection on an H100 SXM at T = 1024: a GEMM of m = 1024, n = 32 x
    128 + 2 x 8 x 128 = 6144, k = 4096, a point of the measured grid. Its time is the roofline
    (FLOP-bound: 2 m n k / 989.4 TFLOP/s) over the efficiency stored at that grid point."""
    dep = _dep(registry, "llama-3.1-8b", accelerator="h100")
    table = kernels.tables("h100-sxm").tables["gemm"]
    variant = next(v for v in table.variants if v.key == {"dtype": "bf16"})
    grid = variant.grid
    index = tuple(int(np.flatnonzero(points == value)[0])
                  for points, value in zip(grid.points, (1024.0, 6144.0, 4096.0), strict=True))
    efficiency = float(grid.values[index])
    assert grid.measured[index]
    flops = 2 * 1024 * 6144 * 4096
    size = 1024 * 4096 * 2 + 4096 * 6144 * 2 + 2 * 1024 * 6144
    assert flops / 989.4e12 > size / 3.35e12  # FLOP-bound
    by_hand = flops / 989.4e12 / min(efficiency, 1.0)
    ops = {op.label: op for op in compute_breakdown(dep, 1024, 0).ops}  # type: ignore[attr-defined]
    assert float(ops["full: qkv"].seconds) == pytest.approx(32 * by_hand, rel=1e-12)
    looked_up, _ = kernels.op_time("h100", "gemm", m=1024, n=6144, k=4096)
    assert by_hand == pytest.approx(float(looked_up), rel=1e-12)


# --- every op, layer by layer ---------------------------------------------------------------

def _capped(eff: float) -> float:
    return min(eff, 1.0)


def _brute_force(dep: Deployment, t: float, k: float) -> float:
    """A prefill alone, op by op and layer by layer, with kvroof.kernels' public lookups; each
    table-timed op made non-decreasing in its size by the padding rule written out in
    tests/cost/padded_times.py."""
    acc = dep.accelerator
    system = kernels.tables(acc)
    hbm = system.hbm_bandwidth
    model = dep.model
    d = model.hidden_size
    tp = dep.tp
    att = model.attention
    h, kv, dh = att.num_heads // tp, max(att.num_kv_heads // tp, 1), att.head_dim  # type: ignore[union-attr]
    peak = system.peak_flops["bf16"]

    def gemm_at(m: float, n: float, kk: float) -> float:
        eff, _ = kernels.gemm_efficiency(acc, m, n, kk)
        return gemm_roof(m, n, kk) / _capped(float(eff))

    def gemm_roof(m: float, n: float, kk: float) -> float:
        flops, size = gemm_work(m, n, kk)
        return float(max(flops / peak, size / hbm))

    def gemm(m: float, n: float, kk: float) -> float:  # made non-decreasing in m (padded)
        return padded(lambda x: gemm_at(x, n, kk), lambda x: gemm_roof(x, n, kk),
                      table_points(acc, "gemm", "m"), m)

    def attention_roof(s: float) -> float:
        flops, size = attention_work(s, h, kv, dh)
        return float(max(flops / peak, size / hbm))

    def attention_at(s: float) -> float:
        eff, _ = kernels.attention_efficiency(acc, s, h, kv, dh)
        return attention_roof(s) / _capped(float(eff))

    def attention(s: float) -> float:  # made non-decreasing in S (padded)
        return padded(attention_at, attention_roof, table_points(acc, "attention", "seq_len"),
                      s)

    def elementwise(size: float) -> float:
        return size / (hbm * float(dep.resolved_hbm_efficiency)) + ELEMENTWISE_FLOOR

    def allreduce() -> float:  # made non-decreasing in the message size (padded)
        def at(size: float) -> float:
            return float(kernels.allreduce_time(acc, "vllm_graph", tp, size)[0])

        return padded_allreduce(at, table_points(acc, "allreduce", "message_bytes"), t * d * 2)

    total = 0.0
    for layer in range(model.num_layers):
        total += elementwise(8 * d * t)                                   # input norm
        total += gemm(t, h * dh + 2 * kv * dh, d)                         # qkv
        if getattr(att, "qk_norm", False):
            total += elementwise(4 * (h + kv) * dh * t)
        total += elementwise(4 * (h + kv) * dh * t)                       # rope
        total += elementwise(2 * kv * dh * 4 * t)                         # kv write (bf16)
        pairs = t * k + t * (t + 1) / 2
        s = t + k
        own = 4 * h * dh * pairs / peak, (4 * h * dh * t + 4 * kv * dh * s) / hbm
        total += max(attention(s) * pairs / (s * (s + 1) / 2), attention(t), *own)
        total += gemm(t, d, h * dh)                                       # o
        total += elementwise(8 * d * t)                                   # post-attention norm
        ffn = model.ffn
        if ffn.kind == "moe":
            total += gemm(t, ffn.num_experts, d)                          # router (every rank)
            inter, experts, top_k = (ffn.expert_intermediate_size / tp, ffn.num_experts,
                                     ffn.experts_per_token)

            shape = (inter, experts, top_k)

            def moe_roof(m: float, shape: tuple[float, int, int] = shape) -> float:
                flops, size = moe_work(m, d, *shape)
                return float(max(flops / peak, size / hbm))

            def moe_at(m: float, shape: tuple[float, int, int] = shape) -> float:
                eff, _ = kernels.moe_efficiency(acc, m, d, *shape)
                return moe_roof(m, shape) / _capped(float(eff))

            total += padded(moe_at, moe_roof, table_points(acc, "moe", "tokens"), t)
        else:
            width = ffn.intermediate_size / tp
            total += gemm(t, 2 * width, d) + elementwise(6 * width * t) + gemm(t, d, width)
        if tp > 1:
            total += 2 * allreduce()
        del layer
    if tp > 1:
        total += allreduce()                                              # embedding
    total += elementwise(8 * d * t)                                       # final norm
    total += gemm(1, model.vocab_size / tp, d)                            # LM head
    return total


@pytest.mark.parametrize(("model", "acc", "tp"), [
    ("qwen3-0.6b", "h100", 2),
    ("llama-3.2-1b", "a100-sxm", 1),
    ("qwen3-30b-a3b", "h200", 4),
])
@pytest.mark.parametrize(("t", "k"), [(128.0, 0.0), (700.0, 3000.0), (5.0, 20000.0)])
def test_per_op_sum_equals_a_layer_by_layer_loop(registry: Registry, model: str, acc: str,
                                                 tp: int, t: float, k: float) -> None:
    dep = _dep(registry, model, accelerator=acc, tp=tp)
    expected = _brute_force(dep, t, k)
    assert compute_time(dep, t, k) == pytest.approx(expected, rel=1e-9)
    parts = compute_breakdown(dep, t, k)
    assert isinstance(parts, KernelBreakdown)
    assert sum(float(op.seconds) for op in parts.ops) == pytest.approx(expected, rel=1e-9)
    assert float(parts.total) == pytest.approx(expected, rel=1e-9)
    assert float(parts.flop_time + parts.hbm_time + parts.comm_time) == pytest.approx(expected)


def test_grid_equals_scalars(registry: Registry) -> None:
    """A (T, K) grid is one vectorized pass with the same numbers as each point alone, in both
    regimes."""
    for busy in (None, 8192):
        dep = _dep(registry, "qwen3-235b-a22b", system="dgx-h100", tp=8, iteration_tokens=busy)
        t = np.array([1.0, 64.0, 700.0, 8192.0])
        k = np.array([0.0, 1.0, 5000.0, 70000.0, 1e6])
        grid = compute_time(dep, t[:, None], k[None, :])
        for i, tt in enumerate(t):
            for j, kk in enumerate(k):
                assert grid[i, j] == pytest.approx(compute_time(dep, float(tt), float(kk)),
                                                   rel=1e-12)


def test_attention_keeps_its_per_call_floor_and_never_beats_its_roofline(
        registry: Registry) -> None:
    """Alone, attention over T new tokens costs at least the table's call of T tokens (FA3
    takes >= 10 us a call at short sequences), and with a long cached prefix at least its own
    roofline at peak (reading the cached keys and values)."""
    dep = _dep(registry, "qwen3-235b-a22b", accelerator="h100", tp=8)
    op = next(top for top in kernel_model(dep).ops if top.op.label == "full: attention")
    per_call = {}
    for k in (0.0, 100.0, 1e6):
        rows = {row.label: row for row in compute_breakdown(dep, 16, k).ops}  # type: ignore[attr-defined]
        per_call[k] = float(rows["full: attention"].seconds) / op.op.layers
    table, _ = kernels.op_time("h100", "attention", seq_len=16, heads=8, kv_heads=1,
                               head_dim=128)
    assert per_call[0.0] == pytest.approx(float(table), rel=1e-12)
    assert per_call[0.0] >= 10e-6 and per_call[100.0] >= per_call[0.0]
    kv_read = (1e6 + 16) * 2 * 1 * 128 * 2 / 3.35e12
    assert per_call[1e6] >= kv_read


def test_moe_layer_and_allreduce_are_the_measured_ones(registry: Registry) -> None:
    """Qwen3-235B-A22B at TP 8 on an H100: the fused MoE layer at 4,096 tokens takes the
    table's 0.65 ms (about 24% of the bf16 peak), skewed routing is an option, and the
    all-reduce of 64 tokens (512 KiB) is vLLM's graph-captured 12 us, not 39 us + bandwidth."""
    dep = _dep(registry, "qwen3-235b-a22b", accelerator="h100", tp=8)
    rows = {row.label: row for row in compute_breakdown(dep, 4096, 0).ops}  # type: ignore[attr-defined]
    moe = float(rows["moe: moe"].seconds) / 94
    table, _ = kernels.op_time("h100", "moe", tokens=4096, hidden=4096, inter_per_rank=192,
                               experts=128, top_k=8)
    assert moe == pytest.approx(float(table), rel=1e-12)
    assert 0.6e-3 < moe < 0.7e-3
    skewed = dataclasses.replace(dep, moe_routing="power_law_1.01")
    rows_skewed = {row.label: row for row in compute_breakdown(skewed, 4096, 0).ops}  # type: ignore[attr-defined]
    assert float(rows_skewed["moe: moe"].seconds) > float(rows["moe: moe"].seconds)
    rows64 = {row.label: row for row in compute_breakdown(dep, 64, 0).ops}  # type: ignore[attr-defined]
    each = float(rows64["layers: allreduce"].seconds) / (2 * 94)
    measured, _ = kernels.allreduce_time("h100", "vllm_graph", 8, 64 * 4096 * 2)
    assert each == pytest.approx(float(measured), rel=1e-12)
    assert 10e-6 < each < 14e-6
    assert "vllm 0.24.0" in rows64["layers: allreduce"].source


def test_a_throttled_card_is_not_priced_at_its_datasheet_peak(registry: Registry) -> None:
    """The L40S has no achievable-compute figure (the roofline prices it at 100% of its peak);
    its measured GEMMs reach well under that."""
    dep = _dep(registry, "llama-3.1-8b", accelerator="l40s")
    rows = {row.label: row for row in compute_breakdown(dep, 4096, 0).ops}  # type: ignore[attr-defined]
    gate_up = float(rows["dense: gate_up"].seconds) / 32
    at_peak = 2 * 4096 * 2 * 14336 * 4096 / dep.accelerator.peak_compute["bf16"]
    assert gate_up > 1.3 * at_peak


# --- fallback, regimes, defaults ------------------------------------------------------------

def test_each_op_says_which_model_timed_it(registry: Registry) -> None:
    deepseek = {row.label: row for row in compute_breakdown(
        _dep(registry, "deepseek-v3", system="hgx-h200", tp=8), 512, 4096).ops}  # type: ignore[attr-defined]
    assert deepseek["full: attention"].model == "roofline"
    assert "MLA" in deepseek["full: attention"].notes[0]
    assert deepseek["full: kv_b"].model == "kernels"
    assert deepseek["full: input_norm"].model == "memory rule"
    h20 = compute_breakdown(_dep(registry, "qwen3-30b-a3b", accelerator="h20"), 512, 0)
    assert isinstance(h20, KernelBreakdown)
    table_ops = [row for row in h20.ops if row.kind in ("gemm", "attention", "moe")]
    assert table_ops and all(row.model == "roofline" for row in table_ops)
    assert any("no gemm table for h20" in note for row in table_ops for note in row.notes)
    a100 = {row.label: row for row in compute_breakdown(
        _dep(registry, "llama-2-7b", accelerator="a100-sxm", weight_dtype="fp8"), 512, 0).ops}  # type: ignore[attr-defined]
    assert a100["full: qkv"].model == "roofline" and "fp8" in a100["full: qkv"].notes[0]
    long = {row.label: row for row in compute_breakdown(
        _dep(registry, "llama-3.1-8b", accelerator="h100"), 512, 40000).ops}  # type: ignore[attr-defined]
    assert any("above the table's 16384" in note for note in long["full: attention"].notes)


def test_auto_uses_kernels_only_where_tables_exist(registry: Registry) -> None:
    h100 = _dep(registry, "llama-3.1-8b", accelerator="h100", compute_model="auto")
    h20 = _dep(registry, "llama-3.1-8b", accelerator="h20", compute_model="auto")
    assert uses_kernels(h100) and not uses_kernels(h20)
    roofline = dataclasses.replace(h20, compute_model="roofline")
    assert compute_time(h20, 512, 1000) == compute_time(roofline, 512, 1000)


def test_default_is_auto_and_picks_the_tables_where_they_cover(registry: Registry) -> None:
    """The default deployment's compute model is ``auto``: on a covered accelerator (H100) its
    compute and TTFT are kernel mode's to the bit and say so; the roofline is one setting away
    and differs."""
    default = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=registry)
    assert default.compute_model == "auto" and default.ttft_clock == "kernel"
    explicit = dataclasses.replace(default, compute_model="kernels")
    t = np.array([1.0, 64.0, 4096.0])[:, None]
    k = np.array([0.0, 1000.0, 1e6])[None, :]
    for a, b in ((ttft(default, t, k), ttft(explicit, t, k)),
                 (ttft(default, 512, 8192), ttft(explicit, 512, 8192))):
        assert np.array_equal(a.ttft, b.ttft) and np.array_equal(a.compute, b.compute)
        assert a.compute_model == "kernels" and a.clock == "kernel"
    assert isinstance(compute_breakdown(default, 512, 8192), KernelBreakdown)
    roofline = dataclasses.replace(default, compute_model="roofline")
    assert ttft(roofline, 512, 8192).compute_model == "roofline"
    assert ttft(roofline, 512, 8192).ttft != ttft(default, 512, 8192).ttft
    assert not isinstance(compute_breakdown(roofline, 512, 8192), KernelBreakdown)


def test_busy_regime_shares_the_per_token_ops(registry: Registry) -> None:
    """Inside an iteration of N tokens the request pays T/N of the per-token ops at N tokens;
    its attention is its own (without the per-call floor, which the iteration shares)."""
    alone = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4)
    busy = dataclasses.replace(alone, iteration_tokens=8192)
    model = kernel_model(busy)
    rates = model.rates(512.0)
    shared = 512 / 8192 * (model.token_time(8192.0, rates) + model.logits_time(1.0, rates))
    own = model.sequence_time(512.0, 4096.0, rates, floor=False)
    assert compute_time(busy, 512, 4096) == pytest.approx(shared + own, rel=1e-12)
    assert compute_time(busy, 512, 4096) < compute_time(alone, 512, 4096)


def test_one_request_iteration_and_batch_equal_the_prefill(registry: Registry) -> None:
    dep = _dep(registry, "qwen3-30b-a3b", accelerator="h100", tp=2)
    alone = compute_time(dep, 700, 3000)
    assert iteration_cost(dep, [700], [3000]).time == pytest.approx(alone, rel=1e-12)
    assert float(ttft_batch(dep, [700], [3000]).compute) == pytest.approx(alone, rel=1e-12)
    mixed = iteration_cost(dep, [700, 300], [3000, 0], [1000, 2000, 4000])
    assert mixed.time > iteration_cost(dep, [700, 300], [3000, 0]).time
    assert mixed.compute.compute_model == "kernels"


def test_client_clock_adds_the_engines_serving_overheads(registry: Registry) -> None:
    """vLLM's profile carries the GPU-hit serving overhead measured by agentic-kvc: 31 ms and
    1.045 us a prompt token, and 0.45 ms of CPU time per engine iteration (one iteration for a
    request alone; engine_specs/vllm-0.12-offload.yaml), added only on the client-side clock."""
    kernel = deployment("qwen3-30b-a3b", accelerator="h20", engine="vllm-0.12-offload",
                        registry=registry)
    client = dataclasses.replace(kernel, ttft_clock="client")
    a, b = ttft(kernel, 16, 1008), ttft(client, 16, 1008)
    assert a.clock == "kernel" and b.clock == "client" and a.serving == 0.0
    assert b.ttft - a.ttft == pytest.approx(31e-3 + 1.045e-6 * 1024 + 0.45e-3, rel=1e-12)
    assert b.exposed_transfer == pytest.approx(a.exposed_transfer, rel=1e-12)
    assert b.as_dict()["serving_overhead_s"] == pytest.approx(b.serving)
    grid = ttft(client, np.array([16.0, 512.0]), np.array([[1008.0], [65520.0]]))
    assert np.allclose(grid.ttft - ttft(kernel, np.array([16.0, 512.0]),
                                        np.array([[1008.0], [65520.0]])).ttft,
                       31e-3 + 0.45e-3 + 1.045e-6 * (np.array([16.0, 512.0])
                                                     + np.array([[1008.0], [65520.0]])))
    no_figures = deployment("llama-3.1-8b", accelerator="h100", engine="sglang-hicache",
                            ttft_clock="client", registry=registry)
    assert ttft(no_figures, 64, 4096).serving == 0.0


def test_elementwise_rule_and_constants(registry: Registry) -> None:
    dep = _dep(registry, "llama-3.1-8b", accelerator="h100")
    rows = {row.label: row for row in compute_breakdown(dep, 1, 0).ops}  # type: ignore[attr-defined]
    per_call = float(rows["model: final_norm"].seconds)
    assert per_call == pytest.approx(8 * 4096 / (3.35e12 * 0.8) + 3e-6, rel=1e-12)
    assert GEMM_DTYPES["bf16"].weight_bytes == 2 and MOE_DTYPES["bf16"].peak == "bf16"
    assert math.isclose(ELEMENTWISE_FLOOR, 3e-6)


def test_allreduce_backend_follows_the_engine(registry: Registry) -> None:
    """The engine profile names the measured all-reduce (SGLang's, TensorRT-LLM's; vLLM's by
    default); above ``allreduce_nccl_above`` NCCL's table answers."""
    models = {}
    for engine in (None, "sglang-hicache", "tensorrt-llm"):
        dep = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4, engine=engine)
        models[engine] = kernel_model(dep)
    assert models[None].backend == "vllm_graph"
    assert models["sglang-hicache"].backend == "sglang_graph"
    assert models["tensorrt-llm"].backend == "trtllm"
    engine = registry.engine("vllm-0.12-offload").model_copy(
        update={"allreduce_nccl_above": 8 * 2**20})
    dep = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4, engine=engine)
    for tokens, backend in ((512.0, "vllm_graph"), (4096.0, "nccl")):  # 16 KiB a token
        rows = {row.label: row for row in compute_breakdown(dep, tokens, 0).ops}  # type: ignore[attr-defined]
        each = float(rows["layers: allreduce"].seconds) / 160
        measured, _ = kernels.allreduce_time("h100", backend, 4, tokens * 8192 * 2)
        assert each == pytest.approx(float(measured), rel=1e-12)


def test_iteration_of_the_request_alone_keeps_the_per_call_floor(registry: Registry) -> None:
    """``iteration_tokens == T`` is the request alone (the roofline treats it so,
    tests/cost/test_physics.py): an iteration of only its own T tokens charges it the per-token
    ops at m = T, as alone, and its attention call's per-call floor. Expected value: the same
    deployment without iteration_tokens (the definition of the request alone)."""
    dep = _dep(registry, "qwen3-235b-a22b", system="dgx-h100", tp=8)
    t = np.array([16.0, 128.0, 1024.0])
    same = dataclasses.replace(dep, iteration_tokens=t)
    np.testing.assert_allclose(compute_time(same, t, 1000.0), compute_time(dep, t, 1000.0),
                               rtol=1e-12)
    one = dataclasses.replace(dep, iteration_tokens=16)
    assert compute_time(one, 16, 1000) == pytest.approx(compute_time(dep, 16, 1000), rel=1e-12)
    assert float(ttft_batch(one, [16], [1000]).compute) == pytest.approx(
        compute_time(dep, 16, 1000), rel=1e-12)


def _calibrated_h100() -> object:
    from kvroof.specs.hardware import Calibration
    from kvroof.specs.registry import Registry as _Registry

    system = _Registry(use_env=False).system("dgx-h100")
    return system.model_copy(update={"calibration": Calibration(
        compute_efficiency_max=0.6, compute_half_tokens=400, link_bandwidth=15e9,
        link_latency=2e-6)})


def test_a_compute_override_or_calibration_falls_back_to_the_roofline_under_auto(
        registry: Registry) -> None:
    """The kernel tables carry their own measured times, so a compute override, a compute
    efficiency or a system calibration cannot apply to them: under auto such a deployment is
    timed by the roofline (expected values: the same deployment with compute_model roofline),
    and the compute time follows the override (1e14 vs 1e15 FLOP/s: 2 x 70e9 x 4096 / 4 =
    1.4e14 FLOP a rank at T = 4096, 1.4 s vs 0.14 s, above the ~10 ms weight read, so ~10x
    apart)."""
    base = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4, compute_model="auto")
    assert base.uses_kernels
    for settings in ({"compute": 1e15}, {"compute_efficiency": 0.5},
                     {"system": _calibrated_h100()}):
        dep = dataclasses.replace(base, **settings)  # type: ignore[arg-type]
        assert not dep.uses_kernels, settings
        roofline = dataclasses.replace(dep, compute_model="roofline")
        assert compute_time(dep, 4096, 1000) == compute_time(roofline, 4096, 1000)
    slow = compute_time(dataclasses.replace(base, compute=1e14), 4096, 1000)
    fast = compute_time(dataclasses.replace(base, compute=1e15), 4096, 1000)
    assert 8 * fast < slow < 10 * fast


def test_a_compute_override_under_kernels_is_refused(registry: Registry) -> None:
    """Under explicit kernels an override the tables cannot honour is a one-line error naming
    the setting, never silently ignored."""
    from kvroof.errors import KvroofError

    base = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4)
    for field, value in (("compute", 1e15), ("compute_efficiency", 0.5),
                         ("system", _calibrated_h100())):
        with pytest.raises(KvroofError, match=f"^{field}: .*compute_model kernels"):
            dataclasses.replace(base, **{field: value})  # type: ignore[arg-type]


def test_transfer_bound_compute_in_kernel_mode(registry: Registry) -> None:
    """A peak FLOP/s is a roofline quantity: under auto the solve is the roofline's (expected:
    the same solve with compute_model roofline), under explicit kernels it is refused."""
    from kvroof.cost.thresholds import transfer_bound_compute
    from kvroof.errors import KvroofError

    auto = _dep(registry, "llama-3.1-70b", system="dgx-h100", tp=4, compute_model="auto")
    roofline = dataclasses.replace(auto, compute_model="roofline")
    got = transfer_bound_compute(auto, 2048, 100)
    assert np.isfinite(got.value)
    assert got.value == transfer_bound_compute(roofline, 2048, 100).value
    with pytest.raises(KvroofError, match="compute_model"):
        transfer_bound_compute(dataclasses.replace(auto, compute_model="kernels"), 2048, 100)

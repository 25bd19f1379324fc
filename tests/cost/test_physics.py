"""The physics corrections: weights that fit, what a rank stores, NUMA-aware host memory, the
regimes of the weight reads (a request alone, inside a busy iteration), collectives and the
hierarchical roofline; hand derivations written out in each test."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvroof.analysis.regimes import regime_curves
from kvroof.analysis.what_if import grace_host, standard_what_ifs, what_if_table
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.memory_fit import check_fit, fit_problem, memory_fit, valid_tp_degrees
from kvroof.cost.params import param_counts
from kvroof.cost.roofline import request_intensities
from kvroof.cost.timing import compute_breakdown, compute_time, ttft
from kvroof.cost.weights import weight_bytes_per_rank
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
QWEN = "qwen3-235b-a22b"


def on(system: str, model: str = QWEN, **settings: object) -> Deployment:
    return deployment(model, system=system, registry=REG, **settings)


# -- what a rank stores ------------------------------------------------------------------------
def test_deepseek_fp8_weights_by_hand() -> None:
    """DeepSeek-V3's checkpoint: linear layers in FP8 (1 B), embedding and LM head in bf16
    (2 B): 671.0B parameters - 2 x 0.927B + 2 x 2 x 0.927B = 672.9 GB on one GPU."""
    counts = param_counts(REG.model("deepseek-v3"))
    head = counts.embedding + counts.lm_head
    expected = (counts.total - head) * 1 + head * 2
    assert weight_bytes_per_rank(REG.model("deepseek-v3")).total == pytest.approx(expected)
    assert 672e9 < expected < 674e9
    # bf16 override: twice the linear part
    assert weight_bytes_per_rank(REG.model("deepseek-v3"), 1, "bf16").total == pytest.approx(
        (counts.total - head) * 2 + head * 2)


def test_gpt_oss_mxfp4_experts_by_hand() -> None:
    """gpt-oss-120b: routed experts in MXFP4 at 4.25 bits (OCP MX: 32 FP4 values + one 8-bit
    scale), everything else bf16."""
    counts = param_counts(REG.model("gpt-oss-120b"))
    experts = counts.routed_experts_total
    expected = experts * 4.25 / 8 + (counts.total - experts) * 2
    assert weight_bytes_per_rank(REG.model("gpt-oss-120b")).total == pytest.approx(expected)
    assert 60e9 < expected < 70e9  # the published checkpoint is about 65 GB


def test_tensor_parallel_sharding_by_hand() -> None:
    """Qwen3-235B at TP 8: query/output 2 x 4096 x 64 x 128 / 8 per layer, keys/values
    2 x 4096 x 4 x 128 / 4 (4 KV heads), QK norms whole; experts, LM head and embedding / 8;
    router and layer norms whole."""
    c = param_counts(REG.model(QWEN))
    per_layer = 2 * 4096 * 64 * 128 / 8 + 2 * 4096 * 4 * 128 / 4 + 2 * 128
    expected = 2 * (94 * per_layer + c.routed_experts_total / 8 + c.router + c.norms
                    + (c.embedding + c.lm_head) / 8)
    assert weight_bytes_per_rank(REG.model(QWEN), 8).total == pytest.approx(expected)


# -- fit ---------------------------------------------------------------------------------------
def test_fit_by_hand() -> None:
    """Needed = weights per rank + the KV of 8,192 tokens per rank; usable = HBM x 0.9."""
    dep = on("dgx-h100", tp=8)
    fit = memory_fit(dep)
    assert fit.kv_reserve == pytest.approx(8192 * 192512 / 4)
    assert fit.usable == pytest.approx(80e9 * 0.9)
    assert fit.fits and not fit_problem(dep)
    assert check_fit(dep) == fit


@pytest.mark.parametrize(("model", "where", "tp"), [
    ("deepseek-v3", "dgx-h100", 8),      # 85 GB of FP8 weights per GPU
    ("llama-3.1-405b", "dgx-h100", 8),   # 101 GB of bf16
    (QWEN, "gh200", 1),                  # 470 GB on one 96 GB GPU
    ("deepseek-v3", "gh200", 1),
])
def test_configurations_that_cannot_run(model: str, where: str, tp: int) -> None:
    dep = on(where, model, tp=tp)
    assert not memory_fit(dep).fits
    assert fit_problem(dep).startswith("does not fit")
    with pytest.raises(KvroofError) as info:
        check_fit(dep)
    assert "does not fit" in str(info.value) and "usable" in str(info.value)
    assert "\n" not in str(info.value)


def test_fit_suggests_what_would() -> None:
    with pytest.raises(KvroofError, match="fits with fp8 weights at TP 8"):
        check_fit(on("dgx-h100", "llama-3.1-405b", tp=8))
    with pytest.raises(KvroofError, match="nothing fits on the 1 GPUs of gh200"):
        check_fit(on("gh200"))
    assert not fit_problem(on("hgx-h200", "deepseek-v3", tp=8))  # 8 x 141 GB: it fits
    assert valid_tp_degrees(on("dgx-h100", tp=8)) == [1, 2, 4, 8]


def test_tp_must_divide_the_heads() -> None:
    """Qwen3-32B: 64 heads, 8 KV heads. TP 3 divides neither; TP 16 divides the heads and is a
    multiple of the KV heads."""
    with pytest.raises(KvroofError, match="tp: 3 does not divide the 64 attention heads"):
        deployment("qwen3-32b", accelerator="h100", registry=REG, tp=3)
    deployment("qwen3-32b", accelerator="h100", registry=REG, tp=16)
    # a model of 24 heads and 6 KV heads: TP 4 divides the heads but splits KV heads unevenly
    base = REG.model("qwen3-32b")
    odd = base.model_copy(update={"attention": base.attention.model_copy(
        update={"num_heads": 24, "num_kv_heads": 6})})
    with pytest.raises(KvroofError, match="tp: 4 neither divides nor is a multiple of the 6 KV"):
        deployment(odd, accelerator="h100", registry=REG, tp=4)
    deployment(odd, accelerator="h100", registry=REG, tp=12)  # a multiple of 6: heads replicate
    # 12 does not divide 64 heads: refused on the heads first
    with pytest.raises(KvroofError, match="does not divide the 64 attention heads"):
        deployment("qwen3-32b", accelerator="h100", registry=REG, tp=12)


# -- regimes -----------------------------------------------------------------------------------
def test_iteration_tokens_equal_t_is_the_request_alone() -> None:
    dep = on("dgx-h100", tp=8)
    t = np.array([16.0, 128.0, 1024.0])
    alone = kappa_crit(dep, t).kappa_crit
    same = kappa_crit(dataclasses.replace(dep, iteration_tokens=t), t).kappa_crit
    np.testing.assert_allclose(same, alone, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(t=st.integers(1, 4096), extra=st.floats(1.0, 1e4), factor=st.floats(1.01, 100.0),
       model=st.sampled_from([QWEN, "llama-3.1-70b", "qwen3-30b-a3b"]))
def test_kappa_falls_monotonically_with_iteration_tokens(
    t: int, extra: float, factor: float, model: str
) -> None:
    """More tokens sharing the weight read: the request's share of it falls, so its compute
    time and its kappa_crit cannot rise (the roofline's weight-read roof; the kernel tables'
    per-token time may rise slightly with the iteration's size)."""
    dep = on("dgx-h100", model, tp=8, compute_model="roofline")
    n = t + extra
    fewer = dataclasses.replace(dep, iteration_tokens=n)
    more = dataclasses.replace(dep, iteration_tokens=n * factor)
    assert compute_time(more, t, 1000) <= compute_time(fewer, t, 1000) * (1 + 1e-12)
    assert kappa_crit(more, t).kappa_crit <= kappa_crit(fewer, t).kappa_crit * (1 + 1e-9)


def test_bad_iteration_tokens() -> None:
    dep = on("dgx-h100", tp=8)
    with pytest.raises(KvroofError, match="iteration_tokens: 64 is fewer than the request's"):
        kappa_crit(dataclasses.replace(dep, iteration_tokens=64), 128)
    for bad, fragment in ((0, "must be positive"), (float("inf"), "must be finite"),
                          (float("nan"), "must be finite"), (-5, "must be positive")):
        with pytest.raises(KvroofError, match=f"iteration_tokens: {fragment}"):
            dataclasses.replace(dep, iteration_tokens=bad)


def test_regime_curves_meet_where_flops_take_over() -> None:
    """Above the meeting T the request alone is FLOP-bound at its crossover; below it, its
    weight reads bind. The busy regime is never above the alone one."""
    curves = regime_curves(on("dgx-h100", tp=8), 8192.0, points=120)
    assert np.isfinite(curves.meet_tokens) and 500 < curves.meet_tokens < 3000
    finite = np.isfinite(curves.alone) & np.isfinite(curves.busy)
    assert np.all(curves.busy[finite] <= curves.alone[finite] * (1 + 1e-9))
    low = curves.new_tokens < curves.meet_tokens / 10  # weights dominate a lone small prefill
    assert np.all(curves.alone[low & finite] > 3 * curves.busy[low & finite])


# -- what-ifs ----------------------------------------------------------------------------------
def test_grace_host_swaps_the_whole_host() -> None:
    """A DGX H100's GPUs on one Grace each: its LPDDR5X (307 GB/s STREAM, the GH200 480 GB
    SKU) and NVLink-C2C (450 GB/s peak) per GPU: 307 GB/s per GPU; on one Grace per two GPUs
    with the C2C shared: min(450 / 2, 307 / 2) = 153.5 GB/s at peak."""
    base = REG.system("dgx-h100")
    one = grace_host(base, REG.system("gh200"), 1)
    assert one.host_memory.sockets == 8 and one.host_link == "nvlink-c2c"
    dep = deployment(QWEN, system=one, registry=REG, tp=8)
    assert dep.effective_bandwidth == pytest.approx(307e9)
    two = grace_host(base, REG.system("gh200"), 2)
    assert deployment(QWEN, system=two, registry=REG, tp=8).effective_bandwidth == \
        pytest.approx(307e9 / 2)
    with pytest.raises(KvroofError, match="gpus_per_grace: 3 does not divide"):
        grace_host(base, REG.system("gh200"), 3)


def test_what_ifs_never_mix_a_fast_link_with_a_slow_host() -> None:
    dep = on("dgx-h100", tp=8, bandwidth_source="sustained")
    rows = {row.scenario: row for row in what_if_table(dep, 128, standard_what_ifs(REG))}
    assert rows["PCIe 6"].bound == "host DRAM"  # this host's DDR5 caps a Gen6 link
    assert rows["C2C, GH200-style"].bandwidth == pytest.approx(307e9)  # Grace STREAM
    assert rows["C2C, GB200-style"].bandwidth == pytest.approx(346e9 / 2)  # C2C sustained
    assert rows["HBM-class"].bound == "no host"
    assert rows["C2C, GH200-style"].kappa_full > rows["baseline"].kappa_full


# -- hierarchical roofline ---------------------------------------------------------------------
def test_request_intensities_by_hand() -> None:
    """FLOPs per GPU over HBM bytes per GPU and over link bytes per GPU; attainable FLOP/s =
    FLOPs per GPU / ideal-overlap TTFT."""
    dep = on("dgx-h100", tp=8)
    point = request_intensities(dep, 64, 6400)
    parts = compute_breakdown(dep, 64, 6400)
    assert point.hbm_intensity == pytest.approx(parts.flops / 8 / parts.hbm_bytes)
    link_bytes = 6400 * 192512 / 4 + 64 * 192512 / 4  # load + write-back, a quarter per rank
    assert point.link_intensity == pytest.approx(parts.flops / 8 / link_bytes)
    assert point.attainable_flops == pytest.approx(
        parts.flops / 8 / ttft(dep, 64, 6400, "ideal").ttft)

"""kappa_crit: the paper's tables (paper mode), hand-derived full-mode values, closed form vs
root finding vs brute force, properties, and the inverse solvers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvroof.analysis.paper import (
    BINARY_MEGA,
    MEASURED_BANDWIDTH,
    PAPER_COMPUTE,
    PAPER_KAPPA_CRIT,
    PAPER_MODELS,
    PAPER_WHAT_IFS,
    WHAT_IF_BANDWIDTH,
    WHAT_IF_COMPUTE,
    kappa_hw_table,
    kappa_m_table,
)
from kvroof.cost.deployment import Deployment, Granularity, deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.kappa import (
    kappa_crit,
    kappa_paper,
    kappa_paper_for,
    max_new_tokens_for_crossover,
    required_bandwidth,
    transfer_bound_compute,
)
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.timing import compute_breakdown, compute_time, ttft
from kvroof.cost.transfer import transfer_time
from kvroof.cost.weights import weights_read_per_rank
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
B_KV = {m.name: kv_bytes_per_token(REG.model(m.name)) for m in PAPER_MODELS}


def h100(model: str, **settings: object) -> Deployment:
    return deployment(model, accelerator="h100", registry=REG, **settings)


def h100_roofline(model: str, **settings: object) -> Deployment:
    """An H100 deployment timed by the whole-model roofline: the closed form, the hand
    derivations and the inverse solvers' formulas below are the roofline's."""
    return h100(model, compute_model="roofline", **settings)


# -- paper mode: the printed tables ---------------------------------------------------------
def test_kappa_m_table() -> None:
    """kappa_M = 2 N / B_kv within one unit of the last printed digit, except Llama-405B."""
    rows = {row.key: row for row in kappa_m_table(B_KV)}
    for name in ("llama-3.1-70b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"):
        assert rows[name].within_printing_precision, rows[name]
    # 405B: printed 1.42; 2 x 405e9 / 516,096 B = 1.569 (the paper's own worked example: 1.57).
    assert rows["llama-3.1-405b"].computed == pytest.approx(1.569e6, rel=1e-3)
    assert not rows["llama-3.1-405b"].within_printing_precision


def test_kappa_hw_table() -> None:
    """Stated inputs (32/64 GB/s, C 624/2000/5000 TFLOP/s) give values 3-6% below the printed
    ones (4.9% = 1 - 1/1.048576 before the printed rounding); BW x 1.048576 reproduces every
    printed value to one unit of its last digit."""
    for row in kappa_hw_table():
        assert 0.93 < row.computed / row.printed < 0.97, row
    assert all(row.within_printing_precision for row in kappa_hw_table(BINARY_MEGA))
    h100_pcie5 = {row.key: row for row in kappa_hw_table()}["h100+pcie5"]
    assert h100_pcie5.computed == pytest.approx(32e-6)  # the "32" of the text; printed 34


def test_kappa_crit_h100_pcie5() -> None:
    """14.3 and 7.8: the products of the printed, rounded factors 0.42 x 34 and 0.23 x 34.
    With exact kappa_M and the table's BW (64 x 1.048576 GB/s, C 2000 TFLOP/s): 14.33 and 7.67."""
    assert pytest.approx(PAPER_KAPPA_CRIT[("llama-3.1-70b", "h100-pcie5")], abs=0.05) == 0.42 * 34
    assert pytest.approx(PAPER_KAPPA_CRIT[("qwen3-235b-a22b", "h100-pcie5")],
                                      abs=0.05) == 0.23 * 34
    bw = 64e9 * BINARY_MEGA
    llama = kappa_paper(70e9, B_KV["llama-3.1-70b"], bw, PAPER_COMPUTE["h100"]).kappa_crit
    qwen = kappa_paper(22e9, B_KV["qwen3-235b-a22b"], bw, PAPER_COMPUTE["h100"]).kappa_crit
    assert llama == pytest.approx(14.3, abs=0.05)
    assert qwen == pytest.approx(7.67, abs=0.01)  # 1.7% below the printed 7.8 (rounding)


def test_kappa_crit_at_15_gbps() -> None:
    """~3.3 and ~1.8 (the paper scaled 14.3 and 7.8 by 15/64); the formula gives 3.20 and 1.71:
    within 10%, the precision of "~"."""
    llama = kappa_paper(70e9, B_KV["llama-3.1-70b"], MEASURED_BANDWIDTH, 2000e12).kappa_crit
    qwen = kappa_paper(22e9, B_KV["qwen3-235b-a22b"], MEASURED_BANDWIDTH, 2000e12).kappa_crit
    assert llama == pytest.approx(3.3, rel=0.1)
    assert qwen == pytest.approx(1.8, rel=0.1)
    assert pytest.approx(3.35, abs=0.01) == 14.3 * 15 / 64


def test_llama_405b_worked_example() -> None:
    """~50 on H100 + PCIe5, ~12 at 15 GB/s, with kappa_M 1.57 (not the printed 1.42)."""
    at_64 = kappa_paper(405e9, B_KV["llama-3.1-405b"], 64e9, 2000e12).kappa_crit
    at_15 = kappa_paper(405e9, B_KV["llama-3.1-405b"], 15e9, 2000e12).kappa_crit
    assert at_64 == pytest.approx(50, rel=0.05)
    assert at_15 == pytest.approx(12, rel=0.05)


@pytest.mark.parametrize(("key", "printed"), list(PAPER_WHAT_IFS.items()))
def test_hardware_what_ifs(key: tuple[str, str], printed: float) -> None:
    """41.5 / 191 (NVLink-C2C) and ~370 / ~1700 (on-package HBM) follow from the printed
    kappa_M (0.23, 1.06) with C = 5000 TFLOP/s and BW = 900 GB/s or 8 TB/s."""
    model, target = key
    printed_m = {"qwen3-235b-a22b": 0.23e6, "deepseek-v3": 1.06e6}[model]
    value = printed_m * WHAT_IF_BANDWIDTH[target] / WHAT_IF_COMPUTE
    assert value == pytest.approx(printed, rel=0.01)


def test_paper_mode_for_a_deployment() -> None:
    """Dense BF16 peak 989.4 TFLOP/s and 63 GB/s: kappa_HW = 63e9 / 989.4e12."""
    result = kappa_paper_for(h100("qwen3-235b-a22b"))
    assert result.kappa_model == pytest.approx(2 * 22e9 / 192512)
    assert result.kappa_hw == pytest.approx(63e9 / 989.4e12)


# -- full mode --------------------------------------------------------------------------------
def _isolated(model: str, **settings: object) -> Deployment:
    """A deployment with only the load and the two compute roofs of the whole-model roofline:
    no write-back, TP 1 unless given (no all-reduce), explicit efficiencies."""
    settings = {"write_back": False, "compute_efficiency": 0.8, "hbm_efficiency": 0.8,
                **settings}
    return h100_roofline(model, **settings)


def test_full_mode_by_hand_qwen() -> None:
    """Qwen3-235B on H100 + PCIe5, TP 1, T = 128, 256-token blocks, 2 us per copy.
    Per cached token: transfer x = 192512 / 63e9 + 94 x 2e-6 / 256 s.
    Roofs at K = 0: FLOP c_f = F(128) / (0.8 x 989.4e12), slope s_f = 94 x 128 x 4 x 64 x 128
    FLOP per cached token / (0.8 x 989.4e12); HBM c_h = (weights read by 128 tokens + KV of the
    128 new tokens) / (0.8 x 3.35e12), slope s_h = 192512 / (0.8 x 3.35e12).
    K* = max over roofs of c / (x - s): here the HBM roof (470 GB of weights)."""
    dep = _isolated("qwen3-235b-a22b")
    x = 192512 / 63e9 + 94 * 2e-6 / 256
    rate = 0.8 * 989.4e12
    c_f = prefill_flops(REG.model("qwen3-235b-a22b"), 128, 0).total / rate
    s_f = 94 * 128 * 4 * 64 * 128 / rate
    hbm = 0.8 * 3.35e12
    c_h = (weights_read_per_rank(dep, 128) + 128 * 192512) / hbm
    s_h = 192512 / hbm
    k_star = max(c_f / (x - s_f), c_h / (x - s_h))
    assert k_star == c_h / (x - s_h)
    assert kappa_crit(dep, 128).kappa_crit == pytest.approx(k_star / 128, rel=1e-9)


def test_full_mode_by_hand_deepseek_both_mla_modes() -> None:
    """DeepSeek-V3 on H200 + PCIe5, TP 8 (MLA latent replicated on every rank), T = 512.
    x = 70272 / 63e9 + 61 x 2e-6 / 256. Added compute per cached token, per rank: expanded
    61 x (kv_b 2 x 512 x 128 x 256 + 512 x 81,920 per pair); absorbed 61 x 512 x 278,528; over
    8 x 0.8 x 989 TFLOP/s; plus two all-reduces per layer (39 us + 2 x 7/8 x 512 x 7168 x 2 B /
    482.26 GB/s each) on both roofs. Both slopes stay below x, so K* is finite."""
    x = 70272 / 63e9 + 61 * 2e-6 / 256
    rate = 8 * 0.8 * 989e12
    t = 512
    comm = 2 * 61 * (39e-6 + 2 * 7 / 8 * t * 7168 * 2 / 482.26e9)
    for mode, per_token in (("expanded", 2 * 512 * 128 * 256 + t * 81920),
                            ("absorbed", t * 278528)):
        dep = deployment("deepseek-v3", accelerator="h200", registry=REG, tp=8, mla_mode=mode,
                         write_back=False, compute_efficiency=0.8, hbm_efficiency=0.8,
                         compute_model="roofline")
        c_f = compute_breakdown(dep, t, 0).flop_time + comm
        s_f = 61 * per_token / rate
        c_h = compute_breakdown(dep, t, 0).hbm_time + comm
        s_h = 70272 / (0.8 * 4.8e12)
        assert x > max(s_f, s_h)
        assert compute_breakdown(dep, t, 0).comm_time == pytest.approx(comm, rel=1e-12)
        expected = max(c_f / (x - s_f), c_h / (x - s_h)) / t
        assert kappa_crit(dep, t).kappa_crit == pytest.approx(expected, rel=1e-9), mode


def test_deepseek_expanded_tp1_is_never_transfer_bound() -> None:
    """Expanded MLA up-projects each cached latent: 61 x 33.5 MFLOP = 2.05 GFLOP per cached
    token, 2.6 us at 794.5 TFLOP/s, more than the 1.6 us it takes to load it."""
    result = kappa_crit(h100("deepseek-v3"), 128)
    assert result.kappa_crit == np.inf and result.never_transfer_bound
    assert "never transfer-bound" in result.reason
    assert max_new_tokens_for_crossover(h100("deepseek-v3")) == 0.0


def test_full_mode_by_hand_llama() -> None:
    """Llama-3.1-70B, TP 8, T = 256: 8 KV heads over 8 ranks, an eighth per rank."""
    dep = _isolated("llama-3.1-70b", tp=8, allreduce=False)
    x = 327680 / 8 / 63e9 + 80 * 2e-6 / 256
    rate = 8 * 0.8 * 989.4e12
    s_f = 80 * 256 * 4 * 64 * 128 / rate
    c_f = compute_breakdown(dep, 256, 0).flop_time
    c_h = compute_breakdown(dep, 256, 0).hbm_time
    s_h = 327680 / 8 / (0.8 * 3.35e12)
    expected = max(c_f / (x - s_f), c_h / (x - s_h)) / 256
    assert kappa_crit(dep, 256).kappa_crit == pytest.approx(expected, rel=1e-9)


def test_largest_t_with_a_crossover_by_hand() -> None:
    """Crossover exists while x > max(s_f(T), s_h): s_f = 94 x T x 32768 / C grows with T, so
    T < x C / (94 x 32768)."""
    dep = _isolated("qwen3-235b-a22b")
    x = 192512 / 63e9 + 94 * 2e-6 / 256
    t_max = x * 0.8 * 989.4e12 / (94 * 32768)
    assert max_new_tokens_for_crossover(dep) == pytest.approx(t_max, rel=1e-6)
    assert np.isfinite(kappa_crit(dep, t_max * 0.99).kappa_crit)
    assert kappa_crit(dep, t_max * 1.01).never_transfer_bound


def test_hbm_floor_makes_kappa_fall_with_t() -> None:
    """Where the weight reads bind, K* is nearly constant in T (the weights are read once
    however few tokens share them), so kappa_crit = K*/T falls with T; where attention binds
    it rises again (Qwen3-235B-A22B, dgx-h100, TP 8)."""
    dep = deployment("qwen3-235b-a22b", system="dgx-h100", registry=REG, tp=8)
    t = np.array([16.0, 32.0, 64.0, 128.0, 256.0, 512.0])
    values = np.asarray(kappa_crit(dep, t).kappa_crit)
    limits = compute_breakdown(dep, t, values * t).limit
    hbm_bound = limits == "hbm"
    assert hbm_bound[:4].all()
    assert np.all(np.diff(values[hbm_bound]) < 0)
    t_max = float(max_new_tokens_for_crossover(dep))
    high = np.asarray(kappa_crit(dep, np.array([0.5, 0.9]) * t_max).kappa_crit)
    assert np.all(np.isfinite(high)) and high[1] > high[0]


def test_hbm_roof_off_reproduces_flop_only_kappa() -> None:
    """Inside an iteration of very many tokens a request's share of the weight reads vanishes
    and kappa_crit approaches the FLOP-and-KV-only value: the closed form with the weights
    removed from the HBM roof by hand."""
    dep = _isolated("qwen3-235b-a22b")
    x = 192512 / 63e9 + 94 * 2e-6 / 256
    rate = 0.8 * 989.4e12
    c_f = prefill_flops(REG.model("qwen3-235b-a22b"), 128, 0).total / rate
    s_f = 94 * 128 * 4 * 64 * 128 / rate
    c_h = 128 * 192512 / (0.8 * 3.35e12)
    s_h = 192512 / (0.8 * 3.35e12)
    flop_only = max(c_f / (x - s_f), c_h / (x - s_h)) / 128
    busy = dataclasses.replace(dep, iteration_tokens=1e12)
    assert kappa_crit(busy, 128).kappa_crit == pytest.approx(flop_only, rel=1e-6)


@pytest.mark.parametrize("model", ["qwen3-235b-a22b", "deepseek-v3", "llama-3.1-8b",
                                   "mixtral-8x7b", "kimi-k2"])
@pytest.mark.parametrize("tp", [1, 8])
def test_closed_form_equals_root_finding(model: str, tp: int) -> None:
    dep = h100_roofline(model, tp=tp, mla_mode="absorbed")
    t = np.array([1.0, 16.0, 128.0, 1000.0, 4096.0])
    closed = kappa_crit(dep, t, "closed-form").kappa_crit
    numeric = kappa_crit(dep, t, "root-finding").kappa_crit
    np.testing.assert_allclose(numeric, closed, rtol=1e-9)


@pytest.mark.parametrize("model", ["qwen3-235b-a22b", "gpt-oss-120b"])
def test_kappa_against_brute_force(model: str) -> None:
    """Scan K = 1 .. 10^6 one token at a time: the first K where transfer >= compute."""
    dep = h100(model, tp=8)
    for t in (16, 200):
        ks = np.arange(0, 1_000_000, dtype=float)
        bound = transfer_time(dep, ks, t) >= compute_time(dep, t, ks)
        first = int(np.argmax(bound))
        assert bound.any()
        k_star = kappa_crit(dep, t).crossover_tokens
        assert first - 1 <= k_star <= first, (model, t, first, k_star)


def test_gpt_oss_needs_root_finding() -> None:
    with pytest.raises(KvroofError, match="sliding-window"):
        kappa_crit(h100_roofline("gpt-oss-120b"), 64, "closed-form")


def test_kappa_matches_ttft_bound() -> None:
    dep = h100("llama-3.1-70b", tp=8)
    k_star = kappa_crit(dep, 128).crossover_tokens
    assert ttft(dep, 128, k_star * 0.999).bound == "compute"
    assert ttft(dep, 128, k_star * 1.001).bound == "transfer"


def test_fixed_latency_above_compute_gives_zero() -> None:
    """One copy of 10 ms per request (block = whole request) outlasts a 1-token prefill of
    Llama-8B: any K > 0 is transfer-bound."""
    dep = h100("llama-3.1-8b", latency=10e-3, granularity=Granularity(None, "per-block"))
    assert kappa_crit(dep, 1).kappa_crit == 0.0


@settings(max_examples=40, deadline=None)
@given(
    bw=st.floats(5e9, 500e9), factor=st.floats(1.01, 4.0), t=st.integers(1, 2048),
    model=st.sampled_from(["qwen3-235b-a22b", "llama-3.1-70b", "deepseek-v3"]),
)
def test_kappa_rises_with_bandwidth_falls_with_compute(
    bw: float, factor: float, t: int, model: str
) -> None:
    # a compute override times the roofline (auto falls back to it), so the GPU side is the
    # roofline's; the link side holds in either compute model
    dep = h100_roofline(model, tp=8, bandwidth=bw)
    base = kappa_crit(dep, t).kappa_crit
    faster_link = kappa_crit(dataclasses.replace(dep, bandwidth=bw * factor), t).kappa_crit
    faster_gpu = kappa_crit(dataclasses.replace(dep, compute=989.4e12 * factor), t).kappa_crit
    assert faster_link >= base
    assert faster_gpu <= base
    measured = h100(model, tp=8, bandwidth=bw, compute_model="kernels")
    assert kappa_crit(dataclasses.replace(measured, bandwidth=bw * factor), t).kappa_crit >= \
        kappa_crit(measured, t).kappa_crit


def test_array_settings_broadcast() -> None:
    bandwidths = np.array([15e9, 63e9, 450e9])
    dep = h100("qwen3-235b-a22b", tp=8, bandwidth=bandwidths)
    values = kappa_crit(dep, 128).kappa_crit
    for i, bw in enumerate(bandwidths):
        assert values[i] == kappa_crit(h100("qwen3-235b-a22b", tp=8, bandwidth=float(bw)),
                                       128).kappa_crit


def test_bad_new_tokens() -> None:
    with pytest.raises(KvroofError, match="new_tokens: must be positive"):
        kappa_crit(h100("llama-3.1-8b"), 0)


# -- inverse solvers --------------------------------------------------------------------------
def test_required_bandwidth_by_hand() -> None:
    """Bytes / (t_c - latency x copies): the bandwidth at which K = 100 T is just compute-bound."""
    dep = h100("qwen3-235b-a22b", latency=0.0)
    t, k = 128, 12800
    expected = k * 192512 / compute_time(dep, t, k)
    assert required_bandwidth(dep, t, 100).value == pytest.approx(expected, rel=1e-6)


def test_required_bandwidth_impossible_when_dram_bounds() -> None:
    dep = deployment("qwen3-235b-a22b", system="dgx-a100", registry=REG, tp=8)
    result = required_bandwidth(dep, 16, 10_000)
    assert result.value == np.inf and "no link bandwidth suffices" in result.reason


def test_transfer_bound_compute_by_hand() -> None:
    """Llama-3.1-70B at T = 2048, K = 204,800 (FLOP-bound): the peak at which FLOPs / (peak x
    0.8) equals the transfer; an HBM-bound request has no such peak."""
    dep = _isolated("llama-3.1-70b")
    t, k = 2048, 204800
    flops = prefill_flops(REG.model("llama-3.1-70b"), t, k).total
    expected = flops / (0.8 * transfer_time(dep, k, t))
    assert transfer_bound_compute(dep, t, 100).value == pytest.approx(expected, rel=1e-6)
    hbm_bound = transfer_bound_compute(_isolated("qwen3-235b-a22b"), 16, 1)
    assert hbm_bound.value == np.inf and "HBM" in hbm_bound.reason


def test_band_of_small_k_is_not_a_kappa_crit() -> None:
    """A fixed per-request cost (a whole-request copy of 1 s) makes small K transfer-bound, but
    expanded MLA adds more compute per cached token than it costs to load: no K/T above which
    prefill stays transfer-bound, so inf, with the reason, and ttft agrees at large K."""
    dep = h100("deepseek-v3", latency=1.0, granularity=Granularity(None, "per-block"))
    result = kappa_crit(dep, 1)
    assert result.kappa_crit == np.inf
    assert "fixed per-request transfer cost" in result.reason
    assert ttft(dep, 1, 1).bound == "transfer" and ttft(dep, 1, 1e8).bound == "compute"
    numeric = kappa_crit(dataclasses.replace(dep), 1, "root-finding")
    assert numeric.kappa_crit == np.inf


def test_largest_t_with_calibrated_efficiency_by_brute_force() -> None:
    """With eff(T) = 0.6 T / (T + 400) and expanded MLA, s(T) is not linear in T; scan T."""
    from kvroof.specs.hardware import Calibration

    testbed = REG.system("paper-testbed")
    calibrated = testbed.model_copy(update={"calibration": Calibration(
        compute_efficiency_max=0.6, compute_half_tokens=400, link_bandwidth=15e9,
        link_latency=2e-6)})
    dep = deployment("deepseek-v3", system=calibrated, registry=REG, tp=8)
    t_max = float(max_new_tokens_for_crossover(dep))
    scan = np.arange(1, 20_000)
    finite = np.isfinite(np.asarray(kappa_crit(dep, scan).kappa_crit))
    assert finite.any()
    assert scan[finite].max() == pytest.approx(t_max, abs=1.0)


def test_chunked_model_with_array_settings_brute_force() -> None:
    """A chunked model (Llama 4 Scout) with the bandwidth swept as an array, at one T and on a
    bandwidth x T grid: each point equals the scalar call (the root finder's residue batches
    used to broadcast against T alone and fail on array settings: `plot what-if` crashed)."""
    dep = deployment("llama-4-scout-17b-16e", system="hgx-h200", tp=8, registry=REG)
    bandwidths = np.array([5e9, 20e9, 60e9])
    ts = np.array([64.0, 128.0, 512.0])
    swept = kappa_crit(dataclasses.replace(dep, bandwidth=bandwidths), 128.0).kappa_crit
    grid = kappa_crit(dataclasses.replace(dep, bandwidth=bandwidths[:, None]), ts).kappa_crit
    assert np.shape(swept) == (3,) and np.shape(grid) == (3, 3)
    for i, bw in enumerate(bandwidths):
        alone = dataclasses.replace(dep, bandwidth=float(bw))
        assert swept[i] == kappa_crit(alone, 128.0).kappa_crit
        for j, t in enumerate(ts):
            assert grid[i, j] == kappa_crit(alone, float(t)).kappa_crit

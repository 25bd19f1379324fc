"""Transfer and compute time, TTFT under each overlap mode, TP, tiers; hand derivations inline."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvroof.cost.deployment import Deployment, Granularity, deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.timing import compute_time, ttft, ttft_batch
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
QWEN = "qwen3-235b-a22b"


def h100(model: str = QWEN, **settings: object) -> Deployment:
    return deployment(model, accelerator="h100", registry=REG, **settings)


def test_transfer_time_by_hand() -> None:
    """K = 65,536 tokens of Qwen3-235B over PCIe Gen5 (63 GB/s peak), 256-token blocks, one
    copy per layer per block, 2 us per copy: 65536 x 192512 B / 63e9 + 94 x 256 x 2e-6."""
    expected = 65536 * 192512 / 63e9 + 94 * (65536 / 256) * 2e-6
    assert transfer_time(h100(), 65536) == pytest.approx(expected, rel=1e-12)


def test_compute_time_by_hand() -> None:
    dep = h100(compute_efficiency=0.5)
    flops = prefill_flops(REG.model(QWEN), 64, 1000).total
    assert compute_time(dep, 64, 1000) == pytest.approx(flops / (989.4e12 * 0.5), rel=1e-12)


def test_tensor_parallel_bytes_per_rank() -> None:
    """GQA with 4 KV heads: TP 2 loads half, TP 8 a quarter (heads replicate past 4);
    MLA: every rank loads the whole latent."""
    assert kv_bytes_per_rank(h100(tp=2), 1000) == 192512 * 1000 / 2
    assert kv_bytes_per_rank(h100(tp=8), 1000) == 192512 * 1000 / 4
    assert kv_bytes_per_rank(h100("deepseek-v3", tp=8), 1000) == 70272 * 1000
    assert compute_time(h100(tp=8), 64, 1000) == pytest.approx(compute_time(h100(), 64, 1000) / 8)


def test_allreduce_adds_ring_time() -> None:
    """2 all-reduces per layer of T x d x 2 B, ring: 2 (TP-1)/TP x size / 450 GB/s."""
    base = h100(tp=8)
    with_ar = dataclasses.replace(base, allreduce=True)
    ring = 2 * 7 / 8 * 64 * 4096 * 2 / 450e9
    extra = compute_time(with_ar, 64, 100) - compute_time(base, 64, 100)
    assert extra == pytest.approx(2 * 94 * ring, rel=1e-9)


def test_dram_share_bounds_bandwidth() -> None:
    """dgx-a100: 2 x 204.8 GB/s DRAM over 8 loading GPUs = 51.2 GB/s > PCIe4 31.5: link-bound;
    with a 10 GB/s DRAM it would be the DRAM share."""
    dep = deployment(QWEN, system="dgx-a100", registry=REG)
    assert dep.effective_bandwidth == 31.5e9
    assert dep.host_dram_share == 2 * 204.8e9 / 8
    two_links = deployment(QWEN, system="gb200", registry=REG)  # 2 GPUs share one C2C
    assert two_links.link_bandwidth == 450e9 / 2
    one_loading = deployment(QWEN, system="gb200", registry=REG, gpus_loading=1)
    assert one_loading.link_bandwidth == 450e9


def test_sustained_bandwidth_sources() -> None:
    testbed = deployment(QWEN, system="paper-testbed", registry=REG, bandwidth_source="sustained")
    assert testbed.effective_bandwidth == 15e9  # the system's measurement wins
    assert h100(bandwidth_source="sustained").link_bandwidth == 55.43e9  # the link's
    with pytest.raises(KvroofError, match="no published sustained bandwidth"):
        deployment(QWEN, accelerator="b200", link="pcie-gen6-x16", registry=REG,
                   bandwidth_source="sustained")


def test_granularity() -> None:
    model = REG.model(QWEN)
    assert Granularity(16, "per-layer-kv").transfers(model, 32) == 94 * 2 * 2
    assert Granularity(None, "per-layer").transfers(model, 5000) == 94
    assert Granularity(None, "per-block").transfers(model, 0) == 0
    mla = REG.model("deepseek-v3")
    assert Granularity(16, "per-layer-kv").copies_per_block(mla) == 61  # one latent tensor
    with pytest.raises(KvroofError, match="block_tokens"):
        Granularity(0)


def test_tiers_take_the_slowest_path() -> None:
    """dgx-h100: half the tokens from 8 NVMe Gen4 drives (8 x 7 GB/s / 8 GPUs = 7 GB/s each),
    half from DRAM over PCIe5 (63 GB/s). Both share the host link: 1 x bytes / 63e9 there.
    Slowest path: NVMe, 0.5 x bytes / 7e9; plus one NVMe access latency."""
    dep = deployment(QWEN, system="dgx-h100", registry=REG, tier_fractions={"local-nvme": 0.5},
                     granularity=Granularity(None, "per-block"), latency=0.0)
    size = 1000 * 192512
    nvme = REG.link("nvme-gen4-x4")
    expected = max(0.5 * size / 63e9, 0.5 * size / 7e9, size / 63e9) + nvme.latency
    assert transfer_time(dep, 1000) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(KvroofError, match="no tier 'tape'"):
        deployment(QWEN, system="dgx-h100", registry=REG, tier_fractions={"tape": 0.1})
    with pytest.raises(KvroofError, match="add up to"):
        deployment(QWEN, system="dgx-h100", registry=REG,
                   tier_fractions={"local-nvme": 0.7, "remote-rdma": 0.6})


def test_ttft_modes_by_hand() -> None:
    dep = h100()
    x = transfer_time(dep, 8192)
    c = compute_time(dep, 128, 8192)
    assert ttft(dep, 128, 8192, "serial").ttft == pytest.approx(x + c)
    assert ttft(dep, 128, 8192, "ideal").ttft == pytest.approx(max(x, c))
    layers = 94
    assert ttft(dep, 128, 8192, "layerwise").ttft == pytest.approx(
        x / layers + (layers - 1) * max(x, c) / layers + c / layers)
    result = ttft(dep, 128, 8192)
    assert result.p_oh == pytest.approx(x / c)
    assert result.transfer_share == pytest.approx(result.p_oh / (1 + result.p_oh))
    assert result.bound == ("transfer" if x > c else "compute")
    assert result.compute_utilization == pytest.approx(
        result.flops / result.ttft / 989.4e12)


def test_ttft_zero_tokens() -> None:
    nothing = ttft(h100(), 0, 0)
    assert (nothing.ttft, nothing.p_oh, nothing.transfer_share, nothing.bound) == (
        0.0, 0.0, 0.0, "compute")
    load_only = ttft(h100(), 0, 100)
    assert load_only.p_oh == np.inf and load_only.bound == "transfer"
    assert load_only.transfer_share == 1.0


def test_batch_adds_requests() -> None:
    dep = h100()
    batch = ttft_batch(dep, [64, 128], [1000, 5000], "ideal")
    x = transfer_time(dep, 1000) + transfer_time(dep, 5000)
    c = compute_time(dep, 64, 1000) + compute_time(dep, 128, 5000)
    assert batch.ttft == pytest.approx(max(x, c))


def test_one_gpu_system_equals_accelerator_path() -> None:
    """gh200 system (1 GPU, C2C 450 GB/s, Grace DRAM 512 GB/s) at TP 1 = the accelerator with
    its default link: the DRAM share is not binding."""
    system = deployment(QWEN, system="gh200", registry=REG)
    alone = deployment(QWEN, accelerator="gh200", registry=REG)
    grid_t, grid_k = np.meshgrid([16, 512], [0, 1000, 100_000])
    assert np.array_equal(ttft(system, grid_t, grid_k).ttft, ttft(alone, grid_t, grid_k).ttft)


def test_grid_is_one_call() -> None:
    t = np.geomspace(1, 4096, 1000)[:, None]
    k = np.geomspace(1, 131072, 1000)[None, :]
    result = ttft(h100(), t, k, "layerwise")
    assert result.ttft.shape == (1000, 1000)
    assert result.bound.shape == (1000, 1000)


@settings(max_examples=60, deadline=None)
@given(
    t=st.integers(1, 8192),
    k=st.integers(0, 200_000),
    model=st.sampled_from([QWEN, "deepseek-v3", "llama-3.1-70b", "gpt-oss-120b"]),
    tp=st.sampled_from([1, 2, 8]),
)
def test_overlap_order_and_monotone_in_k(t: int, k: int, model: str, tp: int) -> None:
    dep = h100(model, tp=tp)
    serial = ttft(dep, t, k, "serial").ttft
    layerwise = ttft(dep, t, k, "layerwise").ttft
    ideal = ttft(dep, t, k, "ideal").ttft
    assert serial >= layerwise * (1 - 1e-12)
    assert layerwise >= ideal * (1 - 1e-12)
    for mode in ("serial", "layerwise", "ideal"):
        assert ttft(dep, t, k + 1000, mode).ttft >= ttft(dep, t, k, mode).ttft


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4096), st.integers(0, 100_000)), min_size=1,
                max_size=6))
def test_arrays_equal_scalars(points: list[tuple[int, int]]) -> None:
    dep = h100("gpt-oss-120b", compute_efficiency=0.7)
    ts = np.array([p[0] for p in points])
    ks = np.array([p[1] for p in points])
    array = ttft(dep, ts, ks, "layerwise")
    for i, (t, k) in enumerate(points):
        scalar = ttft(dep, t, k, "layerwise")
        assert array.ttft[i] == scalar.ttft
        assert array.bound[i] == scalar.bound


def test_settings_may_be_arrays() -> None:
    bandwidths = np.array([15e9, 32e9, 63e9])
    dep = h100(bandwidth=bandwidths)
    times = transfer_time(dep, 1000)
    assert times.shape == (3,)
    for i, bw in enumerate(bandwidths):
        assert times[i] == transfer_time(h100(bandwidth=float(bw)), 1000)


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"tp": 0}, "tp: expected a positive integer"),
        ({"tp": 1.5}, "tp: expected a positive integer"),
        ({"compute_efficiency": 0.0}, "compute_efficiency: must be in (0, 1]"),
        ({"link_efficiency": 1.2}, "link_efficiency: must be in (0, 1]"),
        ({"compute_dtype": "fp4"}, "has no published peak for fp4"),
        ({"kv_dtype": "fp7"}, "unknown dtype 'fp7'"),
        ({"bandwidth": -1.0}, "bandwidth: must be positive"),
        ({"compute": float("nan")}, "compute: must be finite"),
        ({"latency": -1e-6}, "latency: must not be negative"),
        ({"mla_mode": "dense"}, "mla_mode"),
    ],
)
def test_bad_settings(settings: dict[str, object], fragment: str) -> None:
    with pytest.raises(KvroofError) as info:
        h100(**settings)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_tp_above_system_size() -> None:
    with pytest.raises(KvroofError, match="exceeds the 1 GPUs"):
        deployment(QWEN, system="gh200", registry=REG, tp=2)


def test_bad_overlap_and_tokens() -> None:
    with pytest.raises(KvroofError, match="overlap"):
        ttft(h100(), 1, 1, "sometimes")  # type: ignore[arg-type]
    with pytest.raises(KvroofError, match="cached_tokens: must not be negative"):
        ttft(h100(), 1, -1)


def test_breakdown_parts() -> None:
    parts = transfer_breakdown(h100(), 512)
    assert parts.copies == 94 * 2
    assert parts.latency_time == pytest.approx(94 * 2 * 2e-6)


def test_system_measurement_only_for_its_own_link() -> None:
    """The testbed's 15 GB/s was measured on its PCIe Gen5 link: a C2C what-if on the same
    system uses the C2C link's own sustained figure, not 15 GB/s."""
    on_c2c = deployment(QWEN, system="paper-testbed", registry=REG, link="nvlink-c2c",
                        bandwidth_source="sustained", gpus_loading=1)
    assert on_c2c.link_bandwidth == REG.link("nvlink-c2c").sustained_bandwidth


def test_sliding_layers_copy_only_their_window() -> None:
    """gpt-oss at K = 65,536, 256-token blocks, one copy per layer per block: 18 full layers x
    256 blocks + 18 sliding layers x 128/256 of a block = 4,617 copies."""
    dep = h100("gpt-oss-120b")
    assert dep.granularity.transfers(dep.model, 65536) == pytest.approx(18 * 256 + 18 * 0.5)


def test_gpus_loading_and_token_bounds() -> None:
    with pytest.raises(KvroofError, match="gpus_loading: 100 exceeds the 8 GPUs"):
        deployment(QWEN, system="dgx-h100", registry=REG, gpus_loading=100)
    with pytest.raises(KvroofError, match="new_tokens: at most"):
        ttft(h100(), 1e300, 1)

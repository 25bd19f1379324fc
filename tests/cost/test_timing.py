"""Transfer and compute time, TTFT under each overlap mode, TP, tiers; hand derivations inline."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvroof.cost.deployment import Deployment, Granularity, deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.timing import compute_breakdown, compute_time, ttft, ttft_batch
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
from kvroof.cost.weights import touched_expert_share, weights_read_per_rank
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
QWEN = "qwen3-235b-a22b"


def h100(model: str = QWEN, **settings: object) -> Deployment:
    return deployment(model, accelerator="h100", registry=REG, **settings)


def h100_roofline(model: str = QWEN, **settings: object) -> Deployment:
    """An H100 deployment timed by the whole-model roofline, for the hand derivations of its
    FLOP, HBM and all-reduce roofs."""
    return h100(model, compute_model="roofline", **settings)


def test_transfer_time_by_hand() -> None:
    """K = 65,536 tokens of Qwen3-235B over PCIe Gen5 (63 GB/s peak), 256-token blocks, one
    copy per layer per block, 2 us per copy, no write-back: 65536 x 192512 B / 63e9 + 94 x 256
    x 2e-6."""
    expected = 65536 * 192512 / 63e9 + 94 * (65536 / 256) * 2e-6
    assert transfer_time(h100(write_back=False), 65536) == pytest.approx(expected, rel=1e-12)


def test_write_back_shares_the_link_by_hand() -> None:
    """With write-back the T = 2048 new tokens' KV (2048 x 192512 B) goes device-to-host while
    K = 4096 tokens come host-to-device. PCIe Gen5 peak: 63 GB/s each way, 126 GB/s together,
    so the paths take 4096 B/63e9, 2048 B/63e9 and 6144 B/126e9 (B = 192512); the slowest is
    the load. Copies: (4096 + 2048)/256 blocks x 94 layers x 2 us."""
    b = 192512
    data = max(4096 * b / 63e9, 2048 * b / 63e9, 6144 * b / 126e9)
    expected = data + (4096 + 2048) / 256 * 94 * 2e-6
    assert transfer_time(h100(), 4096, 2048) == pytest.approx(expected, rel=1e-12)
    # Sustained figures: 55.43 GB/s in, 55.06 GB/s out, no published both-ways figure (sum).
    sustained = h100(bandwidth_source="sustained", latency=0.0)
    parts = transfer_breakdown(sustained, 1000, 3000)
    assert parts.paths[:3] == pytest.approx(
        (1000 * b / 55.43e9, 3000 * b / 55.06e9, 4000 * b / (55.43e9 + 55.06e9)), rel=1e-12)
    assert parts.limit == "device-to-host"


def test_compute_is_the_gpu_roofline_by_hand() -> None:
    """Qwen3-235B-A22B, TP 8 on H100 SXM at T = 128, K = 0 (the issue's example).

    Weights per rank (bf16): attention per layer 2 x 4096 x 64 x 128 / 8 (query and output)
    + 2 x 4096 x 4 x 128 / 4 (keys, values: 4 KV heads over 8 ranks) + 2 x 128 (QK norms);
    routed experts 94 x 128 x 3 x 4096 x 1536 / 8, of which 1 - (1 - 8/128)^128 = 99.97% are
    touched by 128 tokens; router 94 x 4096 x 128 whole; LM head 151936 x 4096 / 8; norms
    (2 x 94 + 1) x 4096. HBM: 3.35 TB/s x 0.8 (aiconfigurator's empirical factor).
    FLOPs: prefill_flops / (8 x 989.4 TFLOP/s x 794.5/989.4)."""
    dep = h100_roofline(tp=8)
    per_layer = 2 * 4096 * 64 * 128 / 8 + 2 * 4096 * 4 * 128 / 4 + 2 * 128
    touched = 1 - (1 - 8 / 128) ** 128
    params = (94 * per_layer + 94 * 128 * 3 * 4096 * 1536 / 8 * touched + 94 * 4096 * 128
              + 151936 * 4096 / 8 + (2 * 94 + 1) * 4096)
    kv = 128 * 192512 / 4  # the new tokens' KV that attention reads, a quarter per rank
    hbm_time = (2 * params + kv) / (3.35e12 * 0.8)
    parts = compute_breakdown(dep, 128, 0)
    assert parts.weight_bytes == pytest.approx(2 * params, rel=1e-12)
    assert 58.7e9 < parts.weight_bytes < 58.9e9  # about 58.8 GB
    assert parts.hbm_time == pytest.approx(hbm_time, rel=1e-12)
    flops = prefill_flops(REG.model(QWEN), 128, 0).total
    assert parts.flop_time == pytest.approx(flops / (8 * 794.5e12), rel=1e-12)
    assert parts.hbm_time > 20 * parts.flop_time  # HBM-bound: about 22 ms against 0.7 ms
    assert parts.limit == "hbm"
    assert compute_time(dep, 128, 0) == pytest.approx(parts.hbm_time + parts.comm_time)


def test_dense_prefill_is_flop_bound_by_hand() -> None:
    """Llama-3.1-70B on H100 SXM, TP 1, T = 4096: 4096 x ~141 GFLOP = 5.8e14 FLOP over
    794.5 TFLOP/s is 0.73 s; reading its 141 GB of weights at 2.68 TB/s takes 53 ms."""
    dep = h100_roofline("llama-3.1-70b")
    parts = compute_breakdown(dep, 4096, 0)
    flops = prefill_flops(REG.model("llama-3.1-70b"), 4096, 0).total
    assert parts.flop_time == pytest.approx(flops / 794.5e12, rel=1e-12)
    assert parts.limit == "flops" and parts.comm_time == 0.0
    assert compute_time(dep, 4096, 0) == parts.flop_time


def test_touched_expert_share_against_random_routing() -> None:
    """1 - (1 - k/E)^T against a simulation: each of T tokens picks k distinct experts of E
    uniformly at random; count the distinct experts hit (2,000 trials)."""
    rng = np.random.default_rng(0)
    for experts, k, tokens in ((128, 8, 16), (128, 8, 64), (256, 8, 32), (8, 2, 3)):
        hit = np.zeros(2000)
        for trial in range(2000):
            picks = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k]
            hit[trial] = np.unique(picks).size / experts
        formula = touched_expert_share(experts, k, tokens)
        assert abs(hit.mean() - formula) < 4 * hit.std() / np.sqrt(hit.size) + 1e-3


@settings(max_examples=40, deadline=None)
@given(t=st.integers(1, 8192), k=st.integers(0, 100_000), tp=st.sampled_from([1, 2, 4, 8]),
       model=st.sampled_from([QWEN, "deepseek-v3", "llama-3.1-70b", "gpt-oss-120b"]))
def test_compute_time_at_least_weight_reads(t: int, k: int, tp: int, model: str) -> None:
    """However fast the math, a prefill reads the weights it uses: compute >= weights read per
    rank / HBM bandwidth (and at N >> T the request's share falls to T/N of them); the
    roofline's achievable HBM bandwidth, so the roofline's compute."""
    dep = h100_roofline(model, tp=tp)
    floor = weights_read_per_rank(dep, t) / float(dep.effective_hbm_bandwidth)
    assert compute_time(dep, t, k) >= floor * (1 - 1e-12)
    assert weights_read_per_rank(dep, t) <= dep.weight_bytes.total


def test_tensor_parallel_bytes_per_rank() -> None:
    """GQA with 4 KV heads: TP 2 holds half, TP 8 a quarter (heads replicate past 4);
    MLA: every rank holds the whole latent; FLOP time splits TP ways."""
    assert kv_bytes_per_rank(h100(tp=2), 1000) == 192512 * 1000 / 2
    assert kv_bytes_per_rank(h100(tp=8), 1000) == 192512 * 1000 / 4
    assert kv_bytes_per_rank(h100("deepseek-v3", tp=8), 1000) == 70272 * 1000
    one = compute_breakdown(h100_roofline(), 64, 1000).flop_time
    assert compute_breakdown(h100_roofline(tp=8), 64, 1000).flop_time == pytest.approx(one / 8)


def test_allreduce_by_hand() -> None:
    """Two all-reduces per layer of T x d x 2 B, each ``latency + 2 (TP-1)/TP x size / busbw``
    with H100's 39 us and 480 GB/s (nccl-tests); off with allreduce=False."""
    base = h100_roofline(tp=8)
    each = 39e-6 + 2 * 7 / 8 * 64 * 4096 * 2 / 480e9
    parts = compute_breakdown(base, 64, 100)
    assert parts.comm_time == pytest.approx(2 * 94 * each, rel=1e-9)
    assert compute_breakdown(dataclasses.replace(base, allreduce=False), 64, 100).comm_time == 0
    assert compute_breakdown(h100(), 64, 100).comm_time == 0  # TP 1: nothing to reduce


def test_dram_share_by_numa_node() -> None:
    """dgx-a100: two GPUs per PCIe switch uplink, GPUs 0-3 on socket 0; a socket sustains
    204.8 GB/s x 0.63 = 129 GB/s, shared by its 4 loading GPUs: 32.3 GB/s, while the uplink
    gives each of its 2 GPUs 15.75 GB/s: link-bound."""
    dep = deployment(QWEN, system="dgx-a100", registry=REG)
    assert dep.host_dram_share == pytest.approx(204.8e9 * 0.63 / 4)
    assert dep.link_bandwidth == pytest.approx(31.5e9 / 2)
    assert dep.effective_bandwidth == pytest.approx(31.5e9 / 2)
    # dgx-h100: DDR5-4400 (2 DIMMs per channel), 281.6 GB/s x 0.8 per socket over 4 GPUs =
    # 56.3 GB/s: below the 63 GB/s Gen5 link, so DRAM-bound when all 8 load at once.
    h = deployment(QWEN, system="dgx-h100", registry=REG)
    assert h.effective_bandwidth == pytest.approx(281.6e9 * 0.8 / 4)
    # A TP 4 group alone on socket 0: the same socket, the same 4 GPUs.
    assert deployment(QWEN, system="dgx-h100", registry=REG, tp=4,
                      gpus_loading=4).host_dram_share == pytest.approx(281.6e9 * 0.8 / 4)
    # One GPU loading alone gets its socket (not both sockets' 2 x 225 GB/s).
    alone = deployment(QWEN, system="dgx-h100", registry=REG, gpus_loading=1)
    assert alone.host_dram_share == pytest.approx(281.6e9 * 0.8)
    # Interleaved pages: both sockets pooled over 8 GPUs, but half of each GPU's bytes cross
    # UPI (143 GB/s per direction) shared by the 4 GPUs of a socket: min(56.3, 71.5).
    inter = deployment(QWEN, system="dgx-h100", registry=REG, host_memory_locality="interleaved")
    assert inter.host_dram_share == pytest.approx(min(2 * 281.6e9 * 0.8 / 8, 143e9 * 2 / 4))
    # Remote: everything crosses UPI, 143 GB/s over 4 GPUs = 35.75 GB/s.
    remote = deployment(QWEN, system="dgx-h100", registry=REG, host_memory_locality="remote")
    assert remote.host_dram_share == pytest.approx(143e9 / 4)
    two_links = deployment(QWEN, system="gb200", registry=REG)  # 2 GPUs share one C2C
    assert two_links.link_bandwidth == 450e9 / 2
    one_loading = deployment(QWEN, system="gb200", registry=REG, gpus_loading=1, tp=1)
    assert one_loading.link_bandwidth == 450e9


def test_mla_tp_load_modes_by_hand() -> None:
    """DeepSeek-V3 (latent 70,272 B per token) at TP 8 on H200 + PCIe Gen5, K = 10,000, no
    write-back, no per-copy latency. every-rank: each rank loads 702.7 MB at 63 GB/s;
    rank0-broadcast: rank 0 loads it, then broadcasts it over NVLink (39 us + size / 482 GB/s);
    shard-allgather: each loads an eighth, then all-gather (39 us + 7/8 size / 482 GB/s)."""
    size = 10_000 * 70272

    def dep(mode: str) -> Deployment:
        return deployment("deepseek-v3", accelerator="h200", registry=REG, tp=8, latency=0.0,
                          write_back=False, mla_tp_load=mode)

    assert transfer_time(dep("every-rank"), 10_000) == pytest.approx(size / 63e9)
    assert transfer_time(dep("rank0-broadcast"), 10_000) == pytest.approx(
        size / 63e9 + 39e-6 + size / 482.26e9)
    assert transfer_time(dep("shard-allgather"), 10_000) == pytest.approx(
        size / 8 / 63e9 + 39e-6 + 7 / 8 * size / 482.26e9)
    # Only the first rank of each TP group reads host memory under rank0-broadcast.
    on_system = deployment("deepseek-v3", system="hgx-h200", registry=REG, tp=8,
                           mla_tp_load="rank0-broadcast")
    assert on_system.loading_gpus == [0]
    assert on_system.host_dram_share == pytest.approx(281.6e9 * 0.8)


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


def test_breakdown_data_time_is_the_slowest_path_brute_force() -> None:
    """On a K x T grid, with write-back and a tier, the breakdown's data time is the largest of
    its paths, point by point (Python's max over the scalar breakdowns), its total equals
    :func:`transfer_time`, and the slowest path's name is the one that took the max."""
    dep = deployment(QWEN, system="dgx-h100", registry=REG, tier_fractions={"local-nvme": 0.3},
                     write_back=True)
    k = np.array([[0], [512], [40000], [131072]])
    t = np.array([[1, 64, 4096, 60000]])
    grid = transfer_breakdown(dep, k, t)
    assert np.shape(grid.data_time) == (4, 4)
    for i in range(4):
        for j in range(4):
            one = transfer_breakdown(dep, int(k[i, 0]), int(t[0, j]))
            paths = [float(p) for p in one.paths]
            assert one.data_time == max(paths)
            assert grid.data_time[i, j] == max(paths)
            assert grid.total[i, j] == transfer_time(dep, int(k[i, 0]), int(t[0, j]))
            assert one.limit == one.path_names[paths.index(max(paths))]


def test_ttft_modes_by_hand() -> None:
    dep = h100()
    x = transfer_time(dep, 8192, 128)
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
    assert result.ttft == pytest.approx(x + c)


def test_ttft_zero_tokens() -> None:
    nothing = ttft(h100(), 0, 0)
    assert (nothing.ttft, nothing.p_oh, nothing.transfer_share, nothing.bound) == (
        0.0, 0.0, 0.0, "compute")
    load_only = ttft(h100(), 0, 100)
    assert load_only.p_oh == np.inf and load_only.bound == "transfer"
    assert load_only.transfer_share == 1.0


def test_batch_reads_weights_once() -> None:
    """A batch of (64, 1000) and (128, 5000): FLOPs and KV reads add, the weights are read once
    for the 192 tokens, loads and saves share the link (no write-back here: loads add up);
    the compute is the roofline's."""
    dep = h100_roofline(write_back=False)
    batch = ttft_batch(dep, [64, 128], [1000, 5000], "ideal")
    x = transfer_time(dep, 1000) + transfer_time(dep, 5000)
    flops = prefill_flops(REG.model(QWEN), 64, 1000).total + prefill_flops(
        REG.model(QWEN), 128, 5000).total
    kv = (1064 + 5128) * 192512
    hbm = (weights_read_per_rank(dep, 192) + kv) / (3.35e12 * 0.8)
    c = max(flops / 794.5e12, hbm)
    assert batch.ttft == pytest.approx(max(x, c), rel=1e-12)
    # Reading the weights once is cheaper than once per request.
    alone = compute_time(dep, 64, 1000) + compute_time(dep, 128, 5000)
    assert c < alone


def test_one_gpu_system_adds_the_dram_bound() -> None:
    """gh200 system (1 GPU, C2C 450 GB/s peak) at TP 1: the Grace LPDDR5X sustains 307 GB/s
    (STREAM Triad), below the link, so the system's loads run at 307 GB/s where the bare
    accelerator's run at 450; with a 200 GB/s link override the DRAM share does not bind and
    the two agree."""
    system = deployment("llama-3.1-8b", system="gh200", registry=REG)
    alone = deployment("llama-3.1-8b", accelerator="gh200", registry=REG)
    assert system.effective_bandwidth == 307e9 and alone.effective_bandwidth == 450e9
    grid_t, grid_k = np.meshgrid([16, 512], [0, 1000, 100_000])
    slow = dataclasses.replace(system, bandwidth=200e9)
    slow_alone = dataclasses.replace(alone, bandwidth=200e9)
    assert np.array_equal(ttft(slow, grid_t, grid_k).ttft, ttft(slow_alone, grid_t, grid_k).ttft)


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
        # the same evaluation on floats and arrays; only the MoE touched-expert share
        # 1 - miss**T goes through Python's pow on floats and numpy's power on arrays, which
        # may round one unit in the last place apart (numpy has its own pow), hence 4 ULP
        np.testing.assert_array_max_ulp(array.ttft[i], scalar.ttft, maxulp=4)
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
    with_save = transfer_breakdown(h100(), 512, 256)  # one more block per layer to save
    assert with_save.copies == 94 * 3


def test_system_measurement_only_for_its_own_link() -> None:
    """The testbed's 15 GB/s was measured on its PCIe Gen5 link: a C2C what-if on the same
    system uses the C2C link's own sustained figure, not 15 GB/s."""
    on_c2c = deployment(QWEN, system="paper-testbed", registry=REG, link="nvlink-c2c",
                        bandwidth_source="sustained", gpus_loading=1)
    assert on_c2c.link_bandwidth == REG.link("nvlink-c2c").sustained_bandwidth


def test_sliding_layers_copy_only_their_window() -> None:
    """gpt-oss at K = 65,536, 256-token blocks, one copy per layer per block: 18 full layers x
    256 blocks + 18 sliding layers x 127/256 of a block (the 127 positions a window-128 query
    needs besides its own) = 4,616.93 copies."""
    dep = h100("gpt-oss-120b")
    assert dep.granularity.transfers(dep.model, 65536) == pytest.approx(18 * 256 + 18 * 127 / 256)


def test_gpus_loading_and_token_bounds() -> None:
    with pytest.raises(KvroofError, match="gpus_loading: 100 exceeds the 8 GPUs"):
        deployment(QWEN, system="dgx-h100", registry=REG, gpus_loading=100)
    with pytest.raises(KvroofError, match="new_tokens: at most"):
        ttft(h100(), 1e300, 1)

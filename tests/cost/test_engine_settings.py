"""Engine profiles as deployment settings; the two per-request engine behaviours (prefix reuse
in whole blocks, a fixed request overhead); the copy-size formula against the transfer time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvroof.cost.copy_size import copy_time, delivered_bandwidth, engine_link_share
from kvroof.cost.deployment import Granularity, deployment
from kvroof.cost.kv import kv_bytes
from kvroof.cost.timing import default_overlap, ttft, ttft_batch
from kvroof.cost.transfer import transfer_time
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry


def test_no_engine_keeps_the_defaults(registry: Registry) -> None:
    """Without an engine a deployment is what it was before engine profiles existed."""
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=registry)
    assert dep.engine is None
    assert dep.granularity == Granularity(256, "per-layer")
    assert dep.transfer_latency == registry.link("pcie-gen5-x16").latency == 2e-6
    assert dep.link_efficiency == 1.0
    assert dep.write_back is True
    assert dep.reuse_block_tokens is None
    assert dep.request_overhead == 0.0
    assert default_overlap(dep) == "serial"
    assert ttft(dep, 128, 4096).ttft == ttft(dep, 128, 4096, "serial").ttft


def test_engine_sets_what_it_describes(registry: Registry) -> None:
    engine = registry.engine("vllm-0.12-offload")
    dep = deployment("llama-3.1-8b", accelerator="h100", engine=engine, registry=registry)
    assert dep.engine is engine
    assert dep.granularity == Granularity(engine.block_tokens, engine.copy_layout)
    assert dep.latency == engine.copy_overhead
    assert dep.link_efficiency == engine.link_share
    assert dep.write_back is engine.write_back
    assert dep.reuse_block_tokens == engine.reuse_block_tokens
    assert dep.mla_tp_load == engine.mla_tp_load


def test_explicit_settings_win_and_none_means_not_given(registry: Registry) -> None:
    dep = deployment("llama-3.1-8b", accelerator="h100", engine="vllm-0.12-offload",
                     registry=registry, latency=1e-6, write_back=True, link_efficiency=None,
                     granularity={"layout": "per-layer"})
    assert dep.latency == 1e-6
    assert dep.write_back is True
    assert dep.link_efficiency == registry.engine("vllm-0.12-offload").link_share
    assert dep.granularity == Granularity(16, "per-layer")  # block tokens from the engine


def test_copy_rate_cap_lowers_the_share_on_a_fast_link(registry: Registry) -> None:
    """SGLang's two-CTA kernel moves at most 96 GB/s: on a 450 GB/s NVLink-C2C that is a share of
    96/450, below its fitted share; on a PCIe Gen5 link (63 GB/s) the fitted share binds."""
    engine = registry.engine("sglang-hicache")
    assert engine.copy_rate_cap == 96e9
    c2c = deployment("llama-3.1-8b", accelerator="gb300", engine=engine, registry=registry)
    assert c2c.link_efficiency == pytest.approx(96e9 / 450e9)
    pcie = deployment("llama-3.1-8b", accelerator="h100", engine=engine, registry=registry)
    assert pcie.link_efficiency == engine.link_share
    assert engine_link_share(engine, np.array([63e9, 450e9])) == pytest.approx(
        [engine.link_share, 96e9 / 450e9])


def test_layerwise_engine_overlaps_by_default(registry: Registry) -> None:
    dep = deployment("llama-3.1-8b", accelerator="h100", engine="sglang-hicache",
                     registry=registry)
    assert default_overlap(dep) == "layerwise"
    assert ttft(dep, 64, 8192).overlap == "layerwise"
    assert ttft(dep, 64, 8192, "serial").overlap == "serial"


def test_prefix_reuse_in_whole_blocks(registry: Registry) -> None:
    """With 256-token reuse blocks, K = 1000 loads 768 tokens and recomputes 232 more."""
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=registry,
                     reuse_block_tokens=256)
    plain = dataclasses.replace(dep, reuse_block_tokens=None)
    assert ttft(dep, 16, 1000).ttft == pytest.approx(ttft(plain, 16 + 232, 768).ttft)
    assert ttft(dep, 16, 1024).ttft == ttft(plain, 16, 1024).ttft  # whole blocks: no change
    t = np.array([16.0, 16.0, 1.0])
    k = np.array([1000.0, 1024.0, 255.0])
    got = ttft(dep, t, k).ttft
    want = ttft(plain, t + k % 256, k - k % 256).ttft
    assert np.allclose(got, want)
    batch = ttft_batch(dep, t, k).ttft
    assert batch == pytest.approx(float(ttft_batch(plain, t + k % 256, k - k % 256).ttft))


def test_request_overhead_adds_to_ttft_only(registry: Registry) -> None:
    dep = deployment("llama-3.1-8b", accelerator="h100", registry=registry,
                     request_overhead=5e-3)
    plain = dataclasses.replace(dep, request_overhead=0.0)
    with_overhead, without = ttft(dep, 128, 16384), ttft(plain, 128, 16384)
    assert with_overhead.ttft == pytest.approx(without.ttft + 5e-3)
    assert with_overhead.compute == without.compute
    assert with_overhead.exposed_transfer == pytest.approx(without.exposed_transfer)
    assert with_overhead.as_dict()["request_overhead_s"] == 5e-3
    grid = ttft(dep, np.array([64.0, 128.0]), 16384)
    assert np.allclose(grid.ttft, ttft(plain, np.array([64.0, 128.0]), 16384).ttft + 5e-3)


def test_bad_engine_settings_are_one_line_errors(registry: Registry) -> None:
    with pytest.raises(KvroofError, match="reuse_block_tokens: expected a positive integer"):
        deployment("llama-3.1-8b", accelerator="h100", registry=registry, reuse_block_tokens=0)
    with pytest.raises(KvroofError, match="request_overhead: must not be negative"):
        deployment("llama-3.1-8b", accelerator="h100", registry=registry,
                   request_overhead=-1.0)


def test_copy_size_limits() -> None:
    """Large copies approach the bandwidth, small ones are overhead-bound (S / overhead)."""
    overhead, bandwidth = 2e-6, 50e9
    assert delivered_bandwidth(1e12, overhead, bandwidth) == pytest.approx(bandwidth, rel=1e-4)
    assert delivered_bandwidth(64.0, overhead, bandwidth) == pytest.approx(64 / overhead,
                                                                           rel=1e-3)
    sizes = np.logspace(2, 10, 9)
    delivered = delivered_bandwidth(sizes, overhead, bandwidth)
    assert np.all(np.diff(delivered) > 0) and np.all(delivered < bandwidth)
    assert copy_time(1e6, overhead, bandwidth, copies=10) == pytest.approx(10 * (2e-6 + 2e-5))


def test_transfer_time_is_the_copy_size_model(registry: Registry) -> None:
    """A request loaded by an engine takes K / B copies of one block's bytes each, every copy
    costing overhead + bytes / (share x link): transfer_time and copy_time agree."""
    engine = registry.engine("vllm-0.12-offload")
    model = registry.model("llama-3.1-8b")
    dep = deployment(model, accelerator="h100", engine=engine, registry=registry)
    assert engine.block_tokens is not None and not dep.write_back
    block_bytes = float(kv_bytes(model, engine.block_tokens))
    k = 64 * engine.block_tokens
    expected = copy_time(block_bytes, engine.copy_overhead, engine.link_share * 63e9, copies=64)
    assert transfer_time(dep, k) == pytest.approx(expected)

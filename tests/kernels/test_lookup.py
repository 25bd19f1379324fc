"""The lookup API on synthetic tables (exact expectations) and on the shipped ones (hand
derivations from the measured rows, pinned)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.kernels.tables import KernelTableError, SystemTables
from kvroof.kernels.work import attention_work, gemm_work, moe_work
from kvroof.specs.registry import Registry

# --- synthetic tables ----------------------------------------------------------------------


def test_covered_and_variants_of_given_tables(system: SystemTables) -> None:
    assert kernels.covered(system) == {"gemm", "attention", "moe", "allreduce"}
    assert kernels.variants(system, "attention") == [
        {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 64},
        {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 128}]


def test_gemm_at_grid_points_and_coverage(system: SystemTables) -> None:
    eff, cov = kernels.efficiency(system, "gemm", "bf16", m=[16, 256], n=4096, k=1024)
    expected = [0.1 + 0.05 * 4 + 0.01 * 4, 0.1 + 0.05 * 8 + 0.01 * 4]
    np.testing.assert_allclose(eff, expected, rtol=1e-3)
    assert cov.exact and cov.points == 2 and cov.key == {"dtype": "bf16"}
    assert "vllm 0.0.1 (cublas)" in cov.source and "@0000000000" in cov.source


def test_gemm_outside_is_held_and_reported(system: SystemTables) -> None:
    eff, cov = kernels.gemm_efficiency(system, [8192, 4096, 64], 4096, [1024, 1024, 100_000])
    top, _ = kernels.gemm_efficiency(system, 4096, 4096, 1024)
    assert eff[0] == pytest.approx(float(top))
    assert cov.extrapolated and cov.extrapolated_points == 2
    assert cov.extrapolated_axes == ("m", "k")
    assert cov.outside.tolist() == [True, False, True]
    assert "2 of 3 points outside the table on m, k (boundary held)" in cov.describe()


def test_unknown_dtype_names_what_exists(system: SystemTables) -> None:
    with pytest.raises(KernelTableError, match=r"no gemm table for dtype=fp8 .* dtype=bf16"):
        kernels.gemm_efficiency(system, 1, 1024, 1024, dtype="fp8")


def test_attention_window_and_head_dim_substitution(system: SystemTables) -> None:
    full, cov = kernels.attention_efficiency(system, 1024, 8, 1, 128)
    window_as_long, _ = kernels.attention_efficiency(system, 1024, 8, 1, 128, window=1024)
    window_longer, _ = kernels.attention_efficiency(system, 1024, 8, 1, 128, window=5000)
    assert full == window_as_long == window_longer  # a window >= seq_len is full attention
    expected = math.log2(1024) / 20 + 8 / 1000 + 1 / 10000 + 8192 / 1e6 + 128 / 1e5
    assert float(full) == pytest.approx(expected, rel=1e-3)
    windowed, _ = kernels.attention_efficiency(system, 1024, 8, 1, 128, window=128)
    assert float(windowed) == pytest.approx(expected - (8192 - 128) / 1e6, rel=1e-3)
    assert cov.exact
    # head_dim 96 is not measured: the nearest in log space (128: |ln 96/128| < |ln 96/64|)
    _, sub = kernels.attention_efficiency(system, 1024, 8, 1, 96)
    assert sub.substituted == {"head_dim": (96.0, 128.0)} and not sub.exact
    assert "head_dim 96 not measured, used 128" in sub.describe()
    # a window below the measured ones is outside the window axis
    _, small = kernels.attention_efficiency(system, 1024, 8, 1, 128, window=64)
    assert small.extrapolated_axes == ("window",)


def test_attention_unmeasured_cell_is_reported(system: SystemTables) -> None:
    # the synthetic mask leaves seq_len=1024, heads=64, kv_heads=8, window=128 unmeasured
    _, cov = kernels.attention_efficiency(system, 1024, 64, 8, 128, window=128)
    assert cov.unmeasured and cov.unmeasured_points == 1 and not cov.extrapolated
    _, other = kernels.attention_efficiency(system, 1024, 8, 8, 128, window=128)
    assert not other.unmeasured


def test_moe_shape_selection(system: SystemTables) -> None:
    eff, cov = kernels.moe_efficiency(system, [64, 4096], 4096, 192, 128, 8)
    np.testing.assert_allclose(eff, [0.2 + 0.06 + 0.00192, 0.2 + 0.12 + 0.00192], rtol=1e-3)
    assert cov.exact
    _, near = kernels.moe_efficiency(system, 64, 5120, 192, 160, 8)
    assert near.substituted == {"hidden": (5120.0, 4096.0), "experts": (160.0, 128.0)}
    with pytest.raises(KernelTableError, match=r"distribution=power_law_1\.2"):
        kernels.moe_efficiency(system, 64, 4096, 192, 128, 8, distribution="power_law_1.2")


def test_op_time_is_roofline_over_efficiency(system: SystemTables) -> None:
    time, _ = kernels.op_time(system, "gemm", "bf16", m=256, n=4096, k=1024)
    eff, _ = kernels.gemm_efficiency(system, 256, 4096, 1024)
    flops, bytes_ = gemm_work(256, 4096, 1024)
    assert float(time) == pytest.approx(max(flops / 1e15, bytes_ / 2e12) / float(eff))
    t_attn, _ = kernels.op_time(system, "attention", seq_len=1024, heads=8, kv_heads=1,
                          head_dim=128)
    f, b = attention_work(1024, 8, 1, 128)
    e, _ = kernels.attention_efficiency(system, 1024, 8, 1, 128)
    assert float(t_attn) == pytest.approx(max(f / 1e15, b / 2e12) / float(e))
    t_moe, _ = kernels.op_time(system, "moe", tokens=64, hidden=4096, inter_per_rank=192,
                         experts=128, top_k=8)
    f, b = moe_work(64, 4096, 192, 128, 8)
    e, _ = kernels.moe_efficiency(system, 64, 4096, 192, 128, 8)
    assert float(t_moe) == pytest.approx(max(f / 1e15, b / 2e12) / float(e))
    with pytest.raises(KernelTableError, match="gemm takes m, n, k, not heads"):
        kernels.op_time(system, "gemm", m=1, n=1, k=1, heads=2)
    with pytest.raises(KernelTableError, match="unknown kernel op 'mla'"):
        kernels.efficiency(system, "mla")


def test_allreduce_time_rules(system: SystemTables) -> None:
    times, cov = kernels.allreduce_time(system, "nccl", [1, 2, 8, 8, 8, 16], [2**20, 2**20, 2**20,
                                                                      512, 2**27, 2**20])
    at = lambda b, g: 1e-5 + b / 3e11 * (g - 1) / g  # noqa: E731
    assert times[0] == 0.0  # one GPU: nothing to reduce
    assert times[1] == pytest.approx(at(2**20, 2), rel=1e-3)
    assert times[2] == pytest.approx(at(2**20, 8), rel=1e-3)
    assert times[3] == pytest.approx(at(1024, 8), rel=1e-3)  # below: the floor held
    assert times[4] == pytest.approx(at(2**26, 8) * 2, rel=1e-3)  # above: bandwidth held
    assert times[5] == pytest.approx(at(2**20, 8), rel=1e-3)  # more GPUs: held at 8
    assert cov.outside.tolist() == [False, False, False, True, True, True]
    assert set(cov.extrapolated_axes) == {"message_bytes", "num_gpus"}
    assert "nccl 1" in cov.source
    with pytest.raises(KernelTableError, match="num_gpus"):
        kernels.allreduce_time(system, "nccl", 0, 1024)


def test_provenance_merges_source_and_table(system: SystemTables) -> None:
    prov = kernels.provenance(system, "gemm")
    assert prov["commit"] == "0" * 40 and prov["license"] == "Apache-2.0"
    assert prov["files"] == ["gemm_perf.parquet"] and prov["peak_flops"] == {"bf16": 1e15}
    prov["files"].append("x")  # a copy: the table is not changed
    assert kernels.provenance(system, "gemm")["files"] == ["gemm_perf.parquet"]


# --- shipped tables ------------------------------------------------------------------------

def test_unknown_accelerator_has_empty_coverage() -> None:
    assert kernels.covered("no-such-gpu") == frozenset()
    assert kernels.covered("mi300x") == frozenset()  # a spec, but no measurements
    with pytest.raises(KernelTableError, match="no kernel tables for accelerator 'mi300x'"):
        kernels.efficiency("mi300x", "gemm", m=1, n=1, k=1)


def test_every_mapped_system_is_shipped_with_every_op() -> None:
    assert set(kernels.shipped()) == {"a100-sxm", "b200", "b300", "gb200", "gb300", "h100-sxm",
                                "h200", "l40s", "rtx-pro-6000-server"}
    for name in kernels.shipped():
        assert kernels.covered(name) == {"gemm", "attention", "moe", "allreduce"}, name


def test_aliases_and_spec_objects_resolve() -> None:
    registry = Registry(use_env=False)
    assert kernels.covered("h100") == kernels.covered("H100-SXM5") == kernels.covered("h100-sxm")
    assert kernels.covered(registry.accelerator("h200")) == kernels.covered("h200")
    _, cov = kernels.gemm_efficiency("h100", 64, 8192, 8192)
    assert cov.accelerator == "h100-sxm"


def test_shipped_tables_fit_the_budget() -> None:
    from kvroof.kernels import store

    total = sum(p.stat().st_size for p in store.DATA_DIR.iterdir())
    assert total < 3_000_000
    assert (store.DATA_DIR / "NOTICE").read_text().count("Apache License, Version 2.0") == 1


def test_provenance_of_a_shipped_table() -> None:
    prov = kernels.provenance("h100-sxm", "gemm")
    assert prov["repository"] == "https://github.com/ai-dynamo/aiconfigurator"
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
    assert prov["license"] == "Apache-2.0"
    assert (prov["framework"], prov["version"]) == ("vllm", "0.24.0")
    assert prov["files"] == ["aic-core/src/aiconfigurator_core/systems/data/h100_sxm/gemm/"
                             "vllm/0.24.0/gemm_perf.parquet"]
    assert prov["devices"] == ["NVIDIA H100 80GB HBM3"]
    assert prov["rows_used"] > 10_000 and prov["rows_in_files"] >= prov["rows_used"]
    assert prov["peak_flops"]["bf16"] == 989.4e12 and prov["hbm_bandwidth"] == 3.35e12
    assert kernels.provenance("h100-sxm", "allreduce")["backends"]["vllm_graph"] == "vllm 0.24.0"


# Hand derivations from rows of aiconfigurator's h100_sxm tables (commit in provenance); the
# latencies (ms) are copied from the rows; peaks from hardware_specs/accelerators/h100-sxm.yaml.
PEAK_BF16 = 989.4e12
HBM = 3.35e12


def test_h100_bf16_gemm_8192_cubed() -> None:
    latency = 1.541708e-3  # gemm/vllm/0.24.0: bfloat16, m = n = k = 8192
    expected = 2 * 8192**3 / PEAK_BF16 / latency  # compute-bound: 0.7208
    eff, cov = kernels.gemm_efficiency("h100-sxm", 8192, 8192, 8192)
    assert float(eff) == pytest.approx(expected, rel=1e-3)
    assert cov.exact


def test_h100_bf16_gemm_m64_is_bandwidth_bound() -> None:
    latency = 0.047361e-3  # m = 64, n = k = 8192
    bytes_ = 64 * 8192 * 2 + 8192 * 8192 * 2 + 64 * 8192 * 2
    assert bytes_ / HBM > 2 * 64 * 8192**2 / PEAK_BF16
    eff, _ = kernels.gemm_efficiency("h100-sxm", 64, 8192, 8192)
    assert float(eff) == pytest.approx(bytes_ / HBM / latency, rel=1e-3)  # 0.8592


def test_h100_fa3_attention_llama70b_tp8_rank() -> None:
    latency = 0.221435e-3  # attention/vllm/0.24.0: fa3, S 8192, h 8, kv 1, d 128, bf16
    flops = 4 * 8 * 128 * 8192 * 8193 / 2
    eff, cov = kernels.attention_efficiency("h100-sxm", 8192, 8, 1, 128)
    assert float(eff) == pytest.approx(flops / PEAK_BF16 / latency, rel=1e-3)  # 0.6274
    assert "vllm_flash_attn_fa3" in cov.source


def test_h100_moe_qwen3_235b_tp8_4k_tokens() -> None:
    latency = 0.652624e-3  # moe/vllm/0.24.0: bf16, 4096 tokens, h 4096, inter 1536/8, E 128
    weights = 128 * 3 * 4096 * 192 * 2  # every expert is touched at 4096 x 8 pairs
    bytes_ = weights + 4 * 4096 * 4096
    flops = 6 * 4096 * 8 * 4096 * 192
    expected = max(flops / PEAK_BF16, bytes_ / HBM) / latency  # 0.3070 (HBM-bound)
    eff, cov = kernels.moe_efficiency("h100-sxm", 4096, 4096, 192, 128, 8)
    assert float(eff) == pytest.approx(expected, rel=1e-3)
    assert cov.exact and cov.key["distribution"] == "balanced"
    skewed, _ = kernels.moe_efficiency("h100-sxm", 4096, 4096, 192, 128, 8,
                                 distribution="power_law_1.01")
    assert float(skewed) == pytest.approx(max(flops / PEAK_BF16, bytes_ / HBM) / 0.740653e-3,
                                          rel=1e-3)


def test_h100_custom_allreduce_graph_1mib_8gpus() -> None:
    t, cov = kernels.allreduce_time("h100-sxm", "vllm_graph", 8, 2**20)  # 524288 bf16 elements
    assert float(t) == pytest.approx(0.014968e-3, rel=1e-3)
    eager, _ = kernels.allreduce_time("h100-sxm", "vllm_eager", 8, 2**19)
    assert float(eager) == pytest.approx(0.040013e-3, rel=1e-3)
    assert cov.exact


def test_shipped_out_of_range_queries_report_extrapolation() -> None:
    _, cov = kernels.gemm_efficiency("h100-sxm", [8192, 65536], 8192, 8192)
    assert cov.extrapolated_points == 1 and cov.extrapolated_axes == ("m",)
    _, cov = kernels.attention_efficiency("h100-sxm", 32768, 8, 1, 128)
    assert cov.extrapolated_axes == ("seq_len",)
    _, cov = kernels.moe_efficiency("h100-sxm", 65536, 4096, 192, 128, 8)
    assert cov.extrapolated_axes == ("tokens",)
    _, cov = kernels.allreduce_time("h100-sxm", "nccl", 16, 2**20)
    assert cov.extrapolated_axes == ("num_gpus",)


def test_vectorized_lookup_matches_scalar_lookups() -> None:
    m = np.array([1, 7, 100, 3000, 20000])
    n = np.array([4096, 1280, 7168, 3584, 28672])
    eff, _ = kernels.gemm_efficiency("h100-sxm", m, n, 8192, dtype="fp8")
    for i in range(m.size):
        one, _ = kernels.gemm_efficiency("h100-sxm", int(m[i]), int(n[i]), 8192, dtype="fp8")
        assert eff[i] == pytest.approx(float(one), rel=1e-12)

"""Helpers for the kernel-table tests: small synthetic tables with known values."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.kernels.tables import Grid, SystemTables, Table, Variant, round_value


def grid(axes: dict[str, list[float]], function, measured=None) -> Grid:
    """A grid whose values are ``function(*coordinates)`` (rounded as stored)."""
    points = tuple(np.asarray(p, dtype=np.float64) for p in axes.values())
    mesh = np.meshgrid(*points, indexing="ij")
    values = np.vectorize(round_value)(np.asarray(function(*mesh), dtype=np.float64))
    mask = np.ones(values.shape, dtype=bool) if measured is None else measured
    return Grid(tuple(axes), points, values.astype(np.float64), mask)


def synthetic_system() -> SystemTables:
    """One accelerator with every op, values made from simple formulas of the coordinates."""
    gemm = Table("gemm", "efficiency", ("dtype",), ("m", "n", "k"), (
        Variant({"dtype": "bf16"}, grid({"m": [1, 16, 256, 4096], "n": [1024, 4096],
                                         "k": [1024, 8192]},
                                        lambda m, n, k: 0.1 + 0.05 * np.log2(m)
                                        + 0.01 * np.log2(n / k) ** 2),
                "bf16", 16, {"cublas": 16}),
    ), {"framework": "vllm", "version": "0.0.1", "files": ["gemm_perf.parquet"]})
    measured = np.ones((3, 2, 2, 2), dtype=bool)
    measured[1, 1, 1, 0] = False
    attention = Table("attention", "efficiency", ("dtype", "kv_dtype", "head_dim"),
                      ("seq_len", "heads", "kv_heads", "window"), tuple(
        Variant({"dtype": "bf16", "kv_dtype": "bf16", "head_dim": d},
                grid({"seq_len": [128, 1024, 8192], "heads": [8, 64], "kv_heads": [1, 8],
                      "window": [128, 8192]},
                     lambda s, h, kv, w, d=d: np.log2(s) / 20 + h / 1000 + kv / 10000
                     + w / 1e6 + d / 1e5, measured),
                "bf16", 24, {"fa3": 24})
        for d in (64, 128)), {"framework": "vllm", "version": "0.0.1"})
    moe = Table("moe", "efficiency", ("dtype", "distribution", "hidden", "experts", "top_k"),
                ("tokens", "inter_per_rank"), (
        Variant({"dtype": "bf16", "distribution": "balanced", "hidden": 4096, "experts": 128,
                 "top_k": 8},
                grid({"tokens": [1, 64, 4096], "inter_per_rank": [192, 1536]},
                     lambda t, i: 0.2 + 0.01 * np.log2(t) + i / 1e5), "bf16", 6, {}),
    ), {"framework": "vllm", "version": "0.0.1"})
    allreduce = Table("allreduce", "time", ("backend",), ("message_bytes", "num_gpus"), (
        Variant({"backend": "nccl"},
                grid({"message_bytes": [1024, 2**20, 2**26], "num_gpus": [2, 8]},
                     lambda b, g: 1e-5 + b / 3e11 * (g - 1) / g), "", 6, {"NCCL": 6}),
    ), {"framework": "per backend", "version": "per backend", "backends": {"nccl": "nccl 1"}})
    return SystemTables(
        accelerator="test-gpu", source_system="test_gpu", device="Test GPU",
        peak_flops={"bf16": 1e15}, hbm_bandwidth=2e12,
        source={"repository": "https://example.invalid/repo", "commit": "0" * 40,
                "license": "Apache-2.0"},
        tables={"gemm": gemm, "attention": attention, "moe": moe, "allreduce": allreduce},
    )


@pytest.fixture()
def system() -> SystemTables:
    return synthetic_system()

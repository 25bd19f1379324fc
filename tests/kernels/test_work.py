"""The counts of kvroof.kernels.work, the one place the FLOPs and bytes of a kernel call are
written: the same values on floats and arrays (floats back for floats), each data type's bytes
from its table, and the caller's own counts where one is given."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.kernels.work import (
    GEMM_DTYPES,
    KV_DTYPES,
    MOE_DTYPES,
    attention_pairs,
    attention_work,
    gemm_work,
    kv_bytes,
    moe_work,
)


@pytest.mark.parametrize("dtype", sorted(GEMM_DTYPES))
def test_gemm_counts_by_dtype_on_floats_and_arrays(dtype: str) -> None:
    info = GEMM_DTYPES[dtype]
    m = np.array([1.0, 64.0, 8192.0])
    flops, size = gemm_work(m, 4096.0, 1024.0, dtype)
    np.testing.assert_array_equal(flops, 2 * m * 4096 * 1024)
    np.testing.assert_array_equal(size, m * 1024 * info.activation_bytes
                                  + 1024 * 4096 * info.weight_bytes + 2 * m * 4096)
    for i, value in enumerate(m):
        f, b = gemm_work(float(value), 4096.0, 1024.0, dtype)
        assert type(f) is float and type(b) is float
        assert (f, b) == (flops[i], size[i])
    f_int, b_int = gemm_work(64, 4096, 1024, dtype)  # ints and lists are taken too
    assert (f_int, b_int) == (flops[1], size[1])
    f_list, _ = gemm_work([1, 64], 4096, 1024, dtype)
    np.testing.assert_array_equal(f_list, flops[:2])


def test_gemm_without_a_table_dtype_takes_its_weight_bytes() -> None:
    flops, size = gemm_work(64.0, 4096.0, 1024.0, None, weight_bytes=4.0)
    assert flops == 2 * 64 * 4096 * 1024
    assert size == 64 * 1024 * 2 + 1024 * 4096 * 4 + 2 * 64 * 4096  # 16-bit activations
    with pytest.raises(KvroofError, match="needs its weight_bytes"):
        gemm_work(64.0, 4096.0, 1024.0, None)
    with pytest.raises(KvroofError, match="no roofline definition"):
        gemm_work(64.0, 4096.0, 1024.0, "int8")
    _, fp8 = gemm_work(64.0, 4096.0, 1024.0, "fp8", activation_bytes=2.0)
    assert fp8 == 64 * 1024 * 2 + 1024 * 4096 * 1 + 2 * 64 * 4096


@pytest.mark.parametrize("dtype", sorted(MOE_DTYPES))
def test_moe_counts_by_dtype(dtype: str) -> None:
    w = MOE_DTYPES[dtype].weight_bytes
    tokens = np.array([1.0, 4.0, 16.0, 4096.0])
    flops, size = moe_work(tokens, 4096.0, 192.0, 128.0, 8.0, dtype)
    touched = np.minimum(128, 8 * tokens)  # every pair on a distinct expert until all are used
    np.testing.assert_array_equal(flops, 6 * tokens * 8 * 4096 * 192)
    np.testing.assert_array_equal(size, touched * 3 * 4096 * 192 * w + 4 * tokens * 4096)
    for i, t in enumerate(tokens):
        f, b = moe_work(float(t), 4096.0, 192.0, 128.0, 8.0, dtype)
        assert type(f) is float and (f, b) == (flops[i], size[i])


def test_moe_takes_the_callers_touched_experts() -> None:
    _, size = moe_work(16.0, 4096.0, 192.0, 128.0, 8.0, None, weight_bytes=1.0, touched=82.5)
    assert size == 82.5 * 3 * 4096 * 192 * 1.0 + 4 * 16 * 4096
    _, arrays = moe_work(np.array([16.0, 32.0]), 4096.0, 192.0, 128.0, 8.0, "bf16",
                         touched=np.array([82.5, 110.0]))
    np.testing.assert_array_equal(arrays, np.array([82.5, 110.0]) * 3 * 4096 * 192 * 2
                                  + 4 * np.array([16.0, 32.0]) * 4096)


def test_attention_pairs_and_counts_on_floats_and_arrays() -> None:
    s = np.array([1.0, 100.0, 512.0, 4096.0])
    for window in (0.0, 512.0, 1024.0):
        pairs = attention_pairs(s, window)
        for i, value in enumerate(s):
            brute = sum(min(q + 1, window) if window else q + 1 for q in range(int(value)))
            assert pairs[i] == brute
            single = attention_pairs(float(value), window)
            assert type(single) is float and single == brute
    np.testing.assert_array_equal(attention_pairs(s, np.array([0.0, 50.0, 50.0, 8192.0])),
                                  [1.0, 50 * 51 / 2 + 50 * 50, 50 * 51 / 2 + 462 * 50,
                                   4096 * 4097 / 2])
    for kv_dtype, c in KV_DTYPES.items():
        assert kv_bytes(kv_dtype) == c
        flops, size = attention_work(1024.0, 8.0, 1.0, 128, 0, "bf16", kv_dtype)
        assert type(flops) is float
        assert flops == 4 * 8 * 128 * 1024 * 1025 / 2
        assert size == 1024 * 128 * (2 * 8 * 2 + 2 * 1 * c)
    with pytest.raises(KvroofError, match="KV dtype 'int8'"):
        attention_work(1024.0, 8.0, 1.0, 128, kv_dtype="int8")

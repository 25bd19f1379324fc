"""tools/kernels/derive.py: its helpers, and a whole derivation from a small synthetic
checkout (written here with pyarrow) whose efficiencies are known by hand."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.kernels.tables import read_system

REPO = Path(__file__).resolve().parents[2]


def _load_derive():
    spec = importlib.util.spec_from_file_location("kvroof_derive",
                                                  REPO / "tools/kernels/derive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kvroof_derive"] = module
    spec.loader.exec_module(module)
    return module


derive = _load_derive()


def test_version_order() -> None:
    versions = ["1.3.0rc20", "1.3.0rc9", "1.2.0rc5", "1.3.0", "0.5.6.post2", "0.5.10",
                "0.5.9", "1.3.0.post1"]
    assert sorted(versions, key=derive.version_key) == [
        "0.5.6.post2", "0.5.9", "0.5.10", "1.2.0rc5", "1.3.0rc9", "1.3.0rc20", "1.3.0",
        "1.3.0.post1"]


def test_coarse_ladder() -> None:
    assert derive.coarse([1, 2, 3, 5, 6, 7, 12, 17, 24, 48, 96, 3584, 4096, 51200, 0]) == [
        1, 2, 3, 6, 12, 24, 48, 96, 4096]


def test_fill_keeps_measured_cells_and_interpolates_in_log_space() -> None:
    nan = math.nan
    values = np.array([[1.0, nan, 3.0, nan],
                       [nan, nan, nan, nan],
                       [2.0, nan, 4.0, 5.0]])
    logs = [np.log([1.0, 10.0, 100.0]), np.log([1.0, 2.0, 4.0, 8.0])]
    out = derive.fill(values, logs)
    known = np.isfinite(values)
    np.testing.assert_array_equal(out[known], values[known])
    assert out[0, 1] == pytest.approx(2.0)  # between 1 and 3 along its row (log 2 midway)
    assert out[1, 0] == pytest.approx(1.5)  # between 1 and 2 along its column
    assert out[2, 1] == pytest.approx(3.0)
    assert out[1, 2] == pytest.approx(3.5)
    assert out[1, 1] == pytest.approx(2.5)  # second pass: bracketed by filled cells
    # no cell can be bracketed any more: the mean of the values held along each axis
    assert out[0, 3] == pytest.approx((3.0 + 5.0) / 2)
    assert np.isfinite(out).all()


def test_fill_refuses_an_empty_grid() -> None:
    with pytest.raises(ValueError, match="no measured cell"):
        derive.fill(np.full((2, 2), math.nan), [np.log([1.0, 2.0])] * 2)


# --- a synthetic checkout ---------------------------------------------------------------------

def _write(root: Path, relpath: str, columns: dict[str, list]) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow writes the synthetic parquet files")
    import pyarrow.parquet as pq

    path = root / derive.DATA_PATH / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


@pytest.fixture()
def fake_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "aic"
    n = 3
    _write(root, "h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet", {
        "device": ["NVIDIA H100"] * n, "kernel_source": ["cublas"] * n,
        "gemm_dtype": ["bfloat16"] * n, "m": [1024, 1024, 100], "n": [8192] * n,
        "k": [8192] * n, "latency": [0.2, 0.25, 9.9]})  # m=100 is off the ladder
    _write(root, "h100_sxm/gemm/sglang/0.5.14/gemm_perf.parquet", {
        "device": ["NVIDIA H100"], "kernel_source": ["x"], "gemm_dtype": ["bfloat16"],
        "m": [1], "n": [1], "k": [1], "latency": [1.0]})
    (root / derive.DATA_PATH / "h100_sxm/gemm/vllm/0.25.0").mkdir(parents=True)
    (root / derive.DATA_PATH / "h100_sxm/gemm/vllm/0.25.0/reuse.yaml").write_text(
        "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.24.0\n")
    _write(root, "h100_sxm/comm/nccl/2.29.2/nccl_perf.parquet", {
        "device": ["NVIDIA H100"] * 3, "kernel_source": ["NCCL"] * 3,
        "op_name": ["all_reduce", "all_reduce", "all_gather"],
        "nccl_dtype": ["half", "int8", "half"], "num_gpus": [8, 8, 8],
        "message_size": [1024, 1024, 1024], "latency": [0.01, 0.5, 0.5]})
    _write(root, "b60/gemm/vllm/0.20.0/gemm_perf.parquet", {
        "device": ["Intel"], "kernel_source": ["x"], "gemm_dtype": ["bfloat16"], "m": [1],
        "n": [1], "k": [1], "latency": [1.0]})
    return root


def test_derivation_of_a_synthetic_checkout(fake_checkout: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    lines: list[str] = []
    index = derive.derive(derive.Source(fake_checkout), out, echo=lines.append)
    assert set(index["accelerators"]) == {"h100-sxm"}
    assert index["skipped"]["b60"] == "no kvroof accelerator spec for this system"
    assert "gemm: vllm 0.24.0" in "\n".join(lines)
    system = read_system(out / "h100-sxm.json.gz")
    assert set(system.tables) == {"gemm", "allreduce"}
    # one cell (m 1024, n = k = 8192) measured twice (0.2 and 0.25 ms): the median of the
    # two efficiencies
    roofline = 2 * 1024 * 8192**2 / 989.4e12
    expected = (roofline / 0.2e-3 + roofline / 0.25e-3) / 2
    eff, _ = kernels.gemm_efficiency(system, 1024, 8192, 8192)
    assert float(eff) == pytest.approx(expected, rel=5e-4)
    prov = kernels.provenance(system, "gemm")
    assert (prov["framework"], prov["version"], prov["rows_used"]) == ("vllm", "0.24.0", 2)
    assert prov["declared_for_versions"] == ["0.25.0"]
    assert prov["other_frameworks"] == ["sglang 0.5.14"]
    t, _ = kernels.allreduce_time(system, "nccl", 8, 2048)  # 1024 half elements
    assert float(t) == pytest.approx(0.01e-3)
    doc = json.loads((out / "index.json").read_text())
    assert doc["source"]["repository"] == "https://github.com/ai-dynamo/aiconfigurator"
    assert "Apache License, Version 2.0" in (out / "NOTICE").read_text()

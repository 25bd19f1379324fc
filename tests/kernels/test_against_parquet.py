"""The shipped efficiencies against values computed here directly from aiconfigurator's
parquet rows, and the derivation reproduced byte for byte.

Needs pyarrow (the ``kernels`` extra) and a checkout of ai-dynamo/aiconfigurator at the commit
the tables were derived from: a folder or git directory named by ``KVROOF_AICONFIGURATOR``, else
``../.mirror/ai-dynamo+aiconfigurator/repo`` beside this repository. Skipped otherwise.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kvroof.kernels as kernels
from kvroof.kernels import store

REPO = Path(__file__).resolve().parents[2]
DATA = "aic-core/src/aiconfigurator_core/systems/data"


def _checkout() -> Path | None:
    env = os.environ.get("KVROOF_AICONFIGURATOR")
    candidates = [Path(env)] if env else [REPO.parent / ".mirror/ai-dynamo+aiconfigurator/repo"]
    for path in candidates:
        if (path / DATA).is_dir() or (path / "HEAD").is_file():
            return path
    return None


CHECKOUT = _checkout()
pa = pytest.importorskip("pyarrow", reason="pyarrow (the 'kernels' extra) reads the parquet "
                                           "files")
pytestmark = pytest.mark.skipif(CHECKOUT is None, reason="no aiconfigurator checkout: set "
                                "KVROOF_AICONFIGURATOR to a folder or git directory")


def _commit(path: Path) -> str:
    args = ["git", "-C", str(path), "rev-parse", "HEAD"]
    if not (path / DATA).is_dir():
        args = ["git", "--git-dir", str(path), "rev-parse", "HEAD"]
    return subprocess.run(args, capture_output=True, text=True, check=False).stdout.strip()


@pytest.fixture(scope="module")
def checkout() -> Path:
    assert CHECKOUT is not None
    shipped = store.index()["source"]["commit"]
    if _commit(CHECKOUT) != shipped:
        pytest.skip(f"the checkout is not at commit {shipped}, which the tables come from")
    return CHECKOUT


def rows(checkout: Path, relpath: str) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    if (checkout / DATA).is_dir():
        data = (checkout / relpath).read_bytes()
    else:
        data = subprocess.run(["git", "--git-dir", str(checkout), "cat-file", "blob",
                               f"HEAD:{relpath}"], capture_output=True, check=True).stdout
    table = pq.read_table(io.BytesIO(data))
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}


def spec(name: str) -> tuple[dict[str, float], float]:
    prov = kernels.provenance(name, "gemm")
    return prov["peak_flops"], prov["hbm_bandwidth"]


LADDER = {float(b * 2**i) for b in (1, 3) for i in range(20)}


@pytest.mark.parametrize("name", ["h100-sxm", "b200", "l40s"])
def test_gemm_rows(checkout: Path, name: str) -> None:
    prov = kernels.provenance(name, "gemm")
    r = rows(checkout, prov["files"][0])
    peaks, hbm = spec(name)
    rng = np.random.default_rng(0)
    on = np.array([m in LADDER and n in LADDER and k in LADDER
                   for m, n, k in zip(r["m"], r["n"], r["k"], strict=True)])
    bf16 = on & (r["gemm_dtype"] == "bfloat16")
    fp8 = on & (r["gemm_dtype"] == "fp8")
    for pick, dtype, peak, size in ((bf16, "bf16", peaks["bf16"], 2), (fp8, "fp8",
                                                                        peaks["fp8"], 1)):
        for i in rng.choice(np.flatnonzero(pick), 25, replace=False):
            m, n, k = (float(r[c][i]) for c in ("m", "n", "k"))
            roofline = max(2 * m * n * k / peak, (m * k * size + k * n * size + 2 * m * n) / hbm)
            expected = roofline / (r["latency"][i] * 1e-3)
            eff, cov = kernels.gemm_efficiency(name, m, n, k, dtype=dtype)
            assert float(eff) == pytest.approx(expected, rel=6e-4), (m, n, k, dtype)
            assert cov.exact


@pytest.mark.parametrize("name", ["h100-sxm", "gb200"])
def test_attention_rows(checkout: Path, name: str) -> None:
    prov = kernels.provenance(name, "attention")
    r = rows(checkout, prov["files"][0])
    peaks, hbm = spec(name)
    pick = np.flatnonzero((r["batch_size"] == 1) & (r["kv_cache_dtype"] == "bfloat16")
                          & (r["window_size"] == 0) & (r["isl"] >= 64))
    for i in np.random.default_rng(1).choice(pick, 30, replace=False):
        s, h, kv, d = (float(r[c][i]) for c in ("isl", "num_heads", "num_key_value_heads",
                                                "head_dim"))
        flops = 4 * h * d * s * (s + 1) / 2
        bytes_ = s * d * (2 * h * 2 + 2 * kv * 2)
        expected = max(flops / peaks["bf16"], bytes_ / hbm) / (r["latency"][i] * 1e-3)
        eff, cov = kernels.attention_efficiency(name, s, h, kv, int(d))
        assert float(eff) == pytest.approx(expected, rel=6e-4), (s, h, kv, d)
        assert cov.exact


def test_moe_rows(checkout: Path) -> None:
    prov = kernels.provenance("h100-sxm", "moe")
    r = rows(checkout, prov["files"][0])
    peaks, hbm = spec("h100-sxm")
    pick = np.flatnonzero((r["moe_dtype"] == "bfloat16") & (r["moe_ep_size"] == 1)
                          & (r["distribution"] == "balanced"))
    checked = 0
    for i in np.random.default_rng(2).choice(pick, 60, replace=False):
        t, h, inter, e, k, tp = (float(r[c][i]) for c in (
            "num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size"))
        i_rank = inter / tp
        same = pick[(r["hidden_size"][pick] == h) & (r["num_experts"][pick] == e)
                    & (r["topk"][pick] == k) & (r["num_tokens"][pick] == t)
                    & (r["inter_size"][pick] / r["moe_tp_size"][pick] == i_rank)]
        flops = 6 * t * k * h * i_rank
        bytes_ = min(e, t * k) * 3 * h * i_rank * 2 + 4 * t * h
        effs = max(flops / peaks["bf16"], bytes_ / hbm) / (r["latency"][same] * 1e-3)
        eff, cov = kernels.moe_efficiency("h100-sxm", t, int(h), i_rank, int(e), int(k))
        assert float(eff) == pytest.approx(float(np.median(effs)), rel=6e-4)
        assert cov.exact
        checked += 1
    assert checked == 60


def test_allreduce_rows(checkout: Path) -> None:
    prov = kernels.provenance("h100-sxm", "allreduce")
    custom = rows(checkout, next(f for f in prov["files"] if "/vllm/" in f))
    nccl = rows(checkout, next(f for f in prov["files"] if "/nccl/" in f))
    for i in range(len(custom["latency"])):
        t, _ = kernels.allreduce_time("h100-sxm", str(custom["backend"][i]),
                                int(custom["num_gpus"][i]), 2 * int(custom["message_size"][i]))
        assert float(t) == pytest.approx(custom["latency"][i] * 1e-3, rel=6e-4)
    ar = np.flatnonzero((nccl["op_name"] == "all_reduce") & (nccl["nccl_dtype"] == "half"))
    for i in ar:
        t, _ = kernels.allreduce_time("h100-sxm", "nccl", int(nccl["num_gpus"][i]),
                                2 * int(nccl["message_size"][i]))
        assert float(t) == pytest.approx(nccl["latency"][i] * 1e-3, rel=6e-4)


def test_derivation_reproduces_a_shipped_file(checkout: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "tools/kernels/derive.py"),
                           "--aiconfigurator", str(checkout), "--out", str(tmp_path),
                           "--system", "a100_sxm"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "a100_sxm -> a100-sxm" in done.stdout
    name = store.index()["accelerators"]["a100-sxm"]["file"]
    assert (tmp_path / name).read_bytes() == (store.DATA_DIR / name).read_bytes()
    assert (tmp_path / "NOTICE").read_text() == (store.DATA_DIR / "NOTICE").read_text()

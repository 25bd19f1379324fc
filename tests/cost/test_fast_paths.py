"""The fast paths of the cost model (floats for scalars, per-T and per-K parts kept apart for
grids, lazily derived result fields) give the same numbers as the straightforward reference
implementation the package had before them (tests/cost/reference_model.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.timing import compute_breakdown, ttft
from kvroof.cost.transfer import transfer_time
from kvroof.specs.hardware import Calibration
from kvroof.specs.registry import Registry
from tests.cost import reference_model as reference

REG = Registry(use_env=False)
FIELDS = ("ttft", "compute", "transfer", "exposed_transfer", "p_oh", "transfer_share", "bound",
          "flops", "achieved_flops", "compute_utilization")


def roofline(model: str, **settings: Any) -> Deployment:
    """A deployment timed by the whole-model roofline: the reference implementation is the
    roofline (the paper's formulas), so every deployment compared with it is too."""
    return deployment(model, registry=REG, compute_model="roofline", **settings)


def _calibrated() -> Deployment:
    testbed = REG.system("paper-testbed")
    system = testbed.model_copy(update={"calibration": Calibration(
        compute_efficiency_max=0.6, compute_half_tokens=400, link_bandwidth=15e9,
        link_latency=2e-6, hbm_efficiency=0.7)})
    return roofline("llama-3.1-70b", system=system, tp=8)


DEPLOYMENTS = {
    "qwen-dgx-h100-tp8": lambda: roofline("qwen3-235b-a22b", system="dgx-h100", tp=8),
    "deepseek-h200-rank0": lambda: roofline("deepseek-v3", system="hgx-h200", tp=8,
                                            mla_tp_load="rank0-broadcast", mla_mode="absorbed"),
    "deepseek-h200-allgather": lambda: roofline("deepseek-v3", system="hgx-h200", tp=8,
                                                mla_tp_load="shard-allgather"),
    "gpt-oss-window-whole-copies": lambda: roofline(
        "gpt-oss-120b", accelerator="h100", write_back=False,
        granularity={"block_tokens": None, "layout": "per-layer-kv"}),
    "llama-busy-c2c-interleaved": lambda: roofline(
        "llama-3.1-70b", system="dgx-h100", tp=4, iteration_tokens=8192,
        host_memory_locality="interleaved", bandwidth_source="sustained",
        overlap_efficiency=0.7),
    "calibrated": _calibrated,
    "array-bandwidth": lambda: roofline(
        "qwen3-235b-a22b", accelerator="h100", tp=8,
        bandwidth=np.array([15e9, 63e9, 450e9])[:, None, None]),
}


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
@pytest.mark.parametrize("overlap", ["serial", "layerwise", "ideal"])
def test_grid_equals_reference(name: str, overlap: str) -> None:
    dep = DEPLOYMENTS[name]()
    t = np.array([0.0, 1.0, 16.0, 128.0, 1000.0, 8192.0])
    k = np.array([0.0, 1.0, 100.0, 65536.0, 1e6])
    tt, kk = t[:, None, None], k[None, None, :]
    if name.startswith("array"):
        tt, kk = t[None, :, None], k[None, None, :]
    if name == "llama-busy-c2c-interleaved":
        tt = tt[tt <= 8192].reshape(-1, 1, 1)
    fast = ttft(dep, tt, kk, overlap)  # type: ignore[arg-type]
    slow = reference.ttft_fields(dep, tt, kk, overlap)
    scale = float(np.max(slow["ttft"]))
    for field in FIELDS:
        got = np.asarray(getattr(fast, field))
        # every field of a result has the broadcast shape of all its inputs
        want = np.broadcast_to(np.asarray(slow[field]), got.shape)
        assert got.shape == np.broadcast_shapes(*(np.shape(v) for v in slow.values())), field
        if want.dtype.kind in "US":
            assert np.array_equal(got, want), field
        elif field in ("exposed_transfer", "transfer_share"):  # differences of near-equal times
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(scale, 1.0),
                                       err_msg=field)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=field)


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_scalars_equal_grids_and_reference(name: str) -> None:
    """A scalar call returns Python floats equal to the grid call's element."""
    dep = DEPLOYMENTS[name]()
    if name.startswith("array"):
        return
    for t, k in ((1, 0), (128, 16384), (512.0, 1e6), (0, 100)):
        fast = ttft(dep, t, k, "layerwise")
        slow = reference.ttft_fields(dep, float(t), float(k), "layerwise")
        assert type(fast.ttft) is float and isinstance(fast.bound, str)
        for field in FIELDS:
            got, want = getattr(fast, field), slow[field]
            if isinstance(got, str):
                assert got == str(want), field
            else:
                assert got == pytest.approx(float(want), rel=1e-12, abs=0), field
        assert compute_breakdown(dep, t, k).total == pytest.approx(float(slow["compute"]),
                                                                   rel=1e-12)
        assert transfer_time(dep, k, t) == pytest.approx(float(slow["transfer"]), rel=1e-12)

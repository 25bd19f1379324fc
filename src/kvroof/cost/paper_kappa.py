"""kappa_crit in the paper's form (Meng, Lee, Wang, arXiv 2601.19910, Eq. 6)::

    kappa_M = 2 x N_active / B_kv      (FLOP per byte of KV; a model property)
    kappa_HW = BW / C                  (bytes per FLOP; a hardware property)
    kappa_crit = kappa_M x kappa_HW

The full form, with everything the cost model counts, is :func:`kvroof.cost.kappa.kappa_crit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import positive, scalar_or_array
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.params import param_counts

__all__ = ["PaperKappa", "kappa_paper", "kappa_paper_for"]


@dataclass(frozen=True)
class PaperKappa:
    """The paper's three factors (SI: FLOP/B, B/FLOP, dimensionless) and their inputs."""

    kappa_model: Any
    kappa_hw: Any
    kappa_crit: Any
    active_params: Any
    kv_bytes_per_token: Any
    bandwidth: Any
    compute: Any


def kappa_paper(
    active_params: ArrayLike, kv_bytes_per_token: ArrayLike, bandwidth: ArrayLike,
    compute: ArrayLike,
) -> PaperKappa:
    """kappa_M = 2 N / B_kv, kappa_HW = BW / C, kappa_crit = their product (broadcasts)."""
    n = positive("active_params", active_params)
    b_kv = positive("kv_bytes_per_token", kv_bytes_per_token)
    bw = positive("bandwidth", bandwidth)
    c = positive("compute", compute)
    kappa_m = 2.0 * n / b_kv
    kappa_hw = bw / c
    return PaperKappa(
        kappa_model=scalar_or_array(kappa_m),
        kappa_hw=scalar_or_array(kappa_hw),
        kappa_crit=scalar_or_array(kappa_m * kappa_hw),
        active_params=scalar_or_array(n),
        kv_bytes_per_token=scalar_or_array(b_kv),
        bandwidth=scalar_or_array(bw),
        compute=scalar_or_array(c),
    )


def kappa_paper_for(dep: DeploymentSettings) -> PaperKappa:
    """Paper mode for a deployment: the model's published active parameters (computed ones
    when none are published), B_kv in ``dep.kv_dtype``, the per-GPU link bandwidth times
    ``link_efficiency`` (no DRAM bound, no latency) and the per-GPU peak compute (no TP, no
    attention, no HBM roof), times ``compute_efficiency`` only where one is set or calibrated:
    the paper's inputs are peaks, so the published achievable-matmul default is not applied."""
    model = dep.model
    active = model.published.active if model.published else param_counts(model).active
    bandwidth = np.asarray(dep.link_bandwidth) * np.asarray(dep.link_efficiency)
    return kappa_paper(active, kv_bytes_per_token(model, dep.kv_dtype), bandwidth,
                       dep.paper_compute)

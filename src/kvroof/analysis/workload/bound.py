"""How much of a workload is transfer-bound on a deployment.

- paper mode: a request is transfer-bound when its ``kappa_ratio = K/T`` exceeds the paper's
  constant ``kappa_crit = 2 N_active / B_kv x BW / C`` (:func:`kvroof.kappa_paper_for`);
- full mode: when its transfer time exceeds its compute time under the full cost model
  (:func:`kvroof.ttft`; the comparison does not depend on the overlap mode, the TTFT does).

Shares reported: of requests, of cached tokens (sum of K over transfer-bound requests / sum of
K), and (full mode) of TTFT: summed exposed transfer over summed TTFT for each overlap mode,
with the TTFT distribution of each mode. Everything is one vectorized call per deployment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_paper_for
from kvroof.cost.timing import OVERLAP_MODES, ttft
from kvroof.errors import KvroofError, short_repr
from kvroof.workload.records import Workload
from kvroof.workload.stats import Distribution, summarize

__all__ = ["BoundShares", "compare_deployments", "transfer_bound_shares"]

Mode = Literal["paper", "full"]


@dataclass(frozen=True)
class BoundShares:
    """Transfer-bound shares of one workload on one deployment in one mode."""

    workload: str
    synthetic: bool
    deployment: str
    mode: Mode
    requests: int
    requests_transfer_bound: float
    cached_tokens_transfer_bound: float
    kappa_crit: float | None
    """The paper's constant (paper mode); None in full mode, where it depends on each T."""
    ttft_transfer_share: dict[str, float] | None
    """Full mode: summed exposed transfer / summed TTFT, per overlap mode."""
    ttft: dict[str, Distribution] | None
    """Full mode: TTFT distribution (seconds) per overlap mode."""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "workload": self.workload,
            "synthetic": self.synthetic,
            "deployment": self.deployment,
            "mode": self.mode,
            "requests": self.requests,
            "requests_transfer_bound": self.requests_transfer_bound,
            "cached_tokens_transfer_bound": self.cached_tokens_transfer_bound,
            "kappa_crit": self.kappa_crit,
        }
        if self.ttft_transfer_share is not None and self.ttft is not None:
            data["ttft_transfer_share"] = self.ttft_transfer_share
            data["ttft_s"] = {mode: d.as_dict() for mode, d in self.ttft.items()}
        return data


def _shares(workload: Workload, bound: np.ndarray[Any, Any]) -> tuple[float, float]:
    cached = workload.cached_tokens.astype(np.float64)
    total = float(cached.sum())
    tokens_share = float(cached[bound].sum()) / total if total > 0 else 0.0
    return float(np.count_nonzero(bound)) / len(workload), tokens_share


def transfer_bound_shares(workload: Workload, dep: Deployment, mode: Mode = "full") -> BoundShares:
    """Shares of ``workload`` that are transfer-bound on ``dep`` (see the module docstring)."""
    if len(workload) == 0:
        raise KvroofError(f"workload {short_repr(workload.name)} has no requests")
    t = workload.new_tokens.astype(np.float64)
    k = workload.cached_tokens.astype(np.float64)
    if mode == "paper":
        crit = float(kappa_paper_for(dep).kappa_crit)
        bound = workload.kappa_ratio() > crit
        by_request, by_tokens = _shares(workload, bound)
        return BoundShares(workload.name, workload.synthetic, dep.short_label, mode,
                           len(workload), by_request, by_tokens, crit, None, None)
    if mode != "full":
        raise KvroofError(f"mode: expected paper or full, got {short_repr(mode)}")
    results = {overlap: ttft(dep, t, k, overlap) for overlap in OVERLAP_MODES}
    serial = results["serial"]
    bound = np.asarray(serial.bound) == "transfer"
    by_request, by_tokens = _shares(workload, bound)
    share: dict[str, float] = {}
    for overlap, result in results.items():
        total = float(np.sum(result.ttft))
        share[overlap] = float(np.sum(result.exposed_transfer)) / total if total > 0 else 0.0
    return BoundShares(
        workload.name, workload.synthetic, dep.short_label, mode, len(workload), by_request,
        by_tokens, None, share,
        {overlap: summarize(np.asarray(r.ttft)) for overlap, r in results.items()},
    )


def compare_deployments(
    workload: Workload, deployments: Sequence[Deployment],
    modes: Sequence[Mode] = ("paper", "full"),
) -> list[BoundShares]:
    """:func:`transfer_bound_shares` for every deployment and mode."""
    return [transfer_bound_shares(workload, dep, mode) for dep in deployments for mode in modes]

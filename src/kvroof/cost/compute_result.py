"""The result of a compute-time computation (:class:`ComputeBreakdown`): one GPU's compute time
and its parts. :func:`kvroof.cost.compute.compute_breakdown` computes one (the roofline);
:mod:`kvroof.cost.kernel_time` a :class:`~kvroof.cost.kernel_time.KernelBreakdown`, the same
fields with the ops that make them up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvroof.cost.checks import scalar_or_array

__all__ = ["ComputeBreakdown"]


@dataclass(frozen=True)
class ComputeBreakdown:
    """One GPU's compute time and its parts (seconds); arrays broadcast like the inputs."""

    flops: Any
    flop_time: Any
    hbm_bytes: Any
    weight_bytes: Any
    hbm_time: Any
    comm_time: Any

    @property
    def total(self) -> Any:
        """``max(FLOP time, HBM time) + all-reduce time``."""
        return scalar_or_array(np.maximum(self.flop_time, self.hbm_time) + self.comm_time)

    @property
    def limit(self) -> Any:
        """``"flops"`` where FLOPs set the time, ``"hbm"`` where the HBM reads do."""
        limit = np.where(np.asarray(self.hbm_time) > np.asarray(self.flop_time), "hbm", "flops")
        return str(limit) if limit.ndim == 0 else limit

    @property
    def compute_model(self) -> str:
        """How the time was formed: ``roofline`` (one whole-model roofline)."""
        return "roofline"

"""Small traces and deployments for the simulation tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kvroof.cost.deployment import Deployment, deployment
from kvroof.specs.registry import Registry
from kvroof.workload.records import Workload
from kvroof.workload.requests import MOONCAKE_SLICE, RequestTrace, load_mooncake_requests
from kvroof.workload.requests import requests_from_workload as _from_workload

REG = Registry(use_env=False)


def table_trace(new: Sequence[int], cached: Sequence[int], output: Sequence[int] | int = 1,
                arrival: Sequence[float] | None = None) -> RequestTrace:
    """Requests with ``cached`` tokens preloaded in host DRAM and ``new`` tokens to compute."""
    n = len(new)
    outputs = [output] * n if isinstance(output, int) else list(output)
    w = Workload.from_columns(list(new), list(cached), output_tokens=outputs,
                              arrival_time=None if arrival is None else list(arrival))
    return _from_workload(w, "table")


def paper_testbed(model: str = "llama-3.1-70b", **settings: object) -> Deployment:
    """The seed paper's testbed (8x H100 SXM, PCIe Gen4) at TP 8, timed by the roofline (the
    paper's compute, and the simple model these tests' schedules are derived with; kernel mode
    in the simulator has its own tests) unless ``compute_model`` is given."""
    settings.setdefault("compute_model", "roofline")
    return deployment(model, system="paper-testbed", registry=REG, tp=8, **settings)


def mooncake(count: int | None = None) -> RequestTrace:
    """The first ``count`` requests of the shipped Mooncake slice."""
    trace = load_mooncake_requests(MOONCAKE_SLICE)
    return trace if count is None else trace.take(np.arange(count))

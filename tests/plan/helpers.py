"""Small, fast plans shared by the plan tests: Llama-3.2-1B on one H100 serving a few hundred
synthetic requests, so that each plan runs in about a second."""

from __future__ import annotations

from typing import Any

from kvroof.plan.result import Plan
from kvroof.plan.run import plan
from kvroof.plan.workloads import WorkloadSummary

MODEL = "llama-3.2-1b"
SLO = {"slo_ttft": 0.2, "slo_tpot": 0.02}


def small_plan(summary: WorkloadSummary, **options: Any) -> Plan:
    """A plan of :data:`MODEL` on one H100 (its own host link, no system) for ``summary``."""
    return plan(MODEL, ["h100"], summary, **{**SLO, **options})

"""Planning KV offloading: ``kvroof plan`` and ``kvroof.plan(...)``.

Will offloading KV to host memory pay for this model, these hardware candidates, this traffic
and these latency targets; with how much host memory, at what reload threshold, on how many
GPUs? The answer combines the cost model, the serving simulator and the validation cases
(docs/plan.md).

Modules, one concept each: :mod:`.inputs` (candidates, objectives, prices, search settings),
:mod:`.candidates` (candidates resolved into deployments), :mod:`.workloads` (trace files,
presets and summaries, and their prefix reuse), :mod:`.rate_search` (bracketing and bisection
over the arrival rate), :mod:`.simulation` (one simulation and batches on local processes),
:mod:`.memory_curve` (the gain against host memory), :mod:`.reload_threshold` (the smallest
prefix worth loading), :mod:`.sizing` (GPUs for a target rate, costs), :mod:`.verdict` (the
sentence and its reasons), :mod:`.validity` (what was validated), :mod:`.result` (the result
types), :mod:`.run` (:func:`plan`) and :mod:`.page` (the Markdown and HTML page).

The package can be called: ``kvroof.plan(...)`` is :func:`kvroof.plan.run.plan`, whichever way
``kvroof.plan`` was reached (the lazy name of ``kvroof``, or this package imported), and its
names stay reachable (``kvroof.plan.WorkloadSummary``); ``kvroof.plan.plan`` is the package
too (callable the same way).

>>> import kvroof
>>> result = kvroof.plan("llama-3.1-70b", ["dgx-h100:8"], "chat")  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Plan": "kvroof.plan.result",
    "CandidatePlan": "kvroof.plan.result",
    "Candidate": "kvroof.plan.inputs",
    "Objectives": "kvroof.plan.inputs",
    "Prices": "kvroof.plan.inputs",
    "SearchSettings": "kvroof.plan.inputs",
    "WorkloadSummary": "kvroof.plan.workloads",
    "PRESETS": "kvroof.plan.workloads",
}

__all__ = ["PRESETS", "Candidate", "CandidatePlan", "Objectives", "Plan", "Prices",
           "SearchSettings", "WorkloadSummary", "plan"]

if TYPE_CHECKING:
    from kvroof.plan.inputs import Candidate, Objectives, Prices, SearchSettings
    from kvroof.plan.result import CandidatePlan, Plan
    from kvroof.plan.run import plan
    from kvroof.plan.workloads import PRESETS, WorkloadSummary


def __getattr__(name: str) -> Any:
    if name == "plan":  # the package itself: callable, and its names stay reachable
        return sys.modules[__name__]
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvroof.plan' has no attribute {name!r}")
    return getattr(import_module(module), name)


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`kvroof.plan.run.plan`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return import_module("kvroof.plan.run").plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

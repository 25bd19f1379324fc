"""Serving simulation: request traces through an iteration-level engine model.

Replicas of a deployment run vLLM-v1-style iterations (a token budget, a sequence cap, chunked
prefill, KV blocks in HBM) timed by the cost model (:class:`kvroof.cost.iteration.IterationModel`;
no second formula), with a prefix cache in tiers (HBM, host DRAM, optionally a system tier),
loads and write-backs on the host link, schedulers, cache policies, routing and a power model.
See docs/simulate.md.

Modules, one concept each: :mod:`.settings` (what a simulation is asked to do),
:mod:`.resources` (what a replica's hardware gives it: KV space, cache capacities, the
iteration model), :mod:`.affine` (sums of piecewise-affine step times, for fast-forwarding),
:mod:`.request` (one request's state), :mod:`.memory` (HBM blocks and the HBM prefix cache),
:mod:`.tiers` (host and further cache tiers), :mod:`.link` (the host link, per direction),
:mod:`.scheduler` (admission policies), :mod:`.power` (per-GPU power), one replica in layers
(:mod:`.replica_state` its state, :mod:`.iteration` one iteration and its effects,
:mod:`.decode_run` and :mod:`.fast_forward` runs of decode iterations in closed form,
:mod:`.admission` admitting one request, :mod:`.engine` the step that combines them),
:mod:`.router` (routing), :mod:`.metrics` (per-iteration log and summaries),
:mod:`.runner` (the event loop and :func:`simulate`), :mod:`.output` (CSV and JSON files) and
:mod:`.sweep` (grids of simulations on local processes or a Dask cluster).

>>> from kvroof.simulate import simulate, SimSettings          # doctest: +SKIP
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "SimSettings": "kvroof.simulate.settings",
    "ReplicaSpec": "kvroof.simulate.settings",
    "SimResult": "kvroof.simulate.metrics",
    "simulate": "kvroof.simulate.runner",
    "prepare_trace": "kvroof.simulate.runner",
}

__all__ = ["ReplicaSpec", "SimResult", "SimSettings", "prepare_trace", "simulate"]

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult
    from kvroof.simulate.runner import prepare_trace, simulate
    from kvroof.simulate.settings import ReplicaSpec, SimSettings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvroof.simulate' has no attribute {name!r}")
    return getattr(import_module(module), name)

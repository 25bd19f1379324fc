"""What a replica stores in host DRAM, and how long a store takes on the device-to-host link.

vLLM's OffloadingConnector stores every new full block of a scheduled request, as computed, on
its own stream after the step (``OffloadingConnectorScheduler`` builds ``reqs_to_store`` from
the blocks each step completed; ``OffloadingConnectorWorker.prepare_store_kv`` defers the copy
to the start of the next step so that it does not delay sampling; blocks the CPU manager already
holds or is receiving are skipped by ``prepare_store``). SGLang HiCache's default write policy
``write_through`` backs up each node inserted into the radix tree (a finished prefill chunk) to
the host pool at once (``write_through_selective`` waits for a second hit, ``write_back`` for
eviction). So a replica with a host tier stores each prompt block once its last token is
computed (``offload_store: as-computed``, every shipped engine profile that stores); ``none``
stores nothing (only a trace's preloaded prefixes are found there). The engine profile's
``write_back`` says only whether the save also delays the step (the cost model's save term); the
simulator's stores never block an iteration.

The store's link time is the cost model's save time of its tokens
(:meth:`kvroof.cost.iteration.IterationModel.save_time`), which counts saves only for a
deployment with ``write_back``; :func:`save_model` gives a model that counts them for any.
"""

from __future__ import annotations

import dataclasses

from kvroof.cost.iteration import IterationModel
from kvroof.simulate.resources import ReplicaResources

__all__ = ["save_model"]

_MODELS: dict[int, tuple[ReplicaResources, IterationModel]] = {}
_MAX_MODELS = 64


def save_model(res: ReplicaResources) -> IterationModel:
    """A cost model whose ``save_time`` prices a store of ``res``'s deployment (its own model
    when it has ``write_back``; built once per resources object, the replicas of one kind share
    it)."""
    if res.dep.write_back:
        return res.model
    entry = _MODELS.get(id(res))
    if entry is not None and entry[0] is res:
        return entry[1]
    if len(_MODELS) >= _MAX_MODELS:
        _MODELS.clear()
    model = IterationModel(dataclasses.replace(res.dep, write_back=True))
    _MODELS[id(res)] = (res, model)
    return model

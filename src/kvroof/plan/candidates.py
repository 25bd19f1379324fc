"""Hardware candidates resolved into deployments: the model on a system (or an accelerator with
its host link) at a TP degree, with the cost-model settings every candidate shares.

A name is looked up as a system first, then as an accelerator. Without a TP, the smallest
power of two (at most the system's GPUs, dividing the model's attention heads) at which the
weights fit (:func:`kvroof.cost.memory_fit.check_fit`) and a replica's KV space
(:func:`kvroof.simulate.resources.replica_resources`) holds the workload's largest request is
taken (the largest at which the weights fit when none holds it); without replicas, as many as
fill one system (one for an accelerator). A candidate that does not fit, or whose KV space is
smaller than the largest request (unless such requests are skipped), is a one-line error naming
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.memory_fit import check_fit, fit_problem
from kvroof.errors import KvroofError, UnknownNameError
from kvroof.plan.inputs import Candidate
from kvroof.simulate.resources import replica_resources
from kvroof.simulate.settings import SimSettings
from kvroof.specs.registry import Registry, default_registry

__all__ = ["ResolvedCandidate", "resolve_candidate"]


@dataclass(frozen=True)
class ResolvedCandidate:
    """A candidate with its TP and replicas chosen and its deployment built."""

    candidate: Candidate
    dep: Deployment
    tp: int
    replicas: int
    system: str | None
    accelerator: str
    choices: tuple[str, ...]
    """What kvroof chose for the user (the TP, the replicas), as phrases."""

    @property
    def label(self) -> str:
        """``dgx-h100:8x1``: the candidate with its TP and replicas."""
        return f"{self.candidate.name}:{self.tp}x{self.replicas}"

    @property
    def gpus(self) -> int:
        """GPUs of all replicas."""
        return self.tp * self.replicas


def _hardware(name: str, registry: Registry) -> tuple[str | None, str, int]:
    """(system or None, accelerator name, GPUs of one system or 1)."""
    try:
        system = registry.system(name)
        return system.name, system.accelerator, system.num_accelerators
    except UnknownNameError:
        pass
    try:
        accelerator = registry.accelerator(name)
    except UnknownNameError as error:
        raise KvroofError(f"unknown system or accelerator {name!r}"
                          + (f"; did you mean {', '.join(error.suggestions)}?"
                             if error.suggestions else "")
                          + " (`kvroof list systems`, `kvroof list accelerators`)") from None
    return None, accelerator.name, 1


def _build(model: str, system: str | None, accelerator: str, tp: int,
           settings: Mapping[str, Any], registry: Registry) -> Deployment:
    where: dict[str, Any] = {"system": system} if system else {"accelerator": accelerator}
    return deployment(model, registry=registry, tp=tp, **where, **settings)


def _kv_space(dep: Deployment, settings: SimSettings, registry: Registry) -> int:
    res = replica_resources(dep, settings, registry)
    return res.hbm_tokens - res.state_tokens


def resolve_candidate(model: str, candidate: Candidate, settings: Mapping[str, Any],
                      registry: Registry | None = None, *, simulation: SimSettings | None = None,
                      kv_need: int = 0, skip_bad: bool = False) -> ResolvedCandidate:
    """Build ``candidate``'s deployment of ``model`` with the cost-model ``settings``
    (``simulation``: the engine settings its KV space follows; ``kv_need``: tokens of KV the
    workload's largest request takes); errors start with ``candidate <text>:``."""
    registry = registry or default_registry()
    simulation = simulation or SimSettings()
    where = f"candidate {candidate.text}"
    try:
        system, accelerator, per_system = _hardware(candidate.name, registry)
        choices: list[str] = []
        tp = candidate.tp
        if tp is None:
            fitting: list[int] = []
            tp_try = 1
            while tp_try <= per_system:
                try:
                    dep = _build(model, system, accelerator, tp_try, settings, registry)
                except KvroofError:  # a TP that does not divide the heads
                    tp_try *= 2
                    continue
                if not fit_problem(dep):
                    fitting.append(tp_try)
                    if _kv_space(dep, simulation, registry) >= kv_need:
                        tp = tp_try
                        break
                tp_try *= 2
            if tp is None and fitting:
                tp = fitting[-1]
                choices.append(f"TP {tp}: the largest that fits (no TP holds the largest "
                               f"request's {kv_need:,} tokens of KV)")
            elif tp is None:
                if per_system > 1:
                    check_fit(_build(model, system, accelerator, per_system, settings,
                                     registry))  # raises with the bytes and what would fit
                check_fit(_build(model, system, accelerator, 1, settings, registry))
                raise KvroofError(f"{model} fits on no TP up to {per_system}")
            else:
                choices.append(f"TP {tp}: the smallest at which the weights and the largest "
                               f"request's KV fit")
        dep = _build(model, system, accelerator, tp, settings, registry)
        check_fit(dep)
        if system is not None and tp > per_system:
            raise KvroofError(f"TP {tp} is more than the {per_system} GPUs of {system}")
        space = _kv_space(dep, simulation, registry)
        if space < kv_need and not skip_bad:
            raise KvroofError(f"a replica's KV space holds {space:,} tokens per GPU but the "
                              f"workload's largest request needs {kv_need:,} (input + output); "
                              "a larger TP holds more, or skip such requests (skip_bad)")
        replicas = candidate.replicas
        if replicas is None:
            replicas = max(1, per_system // tp)
            choices.append(f"{replicas} replica{'s' * (replicas != 1)}: "
                           + ("one system's GPUs" if system else "one accelerator"))
    except KvroofError as error:
        if str(error).startswith("tier:"):  # the cache tier's error names the system
            raise
        raise KvroofError(f"{where}: {error}") from None
    return ResolvedCandidate(candidate, dep, tp, replicas, system, accelerator, tuple(choices))

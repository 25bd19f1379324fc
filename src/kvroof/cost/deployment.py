"""A deployment: a model on hardware, with the settings the cost model needs.

:class:`Deployment` is a frozen dataclass; what-ifs are ``dataclasses.replace(dep, ...)``. Its
settings, their checks and the per-GPU figures they resolve to (peak and effective compute, HBM
and host-link bandwidth, the host DRAM share) come from its base
:class:`~kvroof.cost.deployment_settings.DeploymentSettings`, whose module docstring says how
each is resolved; a :class:`Deployment` adds the cost model's constants, computed once
(:attr:`Deployment.terms`, :mod:`kvroof.cost.deployment_terms`) and its notebook table.
:func:`deployment` builds one from registry names.

An ``engine`` profile (:class:`kvroof.specs.engine.Engine`, ``deployment(..., engine=NAME)``) sets
``granularity``, ``latency`` (its per-copy overhead), ``link_efficiency`` (the share of the link
its copies reach; :mod:`kvroof.cost.copy_size`), ``write_back``, ``reuse_block_tokens``,
``request_overhead`` and, where it says, ``mla_mode`` and ``mla_tp_load``, unless they are given
explicitly; its loading mode sets the default overlap of :func:`kvroof.cost.timing.ttft`. Without
an engine every setting keeps the default (256-token blocks, one copy per layer, the link's
2 us latency, the link's full bandwidth, write-back on, serial overlap).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from kvroof.cost.copy_size import engine_link_share, engine_settings
from kvroof.cost.deployment_settings import (
    DEFAULT_KV_RESERVE_TOKENS,
    DEFAULT_MEMORY_UTILIZATION,
    MLA_TP_LOADS,
    DeploymentSettings,
    MlaTpLoad,
    SparseLoad,
)
from kvroof.cost.deployment_terms import CostTerms, cost_terms
from kvroof.cost.granularity import COPY_LAYOUTS, CopyLayout, Granularity
from kvroof.cost.host_link import BANDWIDTH_SOURCES, BandwidthSource
from kvroof.cost.memory_fit import memory_fit
from kvroof.errors import KvroofError
from kvroof.specs.engine import Engine
from kvroof.specs.hardware import Accelerator, Link, System
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = [
    "BANDWIDTH_SOURCES",
    "COPY_LAYOUTS",
    "DEFAULT_KV_RESERVE_TOKENS",
    "DEFAULT_MEMORY_UTILIZATION",
    "MLA_TP_LOADS",
    "BandwidthSource",
    "CopyLayout",
    "Deployment",
    "DeploymentSettings",
    "Granularity",
    "MlaTpLoad",
    "SparseLoad",
    "deployment",
]


@dataclass(frozen=True)
class Deployment(DeploymentSettings):
    """A model served on an accelerator (alone, or inside a system) with cost-model settings.

    See :mod:`kvroof.cost.deployment_settings` for how per-GPU compute and bandwidth are
    resolved. ``tp`` is the tensor-parallel degree; ``tier_fractions`` puts a share of the cached
    tokens on the system's named tiers (the rest is in host DRAM); ``allreduce`` adds the TP
    all-reduces (latency plus bus bandwidth over the scale-up link) to compute.
    """

    @cached_property
    def terms(self) -> CostTerms:
        """The cost model's constants for this deployment, computed once
        (:mod:`kvroof.cost.deployment_terms`; evaluated by :mod:`kvroof.cost.terms`)."""
        return cost_terms(self)

    def _repr_html_(self) -> str:
        from kvroof.display import html_table, number
        from kvroof.units import Kind, format_quantity

        def quantity(value: Any, kind: Kind) -> str:
            array = np.asarray(value, dtype=np.float64)
            if array.ndim:
                return f"array {array.shape}"
            return format_quantity(float(array), kind)

        fit = memory_fit(self)
        rows = [
            ["model", self.model.label],
            ["hardware", self.label.split(" on ", 1)[-1]],
            ["dtypes", f"compute {self.compute_dtype}, KV {self.kv_dtype}, weights "
                       f"{fit.weight_dtype}"],
            ["compute (per GPU)", f"{quantity(self.effective_compute, Kind.COMPUTE)} "
                                  f"({self.compute_efficiency_source})"],
            ["HBM (per GPU)", quantity(self.effective_hbm_bandwidth, Kind.BANDWIDTH)],
            ["host link (per GPU)", quantity(self.effective_bandwidth, Kind.BANDWIDTH)],
            ["engine", "none (kvroof's defaults)" if self.engine is None else
             f"{self.engine.name}: {self.engine.label}"],
            ["regime", "request alone" if self.iteration_tokens is None else
             f"inside an iteration of {number(np.asarray(self.iteration_tokens))} tokens"],
            ["memory (per GPU)", f"{format_quantity(fit.needed, Kind.CAPACITY)} of "
                                 f"{format_quantity(fit.usable, Kind.CAPACITY)} usable"
                                 + ("" if fit.fits else ": does not fit")],
        ]
        return html_table(rows, "deployment")


def deployment(
    model: str | ModelSpec,
    *,
    system: str | System | None = None,
    accelerator: str | Accelerator | None = None,
    link: str | Link | None = None,
    registry: Registry | None = None,
    engine: str | Engine | None = None,
    **settings: Any,
) -> Deployment:
    """Build a :class:`Deployment` from names (or specs).

    Give a ``system`` (its accelerator and host link are used), or an ``accelerator`` (its
    default host link is used unless ``link`` is given). ``settings`` are the other fields of
    :class:`Deployment` (``tp``, ``compute_dtype``, ``kv_dtype``, ``bandwidth`` ...). An
    ``engine`` profile (name or spec) sets the settings it describes unless they are given here
    (a setting given as ``None`` counts as not given; a ``granularity`` dict may give only
    ``block_tokens`` or ``layout`` and takes the other from the engine).

    >>> dep = deployment("qwen3-235b-a22b", accelerator="h100", tp=8)
    >>> vllm = deployment("llama-3.1-8b", accelerator="h100", engine="vllm-0.12-offload")
    """
    reg = registry or default_registry()
    engine_spec = reg.engine(engine) if isinstance(engine, str) else engine
    from_engine: set[str] = set()
    if engine_spec is not None:
        preset = engine_settings(engine_spec)
        granularity = settings.get("granularity")
        if isinstance(granularity, dict):
            settings["granularity"] = {**preset["granularity"], **granularity}
        from_engine = {key for key in preset if settings.get(key) is None}
        settings = {**settings, **{key: preset[key] for key in from_engine}}
    model_spec = reg.model(model) if isinstance(model, str) else model
    if system is not None and accelerator is not None:
        raise KvroofError("give a system or an accelerator, not both")
    if system is None and accelerator is None:
        raise KvroofError("give a system or an accelerator")
    system_spec = reg.system(system) if isinstance(system, str) else system
    if system_spec is not None:
        accelerator_spec = reg.accelerator(system_spec.accelerator)
        default_link = system_spec.host_link
    else:
        assert accelerator is not None
        accelerator_spec = reg.accelerator(accelerator) if isinstance(accelerator, str) else (
            accelerator
        )
        default_link = accelerator_spec.host_link
    link_spec = reg.link(link or default_link) if not isinstance(link, Link) else link
    if settings.get("tier_fractions") and system_spec is not None and "tier_links" not in settings:
        settings["tier_links"] = {tier.name: reg.link(tier.link) for tier in system_spec.tiers}
    if isinstance(settings.get("granularity"), dict):
        settings["granularity"] = Granularity(**settings["granularity"])
    try:
        dep = Deployment(
            model=model_spec,
            accelerator=accelerator_spec,
            link=link_spec,
            system=system_spec,
            engine=engine_spec,
            **settings,
        )
    except TypeError as error:
        raise KvroofError(f"deployment: {error}") from None
    if (engine_spec is not None and engine_spec.copy_rate_cap is not None
            and "link_efficiency" in from_engine):
        dep = dataclasses.replace(dep, link_efficiency=engine_link_share(engine_spec,
                                                                         dep.link_bandwidth))
    return dep

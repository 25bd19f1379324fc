"""A deployment: a model on hardware, with the settings the cost model needs.

:class:`Deployment` is a frozen dataclass; what-ifs are ``dataclasses.replace(dep, ...)``.
Numeric settings (``compute``, ``compute_efficiency``, ``bandwidth``, ``link_efficiency``,
``latency``) may be numpy arrays; they broadcast with the token counts given to the cost
functions. :func:`deployment` builds one from registry names.

Per-GPU quantities (everything is per GPU unless a name says otherwise):

- peak compute: ``compute`` if given, else the accelerator's dense peak for ``compute_dtype``;
- effective compute: peak x ``compute_efficiency`` (default 1, or the system's calibrated
  curve ``max x T / (T + half)``, which depends on the new tokens T);
- link bandwidth: ``bandwidth`` if given, else the host link's ``peak`` or ``sustained``
  (``bandwidth_source``; a system's measured ``host_link_sustained_bandwidth`` wins over the
  link's published one), divided among the GPUs that share one host link and load at once, or
  the system's ``calibrated`` per-GPU figure. The default source is ``calibrated`` on a system
  with a calibration and ``peak`` otherwise;
- effective bandwidth: ``min(link bandwidth x link_efficiency, host DRAM bandwidth / GPUs
  loading at once)``; the DRAM bound applies only when a system is given. ``gpus_loading``
  defaults to every GPU of the system (the worst case: all load together).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import (
    dtype_bytes,
    efficiency,
    nonnegative,
    positive,
    scalar_or_array,
    token_count,
)
from kvroof.cost.flops import MLA_MODES, MlaMode
from kvroof.errors import KvroofError
from kvroof.specs.base import DTYPE_BYTES
from kvroof.specs.hardware import Accelerator, Calibration, Link, System
from kvroof.specs.model import GQAAttention, ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = [
    "BandwidthSource",
    "CopyLayout",
    "Deployment",
    "Granularity",
    "deployment",
]

BandwidthSource = Literal["peak", "sustained", "calibrated"]
BANDWIDTH_SOURCES: tuple[BandwidthSource, ...] = ("peak", "sustained", "calibrated")
CopyLayout = Literal["per-layer", "per-layer-kv", "per-block"]
COPY_LAYOUTS: tuple[CopyLayout, ...] = ("per-layer", "per-layer-kv", "per-block")


@dataclass(frozen=True)
class Granularity:
    """How cached KV is cut into copies.

    ``block_tokens``: tokens per block (LMCache's default chunk is 256; vLLM's block is 16);
    ``None`` moves a request's cache as one block. ``layout``: ``per-layer`` makes one copy per
    layer per block (layer-wise loading), ``per-layer-kv`` one per layer and per K/V tensor per
    block (vLLM's CPU offload handler; MLA has a single tensor), ``per-block`` one copy per block
    for all layers.

    The number of copies for ``K`` tokens is ``copies_per_block x K / block_tokens``: the block
    count is amortized (fractional), which keeps transfer time affine in ``K``; an engine that
    rounds up pays at most one more block of copies per request.
    """

    block_tokens: int | None = 256
    layout: CopyLayout = "per-layer"

    def __post_init__(self) -> None:
        if self.block_tokens is not None and (
            isinstance(self.block_tokens, bool)
            or not isinstance(self.block_tokens, int)
            or self.block_tokens <= 0
        ):
            raise KvroofError(f"block_tokens: expected a positive integer or None, got "
                              f"{self.block_tokens!r}")
        if self.layout not in COPY_LAYOUTS:
            raise KvroofError(
                f"layout: expected one of {', '.join(COPY_LAYOUTS)}, got {self.layout!r}"
            )

    def copies_per_block(self, model: ModelSpec) -> int:
        """Copies needed to move one block of every layer."""
        if self.layout == "per-block":
            return 1
        tensors = 2 if self.layout == "per-layer-kv" and isinstance(model.attention,
                                                                      GQAAttention) else 1
        return model.num_layers * tensors

    def transfers(self, model: ModelSpec, cached_tokens: ArrayLike) -> Any:
        """Number of copies (amortized) to move ``cached_tokens`` tokens. A sliding-window
        layer holds at most ``W`` tokens, so it needs only the blocks of those."""
        k = token_count("cached_tokens", cached_tokens)
        copies = float(self.copies_per_block(model))
        if self.block_tokens is None:
            return scalar_or_array(np.where(k > 0, copies, 0.0))
        if model.sliding_window is None or self.layout == "per-block":
            return scalar_or_array(copies * k / self.block_tokens)
        per_layer = copies / model.num_layers
        held = (model.num_full_layers * k
                + model.num_sliding_layers * np.minimum(k, model.sliding_window.size))
        return scalar_or_array(per_layer * held / self.block_tokens)


@dataclass(frozen=True)
class Deployment:
    """A model served on an accelerator (alone, or inside a system) with cost-model settings.

    See the module docstring for how per-GPU compute and bandwidth are resolved. ``tp`` is the
    tensor-parallel degree; ``tier_fractions`` puts a share of the cached tokens on the system's
    named tiers (the rest is in host DRAM); ``allreduce`` adds the TP all-reduce time over the
    scale-up link to compute.
    """

    model: ModelSpec
    accelerator: Accelerator
    link: Link
    system: System | None = None
    tp: int = 1
    compute_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    mla_mode: MlaMode = "expanded"
    compute: ArrayLike | None = None
    compute_efficiency: ArrayLike | None = None
    bandwidth: ArrayLike | None = None
    bandwidth_source: BandwidthSource | None = None
    link_efficiency: ArrayLike = 1.0
    latency: ArrayLike | None = None
    overlap_efficiency: ArrayLike | None = None
    granularity: Granularity = field(default_factory=Granularity)
    gpus_loading: int | None = None
    allreduce: bool = False
    tier_fractions: Mapping[str, float] = field(default_factory=dict)
    tier_links: Mapping[str, Link] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise KvroofError(f"tp: expected a positive integer, got {self.tp!r}")
        if self.system is not None and self.tp > self.system.num_accelerators:
            raise KvroofError(
                f"tp: {self.tp} exceeds the {self.system.num_accelerators} GPUs of "
                f"{self.system.name}"
            )
        if self.compute_dtype not in DTYPE_BYTES:
            raise KvroofError(f"compute_dtype: unknown dtype {self.compute_dtype!r}")
        if self.compute is None and self.compute_dtype not in self.accelerator.peak_compute:
            known = ", ".join(self.accelerator.peak_compute)
            raise KvroofError(
                f"compute_dtype: {self.accelerator.name} has no published peak for "
                f"{self.compute_dtype} (it has {known}); give compute explicitly"
            )
        dtype_bytes(self.kv_dtype)
        if self.mla_mode not in MLA_MODES:
            raise KvroofError(f"mla_mode: expected one of {', '.join(MLA_MODES)}, got "
                              f"{self.mla_mode!r}")
        if self.bandwidth_source is not None and self.bandwidth_source not in BANDWIDTH_SOURCES:
            raise KvroofError(
                f"bandwidth_source: expected one of {', '.join(BANDWIDTH_SOURCES)}, got "
                f"{self.bandwidth_source!r}"
            )
        if self.bandwidth_source == "calibrated" and self.calibration is None:
            raise KvroofError("bandwidth_source: calibrated needs a system with a calibration "
                              "(kvroof calibrate writes one)")
        if self.compute is not None:
            positive("compute", self.compute)
        if self.bandwidth is not None:
            positive("bandwidth", self.bandwidth)
        if self.latency is not None:
            nonnegative("latency", self.latency)
        if self.compute_efficiency is not None:
            efficiency("compute_efficiency", self.compute_efficiency)
        efficiency("link_efficiency", self.link_efficiency)
        if self.overlap_efficiency is not None:
            value = nonnegative("overlap_efficiency", self.overlap_efficiency)
            if np.any(value > 1):
                raise KvroofError(f"overlap_efficiency: must be in [0, 1], got "
                                  f"{self.overlap_efficiency!r}")
        if self.gpus_loading is not None and (
            isinstance(self.gpus_loading, bool)
            or not isinstance(self.gpus_loading, int)
            or self.gpus_loading < 1
        ):
            raise KvroofError(f"gpus_loading: expected a positive integer, got "
                              f"{self.gpus_loading!r}")
        if (self.gpus_loading is not None and self.system is not None
                and self.gpus_loading > self.system.num_accelerators):
            raise KvroofError(
                f"gpus_loading: {self.gpus_loading} exceeds the {self.system.num_accelerators} "
                f"GPUs of {self.system.name}"
            )
        if self.allreduce and self.tp > 1 and self.accelerator.scale_up_bandwidth is None:
            raise KvroofError(
                f"allreduce: {self.accelerator.name} has no scale-up bandwidth for a TP all-reduce"
            )
        self._check_tiers()
        self.link_bandwidth  # noqa: B018 -- fail early if no sustained figure is known

    def _check_tiers(self) -> None:
        if not self.tier_fractions:
            return
        if self.system is None:
            raise KvroofError("tier_fractions: tiers need a system")
        names = {tier.name for tier in self.system.tiers}
        total = 0.0
        for name, fraction in self.tier_fractions.items():
            if name not in names:
                raise KvroofError(
                    f"tier_fractions: {self.system.name} has no tier {name!r} "
                    f"(it has {', '.join(sorted(names)) or 'none'})"
                )
            if name not in self.tier_links:
                raise KvroofError(f"tier_fractions: no link spec given for tier {name!r}")
            if not (isinstance(fraction, int | float) and 0.0 <= fraction <= 1.0):
                raise KvroofError(f"tier_fractions.{name}: expected a fraction in [0, 1], got "
                                  f"{fraction!r}")
            total += fraction
        if total > 1.0 + 1e-12:
            raise KvroofError(f"tier_fractions: fractions add up to {total:g}, more than 1")

    # -- calibration ----------------------------------------------------------------------------
    @property
    def calibration(self) -> Calibration | None:
        """The system's fitted parameters, if it has any."""
        return None if self.system is None else self.system.calibration

    @property
    def resolved_bandwidth_source(self) -> BandwidthSource:
        """``bandwidth_source``, or its default: calibrated on a calibrated system, else peak."""
        if self.bandwidth_source is not None:
            return self.bandwidth_source
        return "calibrated" if self.calibration is not None else "peak"

    @property
    def resolved_overlap_efficiency(self) -> Any:
        """Share of the shorter of load and compute that overlap hides (default 1, or the
        system's calibrated value)."""
        if self.overlap_efficiency is not None:
            return scalar_or_array(np.asarray(self.overlap_efficiency, dtype=np.float64))
        calibration = self.calibration
        if calibration is not None and calibration.overlap_efficiency is not None:
            return calibration.overlap_efficiency
        return 1.0

    def compute_efficiency_at(self, new_tokens: ArrayLike) -> Any:
        """Compute efficiency for a prefill of ``new_tokens``: the ``compute_efficiency``
        setting, else the calibrated ``max x T / (T + half)``, else 1."""
        if self.compute_efficiency is not None:
            return scalar_or_array(np.asarray(self.compute_efficiency, dtype=np.float64))
        calibration = self.calibration
        if calibration is None:
            return 1.0
        t = np.asarray(new_tokens, dtype=np.float64)
        half = calibration.compute_half_tokens
        with np.errstate(invalid="ignore", divide="ignore"):
            curve = np.where(t > 0, t / np.where(t + half > 0, t + half, 1.0), 1.0)
        return scalar_or_array(calibration.compute_efficiency_max * curve)

    # -- compute --------------------------------------------------------------------------------
    @property
    def peak_compute(self) -> Any:
        """Peak FLOP/s of one GPU for ``compute_dtype`` (or the ``compute`` override)."""
        if self.compute is not None:
            return scalar_or_array(np.asarray(self.compute, dtype=np.float64))
        return self.accelerator.peak_compute[self.compute_dtype]  # type: ignore[index]

    @property
    def effective_compute(self) -> Any:
        """FLOP/s one GPU sustains on large prefills: peak x compute efficiency (for a
        calibrated curve, its maximum; :meth:`compute_efficiency_at` gives it at a given T)."""
        if self.compute_efficiency is None and self.calibration is not None:
            factor: Any = self.calibration.compute_efficiency_max
        else:
            factor = self.compute_efficiency_at(np.inf)
        return scalar_or_array(
            np.asarray(self.peak_compute, dtype=np.float64) * np.asarray(factor, dtype=np.float64)
        )

    # -- bandwidth ------------------------------------------------------------------------------
    @property
    def num_gpus_loading(self) -> int:
        """GPUs that load KV at the same time (default: every GPU of the system, else ``tp``)."""
        if self.gpus_loading is not None:
            return self.gpus_loading
        return self.system.num_accelerators if self.system is not None else self.tp

    @property
    def host_link_sharers(self) -> int:
        """GPUs of one host link that load at once."""
        per_link = 1 if self.system is None else self.system.gpus_per_host_link
        return max(1, min(per_link, self.num_gpus_loading))

    @property
    def link_bandwidth(self) -> Any:
        """Host-link bandwidth available to one GPU (bytes/s), before ``link_efficiency``."""
        if self.bandwidth is not None:
            return scalar_or_array(np.asarray(self.bandwidth, dtype=np.float64))
        source = self.resolved_bandwidth_source
        if source == "calibrated":
            assert self.calibration is not None
            return self.calibration.link_bandwidth  # already per GPU, as measured
        if source == "peak":
            link_bw = self.link.peak_bandwidth
        else:
            measured = None
            if self.system is not None and self.link.name == self.system.host_link:
                measured = self.system.host_link_sustained_bandwidth  # measured on this link
            link_bw = measured or self.link.sustained_bandwidth or math.nan
            if math.isnan(link_bw):
                raise KvroofError(
                    f"bandwidth_source: {self.link.name} has no published sustained bandwidth; "
                    "use peak or give the bandwidth explicitly"
                )
        return link_bw / self.host_link_sharers

    @property
    def host_dram_share(self) -> float:
        """Host DRAM bandwidth per loading GPU (inf without a system)."""
        if self.system is None:
            return math.inf
        memory = self.system.host_memory
        total = memory.bandwidth
        if self.resolved_bandwidth_source != "peak" and memory.measured_bandwidth_per_socket:
            total = memory.measured_bandwidth_per_socket * memory.sockets
        return total / self.num_gpus_loading

    @property
    def effective_bandwidth(self) -> Any:
        """Bytes/s one GPU receives from host DRAM: min(link x efficiency, DRAM share)."""
        link = np.asarray(self.link_bandwidth, dtype=np.float64) * np.asarray(
            self.link_efficiency, dtype=np.float64
        )
        return scalar_or_array(np.minimum(link, self.host_dram_share))

    @property
    def transfer_latency(self) -> Any:
        """Seconds per copy (the ``latency`` override, else a calibrated one when the bandwidth
        is calibrated, else the host link's)."""
        if self.latency is not None:
            value: Any = self.latency
        elif self.calibration is not None and self.resolved_bandwidth_source == "calibrated":
            value = self.calibration.link_latency
        else:
            value = self.link.latency
        return scalar_or_array(np.asarray(value, dtype=np.float64))

    @property
    def short_label(self) -> str:
        """Names only: model, system (or accelerator + link), TP."""
        where = self.system.name if self.system is not None else (
            f"{self.accelerator.name} + {self.link.name}"
        )
        return f"{self.model.name}, {where}, TP {self.tp}"

    @property
    def label(self) -> str:
        """A short description: model, hardware, TP."""
        where = self.system.label if self.system is not None else (
            f"{self.accelerator.label} + {self.link.label}"
        )
        return f"{self.model.label} on {where}, TP {self.tp}"


def deployment(
    model: str | ModelSpec,
    *,
    system: str | System | None = None,
    accelerator: str | Accelerator | None = None,
    link: str | Link | None = None,
    registry: Registry | None = None,
    **settings: Any,
) -> Deployment:
    """Build a :class:`Deployment` from names (or specs).

    Give a ``system`` (its accelerator and host link are used), or an ``accelerator`` (its
    default host link is used unless ``link`` is given). ``settings`` are the other fields of
    :class:`Deployment` (``tp``, ``compute_dtype``, ``kv_dtype``, ``bandwidth`` ...).

    >>> dep = deployment("qwen3-235b-a22b", accelerator="h100", tp=8)
    """
    reg = registry or default_registry()
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
        return Deployment(
            model=model_spec,
            accelerator=accelerator_spec,
            link=link_spec,
            system=system_spec,
            **settings,
        )
    except TypeError as error:
        raise KvroofError(f"deployment: {error}") from None

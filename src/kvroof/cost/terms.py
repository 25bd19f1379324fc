"""A deployment's cost-model constants, computed once, and one request's compute and transfer
evaluated from them.

Every per-request cost function (:func:`kvroof.cost.timing.compute_breakdown`,
:func:`kvroof.cost.transfer.transfer_breakdown`, :func:`kvroof.cost.timing.ttft`, kappa_crit,
the serving iteration) evaluates its formula here, once: from Python floats (a scalar request
costs microseconds) or from numpy arrays that broadcast (a grid is one pass, with the parts that
depend on T alone or K alone kept at their own shape until they meet). The constants themselves
come from the modules that define them: FLOPs from :mod:`kvroof.cost.flops`, KV bytes from
:mod:`kvroof.cost.kv`, weights from :mod:`kvroof.cost.weights`, collectives from
:mod:`kvroof.cost.collectives`, link, DRAM and copy figures from the
:class:`~kvroof.cost.deployment.Deployment`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvroof.cost.checks import maximum, minimum, when_positive
from kvroof.cost.collectives import ACTIVATION_BYTES, collective_bandwidth, collective_latency
from kvroof.cost.flops import FlopTerms, flop_terms, prefill_flops_total
from kvroof.cost.kv import kv_bytes_per_token_per_layer
from kvroof.cost.weights import touched_share
from kvroof.specs.model import GQAAttention, MoEFFN

if TYPE_CHECKING:
    from kvroof.cost.deployment import Deployment

__all__ = ["ComputeParts", "CostTerms", "TransferParts", "compute_parts", "cost_terms",
           "kv_bytes_of", "roofline", "transfer_parts", "weights_read"]


@dataclass(frozen=True)
class CostTerms:
    """The constants of one deployment (per GPU unless said; settings that are arrays make the
    corresponding fields arrays)."""

    flops: FlopTerms
    kv_full: float
    """KV bytes per cached position of the full-attention layers (all of them, whole model)."""
    kv_window: float
    """KV bytes per cached position of the sliding-window layers (at most ``window`` held)."""
    window: float | None
    rank_share: float
    load_share: float
    peak_rate: Any
    efficiency: Any
    """Constant compute efficiency, or ``None`` for a calibrated curve (``eff_max``,
    ``eff_half``)."""
    eff_max: float
    eff_half: float
    hbm_rate: Any
    weights_always: float
    weights_routed: float
    expert_miss: float
    iteration_tokens: Any
    comm_latency: float
    comm_per_token: float
    h2d: Any
    d2h: Any
    both: Any
    dram: float
    full_duplex: bool
    """The both-ways figure is the sum of the one-way ones, so it never binds alone."""
    copies_full: float
    copies_window: float
    copies_whole: float
    latency: Any
    write_back: bool
    scale_up: str | None
    scale_up_latency: float
    scale_up_per_byte: float
    tiers: bool


def cost_terms(dep: Deployment) -> CostTerms:
    """The constants of ``dep`` (use :attr:`Deployment.terms`, which caches them)."""
    model = dep.model
    per_layer = kv_bytes_per_token_per_layer(model, dep.kv_dtype)
    att = model.attention
    rank = max(1.0 / dep.tp, 1.0 / att.num_kv_heads) if isinstance(att, GQAAttention) else 1.0
    load = 1.0 / dep.tp if (model.is_mla and dep.tp > 1
                            and dep.mla_tp_load == "shard-allgather") else rank
    calibration = dep.calibration
    if dep.compute_efficiency is None and calibration is not None:
        efficiency: Any = None
        eff_max, eff_half = calibration.compute_efficiency_max, calibration.compute_half_tokens
    else:
        efficiency = dep.compute_efficiency_at(1.0)
        eff_max = eff_half = 0.0
    ffn = model.ffn
    weights = dep.weight_bytes
    miss = 1.0 - ffn.experts_per_token / ffn.num_experts if isinstance(ffn, MoEFFN) else 1.0
    comm_on = dep.allreduce and dep.tp > 1
    n = dep.tp
    layers = model.num_layers
    link_eff = np.asarray(dep.link_efficiency, dtype=np.float64)

    def linked(value: Any) -> Any:
        array = np.asarray(value, dtype=np.float64) * link_eff
        return float(array) if array.ndim == 0 else array

    h2d, d2h = linked(dep.link_bandwidth), linked(dep.link_d2h_bandwidth)
    both = linked(dep.link_duplex_bandwidth)
    full, window, whole = dep.granularity.copy_terms(model)
    scale_up = None
    if model.is_mla and dep.tp > 1 and dep.mla_tp_load != "every-rank":
        scale_up = "broadcast" if dep.mla_tp_load == "rank0-broadcast" else "allgather"
    bus = collective_bandwidth(dep)
    latency = np.asarray(dep.transfer_latency, dtype=np.float64)
    peak = np.asarray(dep.peak_compute, dtype=np.float64) * dep.tp
    hbm = np.asarray(dep.effective_hbm_bandwidth, dtype=np.float64)
    iteration = None if dep.iteration_tokens is None else np.asarray(dep.iteration_tokens,
                                                                      dtype=np.float64)
    return CostTerms(
        flops=flop_terms(model, dep.mla_mode),
        kv_full=model.num_full_layers * per_layer,
        kv_window=model.num_sliding_layers * per_layer,
        window=None if model.sliding_window is None else float(model.sliding_window.size),
        rank_share=rank,
        load_share=load,
        peak_rate=float(peak) if peak.ndim == 0 else peak,
        efficiency=efficiency,
        eff_max=eff_max,
        eff_half=eff_half,
        hbm_rate=float(hbm) if hbm.ndim == 0 else hbm,
        weights_always=weights.always_read,
        weights_routed=weights.routed_experts,
        expert_miss=miss,
        iteration_tokens=None if iteration is None else (
            float(iteration) if iteration.ndim == 0 else iteration),
        comm_latency=2.0 * layers * collective_latency(dep) if comm_on else 0.0,
        comm_per_token=(2.0 * layers * 2.0 * (n - 1) / n * model.hidden_size * ACTIVATION_BYTES
                        / bus) if comm_on else 0.0,
        h2d=h2d,
        d2h=d2h,
        both=both,
        dram=dep.host_dram_share,
        full_duplex=bool(np.all(np.asarray(both) >= np.asarray(h2d) + np.asarray(d2h))),
        copies_full=full,
        copies_window=window,
        copies_whole=whole,
        latency=float(latency) if latency.ndim == 0 else latency,
        write_back=dep.write_back,
        scale_up=scale_up,
        scale_up_latency=collective_latency(dep),
        scale_up_per_byte=(1.0 if scale_up == "broadcast" else (n - 1) / n) / bus,
        tiers=bool(dep.tier_fractions),
    )


def kv_bytes_of(terms: CostTerms, positions: Any) -> Any:
    """KV bytes of a sequence of ``positions`` positions, whole model (all ranks together)."""
    total = terms.kv_full * positions
    if terms.window is not None:
        total = total + terms.kv_window * minimum(positions, terms.window)
    return total


def weights_read(terms: CostTerms, tokens: Any) -> Any:
    """Weight bytes one rank reads in a forward pass over ``tokens`` tokens."""
    read = terms.weights_always
    if terms.weights_routed:
        read = read + terms.weights_routed * touched_share(terms.expert_miss, tokens)
    return when_positive(tokens, read)


def _rate(terms: CostTerms, t: Any) -> Any:
    if terms.efficiency is not None:
        return terms.peak_rate * terms.efficiency
    curve: Any
    if type(t) is float:
        curve = t / (t + terms.eff_half) if t > 0 else 1.0
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            curve = np.where(t > 0, t / np.where(t + terms.eff_half > 0, t + terms.eff_half, 1.0),
                             1.0)
    return terms.peak_rate * terms.eff_max * curve


@dataclass(frozen=True)
class ComputeParts:
    """One request's compute on one GPU (floats or arrays)."""

    flops: Any
    flop_time: Any
    weight_bytes: Any
    hbm_bytes: Any
    hbm_time: Any
    comm_time: Any

    @property
    def total(self) -> Any:
        return maximum(self.flop_time, self.hbm_time) + self.comm_time


def roofline(terms: CostTerms, flops: Any, tokens: Any, kv_bytes: Any,
             iteration: Any = None) -> ComputeParts:
    """The GPU roofline for ``flops`` FLOPs (whole TP group) over ``tokens`` tokens that read
    ``kv_bytes`` KV bytes per rank, sharing the weight read with ``iteration`` tokens (``None``:
    the deployment's ``iteration_tokens``, or ``tokens`` alone): the one place compute time is
    formed."""
    n = terms.iteration_tokens if iteration is None else iteration
    comm_on = bool(terms.comm_latency or terms.comm_per_token)
    if n is None:
        weights = weights_read(terms, tokens)
        comm = when_positive(tokens, terms.comm_latency + terms.comm_per_token * tokens) \
            if comm_on else 0.0
    else:
        share = tokens / n
        weights = share * weights_read(terms, n)
        comm = when_positive(tokens, terms.comm_latency * share + terms.comm_per_token * tokens) \
            if comm_on else 0.0
    hbm_bytes = weights + kv_bytes
    return ComputeParts(flops=flops, flop_time=flops / _rate(terms, tokens),
                        weight_bytes=weights, hbm_bytes=hbm_bytes,
                        hbm_time=hbm_bytes / terms.hbm_rate, comm_time=comm)


def compute_parts(terms: CostTerms, t: Any, k: Any, iteration: Any = None) -> ComputeParts:
    """FLOP, HBM and all-reduce time of a prefill of ``t`` new tokens on ``k`` cached ones (see
    :func:`roofline`). Inputs are validated token counts."""
    kv = when_positive(t, kv_bytes_of(terms, k + t) * terms.rank_share)
    return roofline(terms, prefill_flops_total(terms.flops, t, k), t, kv, iteration)


@dataclass(frozen=True)
class TransferParts:
    """One request's link time on one GPU (floats or arrays); ``paths`` as named."""

    load: Any
    save: Any
    copies: Any
    paths: tuple[Any, ...]
    names: tuple[str, ...]
    scale_up: Any
    latency_time: Any

    @property
    def data_time(self) -> Any:
        data = self.paths[0]
        for path in self.paths[1:]:
            data = maximum(data, path)
        return data

    @property
    def total(self) -> Any:
        return self.data_time + self.scale_up + self.latency_time


def _copies(terms: CostTerms, tokens: Any) -> Any:
    copies = terms.copies_full * tokens
    if terms.copies_window:
        assert terms.window is not None
        copies = copies + terms.copies_window * minimum(tokens, terms.window)
    if terms.copies_whole:
        copies = copies + when_positive(tokens, terms.copies_whole)
    return copies


def transfer_parts(terms: CostTerms, k: Any, t: Any, *, all_paths: bool = False) -> TransferParts:
    """Link time to load ``k`` cached tokens and, with write-back, save ``t`` new tokens'
    KV (no tiers: :mod:`kvroof.cost.transfer` adds their paths). Paths that cannot bind (the
    both-ways path of a full-duplex link, an unbounded DRAM share, saves without write-back)
    are left out unless ``all_paths``."""
    latent = kv_bytes_of(terms, k)
    load = latent * terms.load_share
    copies = _copies(terms, k)
    save: Any = 0.0
    if terms.write_back:
        save = kv_bytes_of(terms, t) * terms.load_share
        copies = copies + _copies(terms, t)
    paths = [load / terms.h2d]
    names = ["host-to-device"]
    if terms.write_back or all_paths:
        paths.append(save / terms.d2h)
        names.append("device-to-host")
    if not terms.full_duplex or all_paths:
        paths.append((load + save) / terms.both)
        names.append("both directions")
    if math.isfinite(terms.dram) or all_paths:
        paths.append((load + save) / terms.dram)
        names.append("host DRAM")
    scale_up: Any = 0.0
    if terms.scale_up is not None:
        scale_up = when_positive(latent, terms.scale_up_latency + latent * terms.scale_up_per_byte)
    return TransferParts(load=load, save=save, copies=copies, paths=tuple(paths),
                         names=tuple(names), scale_up=scale_up,
                         latency_time=copies * terms.latency)

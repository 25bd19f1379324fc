"""One request's compute and transfer evaluated from a deployment's cost terms.

Every per-request cost function (:func:`kvroof.cost.timing.compute_breakdown`,
:func:`kvroof.cost.transfer.transfer_breakdown`, :func:`kvroof.cost.timing.ttft`, kappa_crit,
the serving iteration) evaluates its formula here, once: from Python floats (a scalar request
costs microseconds) or from numpy arrays that broadcast (a grid is one pass, with the parts that
depend on T alone or K alone kept at their own shape until they meet). The constants
(:class:`CostTerms`, :func:`cost_terms`) are in :mod:`kvroof.cost.deployment_terms`, re-exported
here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvroof.cost.checks import maximum, minimum, when_positive
from kvroof.cost.deployment_terms import CostTerms, ReadTerms, cost_terms, kv_terms
from kvroof.cost.flop_terms import prefill_flops_total
from kvroof.cost.kv_terms import evaluate
from kvroof.cost.weight_bytes import touched_share

__all__ = ["ComputeParts", "CostTerms", "ReadTerms", "TransferParts", "compute_parts",
           "cost_terms", "kv_read", "kv_terms", "roofline", "slowest_path_time",
           "transfer_parts", "weights_read"]


def kv_read(terms: CostTerms, k: Any, t: Any) -> Any:
    """KV bytes one rank reads from HBM for a prefill of ``t`` tokens on ``k`` cached ones
    (:class:`ReadTerms`; nothing when ``t`` is 0)."""
    read = terms.read
    if read.plain:
        return when_positive(t, read.per_token * (k + t))
    positions = k + t
    total = read.per_token * positions
    if not read.affine:
        for window, coefficient in read.windows:
            total = total + coefficient * (minimum(k, window - 1.0) + t)
        for chunk, coefficient in read.chunks:
            remainder = (k - math.floor(k / chunk) * chunk) if type(k) is float else \
                k - np.floor(k / chunk) * chunk
            total = total + coefficient * (remainder + t)
        for topk, coefficient in read.caps:
            total = total + coefficient * minimum(positions, topk * t)
    if read.fixed:
        total = total + read.fixed
    return when_positive(t, total)


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
    return roofline(terms, prefill_flops_total(terms.flops, t, k), t, kv_read(terms, k, t),
                    iteration)


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
        return slowest_path_time(self.paths)

    @property
    def total(self) -> Any:
        return self.data_time + self.scale_up + self.latency_time


def slowest_path_time(paths: tuple[Any, ...]) -> Any:
    """The data time of paths that run in parallel: the slowest one's (floats stay floats;
    arrays broadcast)."""
    data = paths[0]
    for path in paths[1:]:
        data = maximum(data, path)
    return data


def transfer_parts(terms: CostTerms, k: Any, t: Any, *, all_paths: bool = False) -> TransferParts:
    """Link time to load ``k`` cached tokens and, with write-back, save ``t`` new tokens'
    KV (no tiers: :mod:`kvroof.cost.transfer` adds their paths). Paths that cannot bind (the
    both-ways path of a full-duplex link, an unbounded DRAM share, saves without write-back)
    are left out unless ``all_paths``."""
    save: Any = 0.0
    if terms.plain:  # every term one multiplication (no window, chunk or fixed part)
        load = terms.load.per_token * k
        copies = terms.copies.per_token * k
        if terms.write_back:
            save = terms.save.per_token * t
            copies = copies + terms.save_copies.per_token * t
    else:
        load = evaluate(terms.load, k)
        copies = evaluate(terms.copies, k)
        if terms.write_back:
            save = evaluate(terms.save, t)
            copies = copies + evaluate(terms.save_copies, t)
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
        latent = evaluate(terms.latent, k)
        scale_up = when_positive(latent, terms.scale_up_latency + latent * terms.scale_up_per_byte)
    return TransferParts(load=load, save=save, copies=copies, paths=tuple(paths),
                         names=tuple(names), scale_up=scale_up,
                         latency_time=copies * terms.latency)

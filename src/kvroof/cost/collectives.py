"""Collectives over the GPUs' scale-up link: tensor-parallel all-reduces, and the broadcast or
all-gather that spreads an MLA latent loaded by fewer than all ranks.

Times follow NCCL's own bus-bandwidth convention (nccl-tests, doc/PERFORMANCE.md): for ``n``
ranks and a message of ``S`` bytes,

- all-reduce: ``latency + 2 (n-1)/n x S / busbw``;
- all-gather (``S`` = the gathered total): ``latency + (n-1)/n x S / busbw``;
- broadcast: ``latency + S / busbw``;

where ``busbw`` is the bus bandwidth nccl-tests reports for large messages on this scale-up
fabric (``Accelerator.allreduce_bandwidth``) and ``latency`` the time of a small all-reduce
(``Accelerator.allreduce_latency``). An accelerator without published NCCL figures falls back
to its scale-up link's per-direction peak (or, with no scale-up link, the host link's peak:
tensor parallelism over PCIe) and :data:`DEFAULT_COLLECTIVE_LATENCY`.

A prefill of ``T`` tokens runs two all-reduces per layer (after attention and after the FFN) of
``T x hidden`` bf16 activations, as Megatron-style tensor parallelism does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array
from kvroof.cost.deployment_settings import DeploymentSettings

__all__ = [
    "ACTIVATION_BYTES",
    "DEFAULT_COLLECTIVE_LATENCY",
    "allgather_time",
    "allreduce_time",
    "broadcast_time",
    "collective_bandwidth",
    "collective_latency",
]

ACTIVATION_BYTES = 2.0
"""Bytes per activation element in the all-reduce (bf16)."""
DEFAULT_COLLECTIVE_LATENCY = 10e-6
"""Seconds of a small NCCL collective where the accelerator publishes none (order of the
measured small-message all-reduce times on NVLink systems, nccl-tests; an assumption)."""


def collective_bandwidth(dep: DeploymentSettings) -> float:
    """Bus bandwidth (bytes/s) of collectives among the deployment's TP ranks."""
    acc = dep.accelerator
    if acc.allreduce_bandwidth is not None:
        return acc.allreduce_bandwidth
    if acc.scale_up_bandwidth is not None:
        return acc.scale_up_bandwidth
    return dep.link.peak_bandwidth


def collective_latency(dep: DeploymentSettings) -> float:
    """Seconds of one small collective among the TP ranks."""
    latency = dep.accelerator.allreduce_latency
    return DEFAULT_COLLECTIVE_LATENCY if latency is None else latency


def allreduce_time(dep: DeploymentSettings, new_tokens: ArrayLike,
                   share: ArrayLike = 1.0) -> Any:
    """TP all-reduce seconds of a prefill of ``new_tokens`` tokens (0 for TP 1 or with
    ``allreduce`` off). ``share`` is the request's share of the per-collective latency when the
    collectives are shared by an iteration of more tokens (``T / N``)."""
    t = np.asarray(new_tokens, dtype=np.float64)
    if not dep.allreduce or dep.tp == 1:
        return scalar_or_array(np.zeros(np.broadcast_shapes(t.shape, np.shape(share))))
    n = dep.tp
    message = t * dep.model.hidden_size * ACTIVATION_BYTES
    each = (np.asarray(share, dtype=np.float64) * collective_latency(dep)
            + 2.0 * (n - 1) / n * message / collective_bandwidth(dep))
    return scalar_or_array(np.where(t > 0, 2.0 * dep.model.num_layers * each, 0.0))


def broadcast_time(dep: DeploymentSettings, size: ArrayLike) -> Any:
    """Seconds to broadcast ``size`` bytes from one rank to the others of the TP group."""
    s = np.asarray(size, dtype=np.float64)
    if dep.tp == 1:
        return scalar_or_array(np.zeros_like(s))
    return scalar_or_array(np.where(s > 0, collective_latency(dep)
                                    + s / collective_bandwidth(dep), 0.0))


def allgather_time(dep: DeploymentSettings, size: ArrayLike) -> Any:
    """Seconds to all-gather ``size`` bytes in total (``size / TP`` from each rank)."""
    s = np.asarray(size, dtype=np.float64)
    n = dep.tp
    if n == 1:
        return scalar_or_array(np.zeros_like(s))
    return scalar_or_array(np.where(s > 0, collective_latency(dep)
                                    + (n - 1) / n * s / collective_bandwidth(dep), 0.0))

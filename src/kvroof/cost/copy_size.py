"""Copy-size-dependent host-link bandwidth, and an engine profile as deployment settings.

A copy of ``S`` bytes over a link takes ``overhead + S / (share x BW)``: a fixed cost per copy
(launching and completing it: the CUDA call, a DMA descriptor, a kernel launch) plus the bytes
at the share of the link's bandwidth ``BW`` that the copy method reaches on large copies. Its
delivered bandwidth is therefore

    ``S / (overhead + S / (share x BW))``,

which tends to ``share x BW`` for large copies and to ``S / overhead`` (overhead-bound) for small
ones. This is exactly what :func:`kvroof.cost.transfer.transfer_time` charges for a request
moved in ``n`` copies, with ``overhead`` the deployment's per-copy ``latency`` and ``share`` its
``link_efficiency``; :func:`engine_settings` turns an engine profile
(:class:`kvroof.specs.engine.Engine`) into those settings, so the transfer time of ``K`` tokens
follows from the engine's copy sizes (its block tokens and copy layout).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import nonnegative, positive, scalar_or_array
from kvroof.specs.engine import Engine

__all__ = ["copy_time", "delivered_bandwidth", "engine_link_share", "engine_settings"]


def copy_time(size: ArrayLike, overhead: ArrayLike, bandwidth: ArrayLike,
              copies: ArrayLike = 1) -> Any:
    """Seconds for ``copies`` copies of ``size`` bytes each, one after another, at ``overhead``
    seconds per copy and ``bandwidth`` bytes/s (the share of the link the method reaches)."""
    s = nonnegative("size", size)
    o = nonnegative("overhead", overhead)
    bw = positive("bandwidth", bandwidth)
    n = nonnegative("copies", copies)
    return scalar_or_array(n * (o + s / bw))


def delivered_bandwidth(size: ArrayLike, overhead: ArrayLike, bandwidth: ArrayLike) -> Any:
    """Bytes/s a copy of ``size`` bytes delivers: ``size / (overhead + size / bandwidth)``."""
    s = positive("size", size)
    return scalar_or_array(s / np.asarray(copy_time(s, overhead, bandwidth), dtype=np.float64))


def engine_link_share(engine: Engine, link_bandwidth: ArrayLike) -> Any:
    """The share of a link of ``link_bandwidth`` bytes/s (per GPU, one direction) that the
    engine's large copies reach: its ``link_share``, lowered where its ``copy_rate_cap`` (the
    copy method's own throughput) is below that share of the link."""
    if engine.copy_rate_cap is None:
        return engine.link_share
    bw = positive("link_bandwidth", link_bandwidth)
    return scalar_or_array(np.minimum(engine.link_share, engine.copy_rate_cap / bw))


def engine_settings(engine: Engine) -> dict[str, Any]:
    """The :class:`~kvroof.cost.deployment.Deployment` settings an engine profile sets
    (``link_efficiency`` before any ``copy_rate_cap``, which needs the link: see
    :func:`engine_link_share`). ``mla_mode`` and ``mla_tp_load`` only where the profile says."""
    settings: dict[str, Any] = {
        "granularity": {"block_tokens": engine.block_tokens, "layout": engine.copy_layout},
        "latency": engine.copy_overhead,
        "link_efficiency": engine.link_share,
        "write_back": engine.write_back,
        "reuse_block_tokens": engine.reuse_block_tokens,
        "request_overhead": engine.request_overhead,
    }
    if engine.mla_mode is not None:
        settings["mla_mode"] = engine.mla_mode
    if engine.mla_tp_load is not None:
        settings["mla_tp_load"] = engine.mla_tp_load
    return settings

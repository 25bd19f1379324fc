"""Host DRAM bandwidth one GPU can draw when several GPUs load cached KV at once, by NUMA node.

Each GPU hangs off one CPU socket (``System.gpu_sockets``). The pinned host buffers the KV is
loaded from live

- ``local``: on the GPU's own socket (each inference worker bound to its NUMA node, as a tuned
  deployment does): a socket's sustained bandwidth is shared by the loading GPUs attached to it;
- ``interleaved``: spread over every socket page by page (``numactl --interleave``): each GPU
  reads ``1/S`` of its bytes from each of the ``S`` sockets, so the sockets' bandwidth is pooled,
  but ``(S-1)/S`` of each GPU's traffic crosses the inter-socket links;
- ``remote``: on the next socket over (a worker whose buffers were first touched on the wrong
  node): all of a GPU's traffic crosses the inter-socket link, and the far socket serves every
  GPU that reads from it.

A socket sustains ``HostMemory.sustained_bandwidth_per_socket`` (a published STREAM-like
measurement, or the theoretical peak as populated times the platform's sustained fraction): no
streaming reader reaches the theoretical DRAM peak, so kvroof never caps a load at it. The
inter-socket links give ``inter_socket_bandwidth`` per direction between a pair of sockets.

The GPUs loading at once are GPUs ``0 .. n-1`` of the system (``gpus_loading``, by default all of
them); the deployment's tensor-parallel group is GPUs ``0 .. TP-1``, and its time is set by its
slowest rank, so the share returned is the smallest among the group's loading GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from kvroof.errors import KvroofError
from kvroof.specs.hardware import System

__all__ = ["LOCALITIES", "Locality", "dram_share_per_gpu"]

Locality = Literal["local", "interleaved", "remote"]
LOCALITIES: tuple[Locality, ...] = ("local", "interleaved", "remote")


def dram_share_per_gpu(
    system: System, loaders: Sequence[int], group: Sequence[int], locality: Locality = "local"
) -> float:
    """Host DRAM bytes/s available to the slowest of ``group`` (GPU indices) while every GPU in
    ``loaders`` loads at once (``inf`` when no GPU of the group loads)."""
    if locality not in LOCALITIES:
        raise KvroofError(f"host_memory_locality: expected one of {', '.join(LOCALITIES)}, got "
                          f"{locality!r}")
    memory = system.host_memory
    sockets = memory.sockets
    per_socket = memory.sustained_bandwidth_per_socket
    attached = [0] * sockets
    for gpu in loaders:
        attached[system.socket_of(gpu)] += 1
    members = [gpu for gpu in group if gpu in set(loaders)]
    if not members:
        return math.inf
    if locality != "local" and sockets > 1 and memory.inter_socket_bandwidth is None:
        raise KvroofError(f"host_memory_locality: {locality} memory needs the inter-socket "
                          f"bandwidth of {system.name} (host_memory.inter_socket_bandwidth)")
    if locality == "remote" and sockets == 1:
        raise KvroofError(f"host_memory_locality: {system.name} has one socket, so no memory "
                          "is remote")
    shares = []
    for gpu in members:
        home = system.socket_of(gpu)
        if locality == "local" or sockets == 1:
            shares.append(per_socket / attached[home])
        elif locality == "interleaved":
            pooled = per_socket * sockets / len(loaders)
            assert memory.inter_socket_bandwidth is not None
            crossing = memory.inter_socket_bandwidth * sockets / ((sockets - 1) * attached[home])
            shares.append(min(pooled, crossing))
        else:
            far = (home + 1) % sockets
            readers = attached[(far - 1) % sockets]  # the GPUs whose "next socket" is ``far``
            assert memory.inter_socket_bandwidth is not None
            shares.append(min(per_socket / readers,
                              memory.inter_socket_bandwidth / attached[home]))
    return min(shares)

"""Host-link bandwidth of a deployment's GPUs: which figure of the link applies (the bandwidth
source), in which direction, and how many loading GPUs share one host uplink.

- ``peak``: the link's published peak per direction (twice that for both directions);
- ``sustained``: a system's measured ``host_link_sustained_bandwidth`` on this link (taken for
  both directions), else the link's published sustained figures (a link without a published
  device-to-host figure is taken to be symmetric; both directions are the published
  bidirectional figure, else the sum of the two);
- ``calibrated``: the system calibration's per-GPU figure (twice that for both directions).

A link figure is per link: the GPUs that load at once and hang off the same host uplink
(``g // gpus_per_host_link``) share it (:func:`uplink_sharers`). Which GPUs load at once is
:func:`loading_gpus`. The per-GPU figures themselves are properties of
:class:`kvroof.cost.deployment.Deployment` (``link_bandwidth``, ``link_d2h_bandwidth``,
``link_duplex_bandwidth``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kvroof.errors import KvroofError
from kvroof.specs.hardware import Link, System

__all__ = ["BANDWIDTH_SOURCES", "BandwidthSource", "Direction", "link_figure", "loading_gpus",
           "uplink_sharers"]

BandwidthSource = Literal["peak", "sustained", "calibrated"]
BANDWIDTH_SOURCES: tuple[BandwidthSource, ...] = ("peak", "sustained", "calibrated")
Direction = Literal["h2d", "d2h", "both"]


def loading_gpus(gpus_loading: int, tp: int, first_rank_only: bool) -> list[int]:
    """Indices of the GPUs reading from host memory at once: GPUs ``0 .. gpus_loading-1``, or
    the first rank of each TP group among them (``first_rank_only``)."""
    step = tp if first_rank_only else 1
    return list(range(0, gpus_loading, step))


def uplink_sharers(system: System | None, loading: Sequence[int]) -> int:
    """Loading GPUs on the first GPU's host uplink (GPUs ``g`` with the same
    ``g // gpus_per_host_link``; 1 without a system)."""
    if system is None:
        return 1
    per_link = system.gpus_per_host_link
    return max(1, sum(1 for gpu in loading if gpu // per_link == 0))


def link_figure(link: Link, system: System | None, source: BandwidthSource, sharers: int,
                direction: Direction) -> float:
    """The host link's per-link bandwidth for ``direction`` under the bandwidth ``source``
    (``sharers``: the loading GPUs on one uplink, which a calibrated per-GPU figure is scaled
    by)."""
    if source == "calibrated":
        calibration = None if system is None else system.calibration
        assert calibration is not None
        per_gpu = calibration.link_bandwidth * sharers
        return 2 * per_gpu if direction == "both" else per_gpu
    if source == "peak":
        return (2 if direction == "both" else 1) * link.peak_bandwidth
    measured = None
    if system is not None and link.name == system.host_link:
        measured = system.host_link_sustained_bandwidth  # measured on this link
    h2d = measured or link.sustained_bandwidth
    if h2d is None:
        raise KvroofError(
            f"bandwidth_source: {link.name} has no published sustained bandwidth; "
            "use peak or give the bandwidth explicitly"
        )
    if direction == "h2d":
        return h2d
    # A system-measured figure is taken for both directions: the measurement is of this link.
    d2h = measured or link.sustained_d2h_bandwidth or h2d
    if direction == "d2h":
        return d2h
    return link.sustained_bidirectional_bandwidth or h2d + d2h

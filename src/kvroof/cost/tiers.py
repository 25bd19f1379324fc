"""Cached tokens kept on tiers beyond host DRAM (CXL memory, NVMe drives, a remote store): the
checks of a deployment's ``tier_fractions`` against its system, and each used tier's path.

With ``tier_fractions`` a share of the tokens comes from other tiers. Each tier's path gives it
``count x link bandwidth x link_efficiency / GPUs loading``; tiers that share the GPU's host link
also count on the host-to-device path, with host DRAM. A used tier adds its access latency once
per request (:func:`kvroof.cost.transfer.transfer_breakdown` puts the paths together).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvroof.cost.checks import FloatArray
from kvroof.errors import KvroofError
from kvroof.specs.hardware import Link, System

__all__ = ["check_tier_fractions", "tier_paths"]


def check_tier_fractions(system: System | None, fractions: Mapping[str, float],
                         links: Mapping[str, Link]) -> None:
    """Refuse tier fractions that name no tier of ``system``, lack a link spec, are not in
    ``[0, 1]`` or add up to more than 1 (nothing to check without fractions)."""
    if not fractions:
        return
    if system is None:
        raise KvroofError("tier_fractions: tiers need a system")
    names = {tier.name for tier in system.tiers}
    total = 0.0
    for name, fraction in fractions.items():
        if name not in names:
            raise KvroofError(
                f"tier_fractions: {system.name} has no tier {name!r} "
                f"(it has {', '.join(sorted(names)) or 'none'})"
            )
        if name not in links:
            raise KvroofError(f"tier_fractions: no link spec given for tier {name!r}")
        if not (isinstance(fraction, int | float) and 0.0 <= fraction <= 1.0):
            raise KvroofError(f"tier_fractions.{name}: expected a fraction in [0, 1], got "
                              f"{fraction!r}")
        total += fraction
    if total > 1.0 + 1e-12:
        raise KvroofError(f"tier_fractions: fractions add up to {total:g}, more than 1")


def tier_paths(
    system: System | None, fractions: Mapping[str, float], links: Mapping[str, Link],
    gpus_loading: int, size: FloatArray, efficiency: FloatArray,
) -> tuple[FloatArray, FloatArray, list[tuple[str, FloatArray]], float]:
    """For ``size`` bytes loaded per rank: bytes over the host link, bytes from host DRAM, each
    used tier's path time, and the largest access latency among the used tiers."""
    assert system is not None
    tiers = {tier.name: tier for tier in system.tiers}
    dram_fraction = 1.0 - sum(fractions.values())
    over_link = dram_fraction * size
    paths: list[tuple[str, FloatArray]] = []
    access = 0.0
    for name, fraction in fractions.items():
        if fraction == 0:
            continue
        tier, link = tiers[name], links[name]
        path = tier.count * link.peak_bandwidth * efficiency / gpus_loading
        paths.append((f"tier {name}", fraction * size / path))
        if tier.shares_host_link:
            over_link = over_link + fraction * size
        access = max(access, link.latency)
    return over_link, dram_fraction * size, paths, access

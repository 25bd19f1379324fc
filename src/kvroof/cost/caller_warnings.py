"""What the cost functions tell their callers about a deployment that cannot run as given.

- It does not fit: its weights and KV reserve (and, for :func:`kvroof.cost.timing.ttft`, the
  KV of the request's ``T + K`` tokens) need more than the usable HBM
  (:class:`~kvroof.cost.memory_fit.DoesNotFitWarning`).
- Its ``bandwidth`` override is capped by the host DRAM: transfers run at ``min(link x
  link_efficiency, host DRAM share)`` (:attr:`DeploymentSettings.effective_bandwidth`), so a
  faster link than the DRAM can feed changes nothing (:class:`BandwidthCappedWarning`, naming
  both figures).

:func:`kvroof.cost.kappa.kappa_crit` and :func:`kvroof.cost.timing.ttft` compute regardless (a
what-if may be about hardware that does not exist) and warn once per call, through
:func:`warn_caller`, when they are called from outside kvroof. kvroof's own modules check before
they call, as the command line does (it refuses a deployment that does not fit and prints the
bandwidth it uses), and the report and the figures (:mod:`kvroof.plot.fitting`), so their
output never carries the same news twice.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import numpy as np

from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.memory_fit import fit_warning
from kvroof.units import Kind, format_quantity

__all__ = ["BandwidthCappedWarning", "bandwidth_cap", "warn_bandwidth_cap", "warn_caller"]


class BandwidthCappedWarning(UserWarning):
    """A ``bandwidth`` override is more than the host DRAM share can feed: transfers run at the
    DRAM share."""


def _rate(value: float) -> str:
    return format_quantity(value, Kind.BANDWIDTH)


def bandwidth_cap(dep: DeploymentSettings) -> str:
    """"" unless ``dep``'s ``bandwidth`` override (times ``link_efficiency``) is more than its
    host DRAM share; else a sentence naming the bandwidth given and the one transfers use."""
    if dep.bandwidth is None:
        return ""
    dram = float(dep.host_dram_share)
    given = np.asarray(dep.bandwidth, dtype=np.float64)
    link = np.asarray(dep.link_bandwidth, dtype=np.float64) * np.asarray(
        dep.link_efficiency, dtype=np.float64)
    capped = np.broadcast_to(link > dram, np.broadcast_shapes(link.shape, given.shape))
    if not capped.any():
        return ""
    where = f"the host DRAM share of {dep.system.name}" if dep.system is not None \
        else "the host DRAM share"
    if given.ndim == 0 and link.ndim == 0:
        return (f"bandwidth {_rate(float(given))} per GPU is capped by {where}: transfers run at "
                f"{_rate(dram)} per GPU, not {_rate(float(link))}")
    return (f"bandwidth: {int(capped.sum())} of {capped.size} values (up to "
            f"{_rate(float(given.max()))} per GPU) are capped by {where}: those transfers run at "
            f"{_rate(dram)} per GPU")


def warn_bandwidth_cap(dep: DeploymentSettings, stacklevel: int = 2) -> bool:
    """Issue a :class:`BandwidthCappedWarning` when :func:`bandwidth_cap` has something to say;
    whether it did."""
    note = bandwidth_cap(dep)
    if note:
        warnings.warn(note, BandwidthCappedWarning, stacklevel=stacklevel + 1)
    return bool(note)


def _from_kvroof(depth: int) -> bool:
    """Whether the frame ``depth`` levels above the caller runs code of the kvroof package."""
    try:
        name = sys._getframe(depth + 1).f_globals.get("__name__", "")
    except ValueError:  # not that many frames
        return False
    return bool(name == "kvroof" or str(name).startswith("kvroof."))


def warn_caller(dep: DeploymentSettings, what: str, kv_tokens: Any = None) -> None:
    """For a cost function ``what`` (``"kappa_crit"``, ``"ttft"``) that has just computed
    ``dep``: warn its caller, unless that caller is kvroof itself (module docstring), that
    ``dep`` does not fit (with the KV of ``kv_tokens``, the largest finite of them, when
    given) or that its bandwidth override is capped. Call it directly from the cost function:
    the warnings point at the line that called that function."""
    if _from_kvroof(2):
        return
    tokens = None
    if type(kv_tokens) is float:  # the scalar path of a call that takes microseconds
        tokens = kv_tokens if math.isfinite(kv_tokens) else None
    elif kv_tokens is not None:
        values = np.asarray(kv_tokens, dtype=np.float64)
        finite = values[np.isfinite(values)]
        tokens = float(finite.max()) if finite.size else None
    fit_warning(dep, what, tokens, stacklevel=3)
    warn_bandwidth_cap(dep, stacklevel=3)

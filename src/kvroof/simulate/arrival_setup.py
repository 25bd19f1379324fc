"""What arrivals and output lengths a simulation's trace gets, and which arrival settings
apply (:func:`prepare_trace`, :func:`check_applies`; :mod:`kvroof.simulate.runner` re-exports
both, as it did when they lived there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvroof.errors import KvroofError
from kvroof.workload.arrivals import gamma_times, output_lengths, poisson_times, scale_times
from kvroof.workload.requests import RequestTrace

__all__ = ["check_applies", "prepare_trace"]


def check_applies(given: Mapping[str, Any], schedulers: Sequence[str]) -> None:
    """Arrival and scheduler settings that the rest leaves without effect are errors, not
    ignored: ``given`` holds the arrival settings given (``rps``, ``arrival``, ``burstiness``,
    ``time_scale``, ``users``, ``think_time``, ``aging_limit``), ``schedulers`` those of the
    runs. Each error starts with the setting's name."""
    if "users" in given and ("rps" in given or "time_scale" in given):
        raise KvroofError("users: a closed loop sets its own arrivals; give no rps or "
                          "time_scale")
    if "rps" in given and "time_scale" in given:
        raise KvroofError("rps: give rps or time_scale, not both (new arrivals at a rate, or "
                          "the trace's own sped up)")
    if "arrival" in given and "rps" not in given:
        raise KvroofError("arrival: applies to open-loop arrivals at rps")
    if "burstiness" in given and given.get("arrival") != "gamma":
        raise KvroofError("burstiness: applies to gamma arrivals (Poisson gaps have a "
                          "coefficient of variation of 1)")
    if "think_time" in given and "users" not in given:
        raise KvroofError("think_time: applies to a closed loop of users")
    if "aging_limit" in given and "utilization-aware" not in schedulers:
        raise KvroofError("aging_limit: applies to the utilization-aware scheduler (none of "
                          "the runs uses it)")


def prepare_trace(
    trace: RequestTrace, *, rps: float | None = None, arrival: str = "poisson",
    burstiness: float = 1.0, time_scale: float | None = None, output_tokens: str | None = None,
    seed: int = 0, closed_loop: bool = False,
) -> RequestTrace:
    """Arrival times and output lengths for ``trace``: Poisson or gamma (``burstiness`` = the
    gaps' coefficient of variation) at ``rps``, or the trace's own times (``time_scale`` times
    faster); ``output_tokens`` (``N``, ``exp:MEAN``, ``uniform:LO:HI``) replaces the trace's
    output lengths. A closed loop needs no times."""
    if arrival not in ("poisson", "gamma"):
        raise KvroofError(f"arrival: expected poisson or gamma, got {arrival!r}")
    if output_tokens is not None:
        trace = trace.with_outputs(output_lengths(output_tokens, len(trace), seed + 1),
                                   f"output lengths {output_tokens} (seed {seed + 1})")
    if closed_loop:
        if rps is not None or time_scale is not None:
            raise KvroofError("a closed loop of users sets its own arrivals: give no rps or "
                              "time_scale")
        return trace
    if rps is not None:
        if time_scale is not None:
            raise KvroofError("give rps or time_scale, not both")
        if arrival == "poisson":
            times = poisson_times(len(trace), rps, seed)
            note = f"Poisson arrivals at {rps:g} requests/s (seed {seed})"
        else:
            times = gamma_times(len(trace), rps, burstiness, seed)
            note = f"gamma arrivals at {rps:g} requests/s, CV {burstiness:g} (seed {seed})"
        return trace.with_arrivals(times, note)
    if trace.arrival_time is None:
        raise KvroofError(f"{trace.path or trace.name}: the trace has no arrival times; give a "
                          "request rate (rps) or a closed loop of users")
    trace.check_times()
    if time_scale is not None:
        return trace.with_arrivals(scale_times(trace.arrival_time, time_scale),
                                   f"timestamps {time_scale:g}x faster")
    return trace

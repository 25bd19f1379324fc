"""The values of one sweep point that the simulation would only check as it runs: its arrival
settings (``rps``, ``arrival``, ``burstiness``, ``time_scale``, ``output_tokens``, ``seed``,
``users``, ``think_time``, ``requests``) and its on/off settings. :mod:`kvroof.simulate.sweep`
checks them for every point before the first one runs, so that a bad value in the last point
costs no work; each error starts with the key."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from kvroof.errors import KvroofError, short_repr
from kvroof.units import Kind, UnitError, parse_quantity

__all__ = ["arrival_values", "check_switches"]

_SWITCHES = ("prefix_caching", "fast_forward")
"""Settings that are true or false (YAML's ``true``/``false``; a string such as ``"no"`` is
not taken for false)."""


def _positive_number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not (math.isfinite(value) and value > 0):
        raise KvroofError(f"{key}: expected a positive number, got {short_repr(value)}")
    return value


def _integer(key: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = "a positive" if least > 0 else "a non-negative"
        raise KvroofError(f"{key}: expected {kind} integer, got {short_repr(value)}")
    return value


def _arrival(key: str, value: Any) -> str:
    if value not in ("poisson", "gamma"):
        raise KvroofError(f"{key}: expected poisson or gamma, got {short_repr(value)}")
    return str(value)


def _seconds(key: str, value: Any) -> float:
    if isinstance(value, str):
        try:
            return parse_quantity(value, Kind.TIME)
        except UnitError as error:
            raise KvroofError(f"{key}: {error}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not (math.isfinite(value) and value >= 0):
        raise KvroofError(f"{key}: expected non-negative seconds, got {short_repr(value)}")
    return float(value)


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "rps": _positive_number,
    "time_scale": _positive_number,
    "burstiness": _positive_number,
    "arrival": _arrival,
    "seed": lambda key, value: _integer(key, value, 0),
    "users": lambda key, value: _integer(key, value, 1),
    "requests": lambda key, value: _integer(key, value, 1),
    "think_time": _seconds,
}


def _output_tokens(value: Any, seed: int) -> Any:
    """An output-length spec (``N``, ``exp:MEAN``, ``uniform:LO:HI``), tried on one draw."""
    from kvroof.workload.arrivals import output_lengths

    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            output_lengths(str(value), 1, seed + 1)
            return value
        except (KvroofError, OverflowError, ValueError):
            pass
    raise KvroofError(f"output_tokens: expected a positive integer N, exp:MEAN (MEAN >= 1) or "
                      f"uniform:LO:HI (1 <= LO <= HI), got {short_repr(value)}")


def arrival_values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The arrival settings ``raw`` of one point, checked (``think_time`` in seconds, units
    read); the first bad one is a :class:`KvroofError` starting with its key. Unknown keys are
    the caller's to refuse."""
    values = {key: _CHECKS[key](key, value) if key in _CHECKS else value
              for key, value in raw.items()}
    if "output_tokens" in values:
        values["output_tokens"] = _output_tokens(values["output_tokens"],
                                                 values.get("seed", 0))
    return values


def check_switches(settings: Mapping[str, Any]) -> None:
    """The on/off simulation settings in ``settings`` are true or false."""
    for key in _SWITCHES:
        if key in settings and not isinstance(settings[key], bool):
            raise KvroofError(f"{key}: expected true or false, got {short_repr(settings[key])}")

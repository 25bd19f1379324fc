"""Parse quantities with units (``"989.4 TFLOPS"``, ``"63 GB/s"``, ``"141 GiB"``) into SI floats.

Units live only at the edges of kvroof (YAML files, command-line flags, printed tables). Inside,
every quantity is SI: FLOP/s, bytes/s, bytes, watts, seconds.

Rules
-----
- Decimal prefixes k/K, M, G, T, P, E are powers of 1000; binary prefixes Ki, Mi, Gi, Ti, Pi are
  powers of 1024 (``GB`` = 1e9 B, ``GiB`` = 2**30 B).
- ``B`` is a byte and ``b`` is a bit: ``400 Gb/s`` = 50e9 B/s, ``Gbps`` is also bits.
- Compute is ``FLOPS``, ``FLOP/s``, ``flops`` or ``OPS``/``OP/s`` (integer operations are counted
  like FLOP), with decimal prefixes: ``989.4 TFLOPS`` = 9.894e14 FLOP/s.
- Time: ``s``, ``ms``, ``us`` (or ``µs``), ``ns``; power: ``W``, ``kW``, ``mW``.
- A missing unit, an unknown unit, or a unit of the wrong kind (a bandwidth where a capacity
  belongs) raises :class:`UnitError` with a one-line message.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Final

from kvroof.errors import KvroofError, short_repr

__all__ = [
    "Kind",
    "UnitError",
    "UnitOf",
    "format_quantity",
    "parse_quantity",
]


class UnitError(KvroofError):
    """A quantity string could not be parsed into the requested kind of SI value."""


class Kind(StrEnum):
    """The physical kind of a quantity; each has one SI unit inside kvroof."""

    COMPUTE = "compute"  # FLOP/s
    BANDWIDTH = "bandwidth"  # bytes/s
    CAPACITY = "capacity"  # bytes
    POWER = "power"  # watts
    TIME = "time"  # seconds

    @property
    def example(self) -> str:
        return _EXAMPLES[self]


_EXAMPLES: Final = {
    Kind.COMPUTE: "989.4 TFLOPS",
    Kind.BANDWIDTH: "63 GB/s",
    Kind.CAPACITY: "80 GB",
    Kind.POWER: "700 W",
    Kind.TIME: "2 us",
}

_DECIMAL: Final = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY: Final = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _build_units() -> dict[str, tuple[Kind, float]]:
    units: dict[str, tuple[Kind, float]] = {}
    for prefix, factor in _DECIMAL.items():
        for base in ("FLOPS", "FLOP/s", "flops", "FLOPs/s", "OPS", "OP/s"):
            units[prefix + base] = (Kind.COMPUTE, factor)
    for prefix, factor in {**_DECIMAL, **_BINARY}.items():
        units[prefix + "B/s"] = (Kind.BANDWIDTH, factor)
        units[prefix + "Bps"] = (Kind.BANDWIDTH, factor)
        units[prefix + "B"] = (Kind.CAPACITY, factor)
        units[prefix + "b/s"] = (Kind.BANDWIDTH, factor / 8.0)
        units[prefix + "bps"] = (Kind.BANDWIDTH, factor / 8.0)
        units[prefix + "bit/s"] = (Kind.BANDWIDTH, factor / 8.0)
        units[prefix + "b"] = (Kind.CAPACITY, factor / 8.0)
        units[prefix + "bit"] = (Kind.CAPACITY, factor / 8.0)
    # "1 KB" is sometimes written "1 kB"; both are 1000 B (binary is only ever "KiB").
    units["kB/s"] = (Kind.BANDWIDTH, 1e3)
    units["kB"] = (Kind.CAPACITY, 1e3)
    units.update(
        {
            "W": (Kind.POWER, 1.0),
            "kW": (Kind.POWER, 1e3),
            "mW": (Kind.POWER, 1e-3),
            "s": (Kind.TIME, 1.0),
            "ms": (Kind.TIME, 1e-3),
            "us": (Kind.TIME, 1e-6),
            "µs": (Kind.TIME, 1e-6),
            "μs": (Kind.TIME, 1e-6),
            "ns": (Kind.TIME, 1e-9),
        }
    )
    return units


_UNITS: Final = _build_units()
# Possessive quantifiers (``*+``, ``?+``): no backtracking, so matching is linear in the text
# (the plain pattern took 36 s on 2,000 digits followed by " x y").
_QUANTITY_RE: Final = re.compile(
    r"^\s*+(?P<number>[-+]?+(?:\d[\d_]*+(?:\.\d*+)?+|\.\d++)(?:[eE][-+]?+\d++)?+)"
    r"\s*+(?P<unit>\S*+)\s*+$"
)


def parse_quantity(text: str | float | int, kind: Kind) -> float:
    """Return the SI value of ``text`` (for example ``"3.35 TB/s"`` -> 3.35e12) as ``kind``.

    Raises :class:`UnitError` when the number or the unit is missing or unknown, when the unit is
    of another kind, or when the value is negative or not finite.

    >>> parse_quantity("400 Gb/s", Kind.BANDWIDTH)
    50000000000.0
    """
    shown = short_repr(text)
    if isinstance(text, bool) or not isinstance(text, str):
        raise UnitError(
            f"{shown} has no unit; write the {kind.value} with a unit, like {kind.example!r}"
        )
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise UnitError(f"{shown} is not a number with a unit, like {kind.example!r}")
    unit = match.group("unit")
    if not unit:
        raise UnitError(
            f"{shown} has no unit; write the {kind.value} with a unit, like {kind.example!r}"
        )
    if unit not in _UNITS:
        raise UnitError(
            f"{shown}: unknown unit {short_repr(unit, 40)} (expected a {kind.value} like "
            f"{kind.example!r})"
        )
    unit_kind, factor = _UNITS[unit]
    if unit_kind is not kind:
        raise UnitError(
            f"{shown} is a {unit_kind.value}, but a {kind.value} is expected here "
            f"(like {kind.example!r})"
        )
    value = float(match.group("number").replace("_", "")) * factor
    if not math.isfinite(value) or value < 0:
        raise UnitError(f"{shown}: a {kind.value} must be finite and not negative")
    return value


_FORMAT_UNITS: Final = {
    Kind.COMPUTE: "FLOP/s",
    Kind.BANDWIDTH: "B/s",
    Kind.CAPACITY: "B",
    Kind.POWER: "W",
    Kind.TIME: "s",
}


def format_quantity(value: float, kind: Kind, digits: int = 4) -> str:
    """Format an SI value with a decimal prefix for display (``9.894e14`` -> ``"989.4 TFLOP/s"``).

    Time uses s, ms, us and ns. Non-finite values print as ``inf`` or ``nan`` with the base unit.
    """
    base = _FORMAT_UNITS[kind]
    if not math.isfinite(value):
        return f"{value} {base}"
    if kind is Kind.TIME:
        for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= factor or factor == 1e-9:
                return f"{value / factor:.{digits}g} {unit}"
    magnitude = abs(value)
    for prefix in ("E", "P", "T", "G", "M", "k"):
        if magnitude >= _DECIMAL[prefix]:
            return f"{value / _DECIMAL[prefix]:.{digits}g} {prefix}{base}"
    return f"{value:.{digits}g} {base}"


class UnitOf:
    """Marks an annotated float as a quantity of ``kind`` (used to format it for display)."""

    __slots__ = ("kind",)

    def __init__(self, kind: Kind) -> None:
        self.kind = kind

"""Unit parsing: values are hand-derived from the prefix definitions (GB = 1e9, GiB = 2**30,
b = bit = 1/8 byte)."""

from __future__ import annotations

import pytest

from kvroof.units import Kind, UnitError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("989.4 TFLOPS", Kind.COMPUTE, 989.4e12),
        ("2.25 PFLOPS", Kind.COMPUTE, 2.25e15),
        ("624 TOPS", Kind.COMPUTE, 624e12),
        ("1979 TFLOP/s", Kind.COMPUTE, 1979e12),
        ("3.35 TB/s", Kind.BANDWIDTH, 3.35e12),
        ("63 GB/s", Kind.BANDWIDTH, 63e9),
        ("400 Gb/s", Kind.BANDWIDTH, 50e9),  # bits: 400e9 / 8
        ("400 Gbps", Kind.BANDWIDTH, 50e9),
        ("1 GiB/s", Kind.BANDWIDTH, 2.0**30),
        ("80 GB", Kind.CAPACITY, 80e9),
        ("141 GiB", Kind.CAPACITY, 141 * 2.0**30),
        ("183359 MiB", Kind.CAPACITY, 183359 * 2.0**20),
        ("512 kB", Kind.CAPACITY, 512e3),
        ("700 W", Kind.POWER, 700.0),
        ("1.2 kW", Kind.POWER, 1200.0),
        ("2 us", Kind.TIME, 2e-6),
        ("2 µs", Kind.TIME, 2e-6),
        ("80 ms", Kind.TIME, 0.08),
        ("1.5e3 ns", Kind.TIME, 1.5e-6),
        ("15GB/s", Kind.BANDWIDTH, 15e9),
    ],
)
def test_parse(text: str, kind: Kind, expected: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "kind", "fragment"),
    [
        ("80", Kind.CAPACITY, "no unit"),
        ("80 GB/s", Kind.CAPACITY, "is a bandwidth, but a capacity is expected"),
        ("80 GB", Kind.BANDWIDTH, "is a capacity, but a bandwidth is expected"),
        ("700 TFLOPS", Kind.POWER, "is a compute"),
        ("3 furlongs", Kind.CAPACITY, "unknown unit 'furlongs'"),
        ("fast", Kind.BANDWIDTH, "not a number with a unit"),
        ("-5 GB", Kind.CAPACITY, "not negative"),
        ("", Kind.TIME, "not a number"),
    ],
)
def test_bad_units(text: str, kind: Kind, fragment: str) -> None:
    with pytest.raises(UnitError, match=fragment) as info:
        parse_quantity(text, kind)
    assert "\n" not in str(info.value)


def test_number_without_unit_is_rejected() -> None:
    with pytest.raises(UnitError, match="no unit"):
        parse_quantity(80, Kind.CAPACITY)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (9.894e14, Kind.COMPUTE, "989.4 TFLOP/s"),
        (63e9, Kind.BANDWIDTH, "63 GB/s"),
        (2e-6, Kind.TIME, "2 us"),
        (0.25, Kind.TIME, "250 ms"),
        (700.0, Kind.POWER, "700 W"),
    ],
)
def test_format_round_trip(value: float, kind: Kind, text: str) -> None:
    assert format_quantity(value, kind) == text
    assert parse_quantity(text, kind) == pytest.approx(value)

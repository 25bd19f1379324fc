"""The shipped kernel-table format: one gzip-compressed JSON file per accelerator.

A file (``data/<accelerator>.json.gz``) holds::

    {"format": "kvroof-kernel-tables", "format_version": 1,
     "accelerator": "h100-sxm",                    # kvroof's accelerator name
     "source_system": "h100_sxm",                  # aiconfigurator's system folder
     "device": "NVIDIA H100 80GB HBM3",            # the device the rows were measured on
     "peaks": {"flops": {"bf16": 9.894e14, ...},   # the dense peaks the efficiencies use
               "hbm_bandwidth": 3.35e12},          # (from kvroof's spec at derivation)
     "source": {...},                              # repository, commit, licence, notice
     "tables": {"gemm": TABLE, "attention": TABLE, "moe": TABLE, "allreduce": TABLE}}

and a table::

    {"quantity": "efficiency" | "time",            # time in seconds
     "key_fields": ["dtype"],                      # fields that select a variant
     "axes": ["m", "n", "k"],                      # the grid's axes (log-spaced lookup)
     "provenance": {...},                          # files, framework/version, kernel sources
     "variants": [{"key": {"dtype": "bf16"}, "peak": "bf16", "rows": 5120,
                   "kernel_sources": {"torch.nn.functional.linear": 5120},
                   "grid": {"m": [1, 2, ...], "n": [...], "k": [...]},
                   "values": [...],                # row-major over the axes, last fastest
                   "measured": "1101..."}]}        # per cell; absent when all measured

``measured`` marks the grid cells that hold a measured row; the others were filled by the
derivation (interpolated in log space along the axes from measured cells) and a lookup that
leans on them says so. :func:`write_system` and :func:`read_system` are exact inverses for
values already rounded to the stored precision (:data:`SIGNIFICANT_DIGITS`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from kvroof.errors import KvroofError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "SIGNIFICANT_DIGITS",
    "Grid",
    "KernelTableError",
    "SystemTables",
    "Table",
    "Variant",
    "from_json",
    "read_system",
    "round_value",
    "to_json",
    "write_system",
]

FORMAT: Final = "kvroof-kernel-tables"
FORMAT_VERSION: Final = 1
SIGNIFICANT_DIGITS: Final = 4
"""Digits a stored value keeps (a relative rounding of at most 5e-4)."""


class KernelTableError(KvroofError, LookupError):
    """No kernel table answers a lookup (accelerator, op or variant), or a table file is
    malformed; the message says which."""


def round_value(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (as stored)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True, eq=False)
class Grid:
    """Values on a regular grid: ``axes`` names, strictly increasing positive ``points`` per
    axis, ``values`` of shape ``tuple(len(p) for p in points)`` and the ``measured`` mask of
    the same shape."""

    axes: tuple[str, ...]
    points: tuple[NDArray[np.float64], ...]
    values: NDArray[np.float64]
    measured: NDArray[np.bool_]

    def __post_init__(self) -> None:
        shape = tuple(len(p) for p in self.points)
        if len(self.axes) != len(self.points):
            raise KernelTableError(f"grid axes {self.axes} and points differ in number")
        if self.values.shape != shape or self.measured.shape != shape:
            raise KernelTableError(f"grid values {self.values.shape} / mask "
                                   f"{self.measured.shape} do not match axes {shape}")
        for name, points in zip(self.axes, self.points, strict=True):
            if points.size == 0 or not np.all(points > 0) or np.any(np.diff(points) <= 0):
                raise KernelTableError(f"grid axis {name!r}: points must be positive and "
                                       "strictly increasing")
        if not np.all(np.isfinite(self.values)):
            raise KernelTableError("grid values must be finite")

    @cached_property
    def log_points(self) -> tuple[NDArray[np.float64], ...]:
        """``log(points)`` per axis (the interpolation coordinates)."""
        return tuple(np.log(p) for p in self.points)

    @cached_property
    def flat_lists(self) -> tuple[list[float], list[bool], list[list[float]]]:
        """The values and the mask in C order, and the log points, as Python lists (for
        scalar lookups without numpy's per-call overhead)."""
        return (self.values.reshape(-1).tolist(), self.measured.reshape(-1).tolist(),
                [p.tolist() for p in self.log_points])


@dataclass(frozen=True, eq=False)
class Variant:
    """One grid of a table, selected by ``key`` (``{"dtype": "bf16"}``...). ``peak`` is the
    data type whose dense peak the efficiencies divide by (empty for a time table)."""

    key: Mapping[str, str | int]
    grid: Grid
    peak: str = ""
    rows: int = 0
    kernel_sources: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Table:
    """One op's tables on one accelerator: its variants and where they came from."""

    op: str
    quantity: str
    key_fields: tuple[str, ...]
    axes: tuple[str, ...]
    variants: tuple[Variant, ...]
    provenance: Mapping[str, Any]


@dataclass(frozen=True, eq=False)
class SystemTables:
    """Every table of one accelerator, with the peaks the efficiencies are relative to."""

    accelerator: str
    source_system: str
    device: str
    peak_flops: Mapping[str, float]
    hbm_bandwidth: float
    source: Mapping[str, Any]
    tables: Mapping[str, Table]


# --- writing -------------------------------------------------------------------------------

def _number(value: float) -> int | float:
    rounded = round_value(value)
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def _exact(value: float) -> int | float:
    # grid points are written exactly (they are looked up, not just read)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _variant_json(variant: Variant) -> dict[str, Any]:
    grid = variant.grid
    out: dict[str, Any] = {
        "key": dict(variant.key),
        "peak": variant.peak,
        "rows": variant.rows,
        "kernel_sources": dict(variant.kernel_sources),
        "grid": {name: [_exact(float(p)) for p in points]
                 for name, points in zip(grid.axes, grid.points, strict=True)},
        "values": [_number(float(v)) for v in grid.values.ravel()],
    }
    if not bool(grid.measured.all()):
        out["measured"] = "".join("1" if m else "0" for m in grid.measured.ravel())
    return out


def to_json(system: SystemTables) -> dict[str, Any]:
    """``system`` as the JSON document the files hold (values rounded as stored)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "accelerator": system.accelerator,
        "source_system": system.source_system,
        "device": system.device,
        "peaks": {"flops": dict(system.peak_flops), "hbm_bandwidth": system.hbm_bandwidth},
        "source": dict(system.source),
        "tables": {
            op: {
                "quantity": table.quantity,
                "key_fields": list(table.key_fields),
                "axes": list(table.axes),
                "provenance": dict(table.provenance),
                "variants": [_variant_json(v) for v in table.variants],
            }
            for op, table in system.tables.items()
        },
    }


def write_system(system: SystemTables, path: Path) -> int:
    """Write ``system`` to ``path`` (gzip-compressed JSON, byte-reproducible: no timestamp);
    returns the file's size in bytes."""
    text = json.dumps(to_json(system), separators=(",", ":"), sort_keys=False)
    data = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


# --- reading -------------------------------------------------------------------------------

def _need(mapping: Mapping[str, Any], name: str, kind: type | tuple[type, ...],
          where: str) -> Any:
    value = mapping.get(name)
    if not isinstance(value, kind):
        raise KernelTableError(f"{where}: field {name!r} missing or of the wrong type")
    return value


def _variant(doc: Mapping[str, Any], axes: Sequence[str], where: str) -> Variant:
    grid_doc = _need(doc, "grid", dict, where)
    points = tuple(np.asarray(_need(grid_doc, axis, list, where), dtype=np.float64)
                   for axis in axes)
    shape = tuple(len(p) for p in points)
    values = np.asarray(_need(doc, "values", list, where), dtype=np.float64)
    if values.size != int(np.prod(shape)):
        raise KernelTableError(f"{where}: {values.size} values for a grid of {shape}")
    mask_text = doc.get("measured")
    if mask_text is None:
        measured = np.ones(shape, dtype=bool)
    else:
        if not isinstance(mask_text, str) or len(mask_text) != values.size:
            raise KernelTableError(f"{where}: 'measured' must be one 0/1 per value")
        measured = (np.frombuffer(mask_text.encode("ascii"), dtype=np.uint8)
                    == ord("1")).reshape(shape)
    grid = Grid(tuple(axes), points, values.reshape(shape), measured)
    key = _need(doc, "key", dict, where)
    return Variant(key=dict(key), grid=grid, peak=str(doc.get("peak", "")),
                   rows=int(doc.get("rows", 0)),
                   kernel_sources=dict(doc.get("kernel_sources", {})))


def from_json(doc: Mapping[str, Any], where: str = "kernel table") -> SystemTables:
    """The :class:`SystemTables` of a parsed JSON document (checked)."""
    if doc.get("format") != FORMAT or doc.get("format_version") != FORMAT_VERSION:
        raise KernelTableError(f"{where}: not a {FORMAT} file of version {FORMAT_VERSION}")
    peaks = _need(doc, "peaks", dict, where)
    tables: dict[str, Table] = {}
    for op, table_doc in _need(doc, "tables", dict, where).items():
        at = f"{where}: table {op!r}"
        axes = tuple(str(a) for a in _need(table_doc, "axes", list, at))
        variants = tuple(_variant(v, axes, f"{at} variant {i}")
                         for i, v in enumerate(_need(table_doc, "variants", list, at)))
        tables[op] = Table(
            op=op,
            quantity=str(_need(table_doc, "quantity", str, at)),
            key_fields=tuple(str(f) for f in _need(table_doc, "key_fields", list, at)),
            axes=axes,
            variants=variants,
            provenance=dict(_need(table_doc, "provenance", dict, at)),
        )
    return SystemTables(
        accelerator=str(_need(doc, "accelerator", str, where)),
        source_system=str(doc.get("source_system", "")),
        device=str(doc.get("device", "")),
        peak_flops={str(k): float(v) for k, v in _need(peaks, "flops", dict, where).items()},
        hbm_bandwidth=float(_need(peaks, "hbm_bandwidth", (int, float), where)),
        source=dict(doc.get("source", {})),
        tables=tables,
    )


def read_system(path: Path) -> SystemTables:
    """Read one accelerator's tables from ``path`` (gzip-compressed JSON)."""
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise KernelTableError(f"{path}: unreadable kernel table ({error})") from error
    if not isinstance(doc, dict):
        raise KernelTableError(f"{path}: not a kernel-table document")
    return from_json(doc, str(path))

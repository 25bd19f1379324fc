"""Lookups in the measured kernel tables: efficiencies of GEMM, context attention and MoE,
and all-reduce times, vectorized over numpy arrays of the shape axes.

An efficiency is ``roofline time / measured time`` with the roofline of
:mod:`kvroof.kernels.work` at the dense peak of the op's data type and the accelerator's HBM
bandwidth (the peaks stored with the tables); so ``time = roofline time / efficiency``, which
:func:`op_time` returns. Between grid points a value is multilinear in the logarithm of the
sizes; outside the grid the boundary value is held and the :class:`Coverage` says so.

Every function takes the accelerator as a kvroof name or alias (``"h100-sxm"``, ``"h100"``),
an :class:`~kvroof.specs.hardware.Accelerator`, or a :class:`~kvroof.kernels.tables.
SystemTables` of one's own (derived with ``tools/kernels/derive.py`` from other measurements).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.kernels.interpolate import Interpolated, interpolate
from kvroof.kernels.store import system_tables
from kvroof.kernels.tables import KernelTableError, SystemTables, Table, Variant
from kvroof.kernels.work import attention_work, gemm_work, moe_work, roofline_time

if TYPE_CHECKING:
    from kvroof.specs.hardware import Accelerator

__all__ = [
    "OPS",
    "Coverage",
    "allreduce_time",
    "attention_efficiency",
    "covered",
    "efficiency",
    "gemm_efficiency",
    "moe_efficiency",
    "op_time",
    "provenance",
    "tables",
    "variants",
]

OPS: Final = ("gemm", "attention", "moe", "allreduce")
"""The ops a table may cover: three efficiencies and one time."""

Array = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Coverage:
    """What answered a lookup and how well the table covered it.

    ``accelerator`` and ``op`` name the table, ``key`` the variant used (``{"dtype": "bf16"}``),
    ``source`` the measurements in one line (repository and commit, system folder, framework
    and version, kernel sources). ``points`` is the number of query points;
    ``extrapolated_points`` of them lay outside the grid on ``extrapolated_axes`` (the
    boundary value was held; per point in ``outside``), ``unmeasured_points`` took weight from
    cells the derivation filled in between measured ones. ``substituted`` maps a variant field
    that had no exact table to ``(asked, used)``: the nearest measured value in log space.
    """

    accelerator: str
    op: str
    key: Mapping[str, str | int]
    source: str
    points: int
    extrapolated_points: int = 0
    extrapolated_axes: tuple[str, ...] = ()
    unmeasured_points: int = 0
    substituted: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    outside: NDArray[np.bool_] = field(default_factory=lambda: np.zeros((), dtype=bool))

    @property
    def extrapolated(self) -> bool:
        """Whether any point lay outside the measured grid."""
        return self.extrapolated_points > 0

    @property
    def unmeasured(self) -> bool:
        """Whether any point leant on a cell the derivation filled."""
        return self.unmeasured_points > 0

    @property
    def exact(self) -> bool:
        """Inside the grid, on measured cells, in the variant asked for."""
        return not (self.extrapolated or self.unmeasured or self.substituted)

    def describe(self) -> str:
        """One line: table, variant, source and what was not covered."""
        key = ", ".join(f"{k}={v}" for k, v in self.key.items())
        notes = []
        if self.extrapolated:
            notes.append(f"{self.extrapolated_points} of {self.points} points outside the "
                         f"table on {', '.join(self.extrapolated_axes)} (boundary held)")
        if self.unmeasured:
            notes.append(f"{self.unmeasured_points} of {self.points} points between filled "
                         "cells")
        for name, (asked, used) in self.substituted.items():
            notes.append(f"{name} {asked:g} not measured, used {used:g}")
        tail = "; ".join(notes) if notes else "inside the measured grid"
        return f"{self.op} on {self.accelerator} ({key}) from {self.source}: {tail}"


# --- tables and variants -----------------------------------------------------------------

def tables(accelerator: str | Accelerator | SystemTables) -> SystemTables:
    """All tables of ``accelerator``; :class:`KernelTableError` when none are shipped."""
    found = system_tables(accelerator)
    if found is None:
        raise KernelTableError(f"no kernel tables for accelerator "
                               f"{_name(accelerator)!r}; covered() says which ops exist")
    return found


def _name(accelerator: str | Accelerator | SystemTables) -> str:
    if isinstance(accelerator, str):
        return accelerator
    if isinstance(accelerator, SystemTables):
        return accelerator.accelerator
    return accelerator.name


def _table(system: SystemTables, op: str) -> Table:
    table = system.tables.get(op)
    if table is None:
        raise KernelTableError(f"no {op!r} table for accelerator {system.accelerator!r}; it "
                               f"has {', '.join(sorted(system.tables)) or 'none'}")
    return table


def covered(accelerator: str | Accelerator | SystemTables) -> frozenset[str]:
    """The ops with a table for ``accelerator`` (empty for an unknown one or one without
    tables)."""
    if isinstance(accelerator, SystemTables):
        return frozenset(accelerator.tables)
    from kvroof.kernels.store import index, resolve

    name = resolve(accelerator)
    if name is None:
        return frozenset()
    return frozenset(index()["accelerators"][name].get("ops", ()))


def provenance(accelerator: str | Accelerator | SystemTables, op: str) -> dict[str, Any]:
    """Where ``op``'s table for ``accelerator`` came from: repository, commit, licence,
    system folder, device, framework and version, files, kernel sources, rows used, the
    peaks the efficiencies divide by, and how it was derived (a fresh copy)."""
    system = tables(accelerator)
    table = _table(system, op)
    out: dict[str, Any] = dict(system.source)
    out.update({"accelerator": system.accelerator, "source_system": system.source_system,
                "device": system.device, "op": op, "quantity": table.quantity,
                "peak_flops": dict(system.peak_flops),
                "hbm_bandwidth": system.hbm_bandwidth})
    out.update(table.provenance)
    return copy.deepcopy(out)


def variants(accelerator: str | Accelerator | SystemTables, op: str
             ) -> list[dict[str, str | int]]:
    """The variant keys of ``op``'s table (``[{"dtype": "bf16"}, {"dtype": "fp8"}, ...]``)."""
    return [dict(v.key) for v in _table(tables(accelerator), op).variants]


def _select(table: Table, wanted: Mapping[str, str | int], accelerator: str
            ) -> tuple[Variant, dict[str, tuple[float, float]]]:
    """The variant equal to ``wanted`` on its text fields and nearest (in log space) on its
    numeric fields, with the numeric fields that differ (cached per table and key)."""
    return _select_cached(table, tuple(wanted.items()), accelerator)


@lru_cache(maxsize=4096)
def _select_cached(table: Table, wanted_items: tuple[tuple[str, str | int], ...],
                   accelerator: str) -> tuple[Variant, dict[str, tuple[float, float]]]:
    text = {k: v for k, v in wanted_items if isinstance(v, str)}
    numbers = {k: float(v) for k, v in wanted_items if not isinstance(v, str)}
    candidates = [v for v in table.variants
                  if all(str(v.key.get(k)) == s for k, s in text.items())]
    if not candidates:
        have = sorted({", ".join(f"{k}={v.key.get(k)}" for k in text)
                       for v in table.variants})
        asked = ", ".join(f"{k}={s}" for k, s in text.items())
        raise KernelTableError(f"no {table.op} table for {asked} on {accelerator}; "
                               f"measured: {'; '.join(have)}")
    for name, value in numbers.items():
        if not (value > 0 and math.isfinite(value)):
            raise KernelTableError(f"{name} must be a positive number, not {value!r}")

    def distance(variant: Variant) -> float:
        return sum(math.log(float(variant.key[k]) / v) ** 2 for k, v in numbers.items())

    best = min(candidates, key=distance)
    substituted = {k: (v, float(best.key[k])) for k, v in numbers.items()
                   if float(best.key[k]) != v}
    return best, substituted


@lru_cache(maxsize=4096)
def _source(system: SystemTables, table: Table, variant: Variant) -> str:
    prov = table.provenance
    commit = str(system.source.get("commit", ""))[:10]
    repo = str(system.source.get("repository", "aiconfigurator"))
    where = f"{repo}@{commit}" if commit else repo
    kernels = ", ".join(sorted(variant.kernel_sources)) or "?"
    backends = prov.get("backends")
    if isinstance(backends, dict) and variant.key.get("backend") in backends:
        engine = str(backends[variant.key["backend"]])
    else:
        engine = f"{prov.get('framework', '?')} {prov.get('version', '?')}"
    return f"{where} {system.source_system} {engine} ({kernels})"


def _coverage(system: SystemTables, table: Table, variant: Variant, result: Interpolated,
              substituted: dict[str, tuple[float, float]],
              outside: NDArray[np.bool_] | None = None) -> Coverage:
    extrapolated = result.extrapolated if outside is None else outside
    count = int(np.count_nonzero(extrapolated))
    axes = tuple(name for name, mask in result.outside.items()
                 if count and bool(np.any(mask & extrapolated)))
    return Coverage(
        accelerator=system.accelerator,
        op=table.op,
        key=dict(variant.key),
        source=_source(system, table, variant),
        points=int(result.values.size),
        extrapolated_points=count,
        extrapolated_axes=axes,
        unmeasured_points=int(np.count_nonzero(result.unmeasured)),
        substituted=dict(substituted),
        outside=extrapolated,
    )


# --- efficiencies --------------------------------------------------------------------------

def gemm_efficiency(accelerator: str | Accelerator | SystemTables, m: ArrayLike,
                    n: ArrayLike, k: ArrayLike, dtype: str = "bf16"
                    ) -> tuple[Array, Coverage]:
    """Measured efficiency of the GEMM ``[m, k] x [k, n]`` (``m`` tokens, ``n`` output and
    ``k`` input features, element counts) in ``dtype`` (``bf16``, ``fp8``, ``fp8_block``,
    ``nvfp4``): roofline time (:func:`kvroof.kernels.work.gemm_work`) / measured time."""
    system = tables(accelerator)
    table = _table(system, "gemm")
    variant, substituted = _select(table, {"dtype": dtype}, system.accelerator)
    result = interpolate(variant.grid, {"m": m, "n": n, "k": k})
    return result.values, _coverage(system, table, variant, result, substituted)


def _window_coordinate(variant: Variant, seq_len: Array, window: Array) -> Array:
    """The window axis's coordinate: its last point stands for full attention, which a window
    of 0 or of at least ``seq_len`` is."""
    points = variant.grid.points[variant.grid.axes.index("window")]
    full = float(points[-1])
    return np.where((window <= 0) | (window >= seq_len), full, np.minimum(window, full))


def attention_efficiency(accelerator: str | Accelerator | SystemTables, seq_len: ArrayLike,
                         heads: ArrayLike, kv_heads: ArrayLike, head_dim: int,
                         window: ArrayLike = 0, dtype: str = "bf16", kv_dtype: str = "bf16"
                         ) -> tuple[Array, Coverage]:
    """Measured efficiency of causal context attention over ``seq_len`` tokens (batch 1, no
    cached prefix) with ``heads`` query and ``kv_heads`` KV heads per GPU of ``head_dim``,
    each query seeing at most ``window`` keys (0: all); ``dtype`` is the attention math,
    ``kv_dtype`` the KV cache's. A ``head_dim`` without a table uses the nearest measured one
    (reported in ``Coverage.substituted``)."""
    system = tables(accelerator)
    table = _table(system, "attention")
    variant, substituted = _select(
        table, {"dtype": dtype, "kv_dtype": kv_dtype, "head_dim": int(head_dim)},
        system.accelerator)
    s = np.asarray(seq_len, dtype=np.float64)
    w = np.asarray(window, dtype=np.float64)
    s, w = np.broadcast_arrays(s, w)
    coords = {"seq_len": s, "heads": heads, "kv_heads": kv_heads,
              "window": _window_coordinate(variant, s, w)}
    result = interpolate(variant.grid, coords)
    return result.values, _coverage(system, table, variant, result, substituted)


def moe_efficiency(accelerator: str | Accelerator | SystemTables, tokens: ArrayLike,
                   hidden: int, inter_per_rank: ArrayLike, experts: int, top_k: int,
                   dtype: str = "bf16", distribution: str = "balanced"
                   ) -> tuple[Array, Coverage]:
    """Measured efficiency of one fused MoE layer on one GPU: ``tokens`` routed to ``top_k``
    of ``experts`` experts of ``hidden`` x ``inter_per_rank`` (the intermediate width over the
    tensor-parallel degree), weights in ``dtype``, routing ``distribution`` (``balanced``,
    ``power_law_1.01``, ``power_law_1.2``). An unmeasured (hidden, experts, top_k) uses the
    nearest measured shape in log space (reported in ``Coverage.substituted``)."""
    system = tables(accelerator)
    table = _table(system, "moe")
    variant, substituted = _select(
        table, {"dtype": dtype, "distribution": distribution, "hidden": int(hidden),
                "experts": int(experts), "top_k": int(top_k)}, system.accelerator)
    result = interpolate(variant.grid, {"tokens": tokens, "inter_per_rank": inter_per_rank})
    return result.values, _coverage(system, table, variant, result, substituted)


_SHAPES: Final = {
    "gemm": ("m", "n", "k"),
    "attention": ("seq_len", "heads", "kv_heads", "head_dim", "window", "kv_dtype"),
    "moe": ("tokens", "hidden", "inter_per_rank", "experts", "top_k", "distribution"),
}


def _check_shape(op: str, shape: Mapping[str, Any]) -> None:
    if op not in _SHAPES:
        raise KernelTableError(f"unknown kernel op {op!r}; efficiencies exist for "
                               f"{', '.join(_SHAPES)} (all-reduce: allreduce_time)")
    unknown = sorted(set(shape) - set(_SHAPES[op]))
    if unknown:
        raise KernelTableError(f"{op} takes {', '.join(_SHAPES[op])}, not "
                               f"{', '.join(unknown)}")


def efficiency(accelerator: str | Accelerator | SystemTables, op: str, dtype: str = "bf16",
               **shape: Any) -> tuple[Array, Coverage]:
    """Measured efficiency of ``op`` (``gemm``, ``attention``, ``moe``) in ``dtype`` at
    ``shape`` (the keyword arguments of :func:`gemm_efficiency`,
    :func:`attention_efficiency` or :func:`moe_efficiency`)."""
    _check_shape(op, shape)
    if op == "gemm":
        return gemm_efficiency(accelerator, dtype=dtype, **shape)
    if op == "attention":
        return attention_efficiency(accelerator, dtype=dtype, **shape)
    return moe_efficiency(accelerator, dtype=dtype, **shape)


def op_time(accelerator: str | Accelerator | SystemTables, op: str, dtype: str = "bf16",
            **shape: Any) -> tuple[Array, Coverage]:
    """Measured time (seconds) of ``op`` at ``shape``: its roofline time
    (:mod:`kvroof.kernels.work`, at the peaks stored with the tables) over its efficiency.
    ``op="allreduce"`` takes ``backend``, ``num_gpus`` and ``message_bytes`` as
    :func:`allreduce_time` does."""
    if op == "allreduce":
        return allreduce_time(accelerator, **shape)
    eff, coverage = efficiency(accelerator, op, dtype, **shape)
    system = tables(accelerator)
    table = _table(system, op)
    variant = next(v for v in table.variants if dict(v.key) == dict(coverage.key))
    if op == "gemm":
        flops, bytes_ = gemm_work(shape["m"], shape["n"], shape["k"], dtype)
    elif op == "attention":
        flops, bytes_ = attention_work(
            shape["seq_len"], shape["heads"], shape["kv_heads"], shape["head_dim"],
            shape.get("window", 0), dtype, str(shape.get("kv_dtype", "bf16")))
    else:
        flops, bytes_ = moe_work(shape["tokens"], shape["hidden"], shape["inter_per_rank"],
                                 shape["experts"], shape["top_k"], dtype)
    peak = system.peak_flops.get(variant.peak)
    if peak is None:
        raise KernelTableError(f"{system.accelerator}: no stored {variant.peak} peak for the "
                               f"{op} table")
    return roofline_time(flops, bytes_, peak, system.hbm_bandwidth) / eff, coverage


# --- all-reduce ----------------------------------------------------------------------------

def allreduce_time(accelerator: str | Accelerator | SystemTables, backend: str,
                   num_gpus: ArrayLike, message_bytes: ArrayLike) -> tuple[Array, Coverage]:
    """Measured time (seconds) of one all-reduce of ``message_bytes`` (16-bit data) among
    ``num_gpus`` GPUs with ``backend`` (``vllm_graph``, ``vllm_eager``: vLLM's custom
    all-reduce under CUDA graphs or eagerly; ``nccl``; ``sglang_graph``, ``sglang_eager``,
    ``trtllm`` where measured). One GPU takes no time. Below the smallest message the time
    is held (a latency floor); above the largest it grows in proportion to the bytes (the
    boundary bandwidth held); between GPU counts it is interpolated in log space; both are
    reported as extrapolated."""
    system = tables(accelerator)
    table = _table(system, "allreduce")
    variant, substituted = _select(table, {"backend": backend}, system.accelerator)
    gpus, size = np.broadcast_arrays(np.asarray(num_gpus, dtype=np.float64),
                                     np.asarray(message_bytes, dtype=np.float64))
    if np.any(~(gpus >= 1)) or np.any(~(size >= 0)) or not np.all(np.isfinite(size)):
        raise KernelTableError("num_gpus must be at least 1 and message_bytes a finite "
                               "number of bytes >= 0")
    single = (gpus <= 1) | (size == 0)
    points = variant.grid.points
    gpu_axis = points[variant.grid.axes.index("num_gpus")]
    size_axis = points[variant.grid.axes.index("message_bytes")]
    query_gpus = np.where(single, gpu_axis[0], gpus)
    query_size = np.where(single, size_axis[0], size)
    result = interpolate(variant.grid, {"message_bytes": query_size, "num_gpus": query_gpus})
    scale = np.where(query_size > size_axis[-1], query_size / size_axis[-1], 1.0)
    times = np.where(single, 0.0, result.values * scale)
    outside = result.extrapolated & ~single
    return times, _coverage(system, table, variant, result, substituted, outside)

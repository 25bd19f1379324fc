"""Grids of simulations (``kvroof sweep CONFIG.yaml``), on local processes or a Dask cluster.

A sweep config (YAML) names a trace, a model and base settings, and a ``grid`` of values to
cross; every combination is one simulation and one row of the result (its grid values and its
flattened summary). Keys of the grid and of the base sections:

- ``hardware`` (``SYSTEM:TP``, or a list of them for mixed replicas) and ``replicas`` (how many
  of each);
- arrivals: ``rps``, ``arrival`` (poisson, gamma), ``burstiness``, ``time_scale``,
  ``output_tokens``, ``seed``, ``users``, ``think_time``, ``requests`` (the first N requests of
  the trace);
- any :class:`~kvroof.simulate.settings.SimSettings` field (``scheduler``, ``cache_policy``,
  ``load_mode``, ``router``, ``dram_cache`` ...);
- any other key is a cost-model setting of the deployments (``bandwidth_source``,
  ``kv_dtype``, ``link_efficiency`` ...; see :func:`kvroof.cost.deployment.deployment`).

Sizes, powers and times may carry units (``"100 GB"``, ``"400 W"``, ``"2 s"``). Every point is
checked (its deployments built, their fit checked) before any runs, so a bad value is one line
naming the file and key. Points run on ``jobs`` local processes
(:class:`concurrent.futures.ProcessPoolExecutor`) or on an existing Dask cluster
(``distributed.Client(address)``; the optional extra ``kvroof[distributed]``); each worker
loads the trace once and keeps it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvroof.cost.deployment import Deployment
from kvroof.errors import KvroofError, SpecError
from kvroof.simulate.settings import MAX_REPLICAS, ReplicaSpec, SimSettings
from kvroof.units import Kind, UnitError, parse_quantity

__all__ = ["SweepConfig", "SweepPoint", "load_sweep_config", "run_point", "run_sweep"]

MAX_CONFIG_BYTES = 1 << 20
MAX_POINTS = 100_000
"""More grid points than this is almost certainly a mistake."""

ARRIVAL_KEYS = ("rps", "arrival", "burstiness", "time_scale", "output_tokens", "seed", "users",
                "think_time", "requests")
SETTING_KEYS = tuple(f.name for f in fields(SimSettings) if f.name != "label")
DEPLOYMENT_KEYS = tuple(f.name for f in fields(Deployment)
                        if f.name not in ("model", "accelerator", "link", "system", "tp"))
"""Settings of a point's deployments (its model, hardware and TP come from ``model`` and
``hardware``, ``SYSTEM:TP``)."""
_UNITS: dict[str, Kind] = {"dram_cache": Kind.CAPACITY, "tier_cache": Kind.CAPACITY,
                           "activation_reserve": Kind.CAPACITY, "power_cap": Kind.POWER,
                           "slo_ttft": Kind.TIME, "slo_tpot": Kind.TIME,
                           "admission_backlog": Kind.TIME, "think_time": Kind.TIME,
                           "bandwidth": Kind.BANDWIDTH, "compute": Kind.COMPUTE,
                           "latency": Kind.TIME}


class SweepConfig(BaseModel):
    """A sweep (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    trace: Path | None = None
    format: str | None = None
    skip_bad: bool = False
    hardware: str | list[str] = "paper-testbed:8"
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS)
    deployment: dict[str, Any] = Field(default_factory=dict)
    simulation: dict[str, Any] = Field(default_factory=dict)
    arrivals: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)


@dataclass(frozen=True)
class SweepPoint:
    """One simulation of a sweep: plain values only, so it pickles to any worker."""

    index: int
    grid: dict[str, Any]
    model: str
    trace: str | None
    format: str | None
    skip_bad: bool
    hardware: tuple[str, ...]
    replicas: int
    deployment: dict[str, Any] = field(default_factory=dict)
    simulation: dict[str, Any] = field(default_factory=dict)
    arrivals: dict[str, Any] = field(default_factory=dict)
    spec_paths: tuple[str, ...] = ()
    """Folders of the user's own spec files (``--spec-path``), read by each worker."""


def _value(key: str, value: Any) -> Any:
    kind = _UNITS.get(key)
    if kind is not None and isinstance(value, str):
        try:
            return parse_quantity(value, kind)
        except UnitError as error:
            raise KvroofError(f"{key}: {error}") from None
    return value


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read a sweep config; errors name the file and the key."""
    from kvroof.files.yaml_reading import load_yaml_file
    from kvroof.specs.loader import validation_message

    source = Path(path)
    data = load_yaml_file(source, MAX_CONFIG_BYTES, "sweep configs")
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of settings at the top level", source)
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as error:
        key, message = validation_message(error)
        raise SpecError(message, source, key) from None
    if config.trace is not None and not config.trace.is_absolute():
        config = config.model_copy(update={"trace": source.parent / config.trace})
    return config


def points(config: SweepConfig, spec_paths: Sequence[str] = ()) -> list[SweepPoint]:
    """Every combination of the grid, in order (the last key varies fastest)."""
    keys = list(config.grid)
    for section, names in (("deployment", config.deployment), ("grid", config.grid)):
        if "tp" in names:
            raise KvroofError(f"{section}.tp: give TP with the hardware, SYSTEM:TP (a grid of "
                              "TPs: grid: {hardware: [paper-testbed:4, paper-testbed:8]})")
    for key in config.deployment:
        if key not in DEPLOYMENT_KEYS:
            raise KvroofError(f"deployment.{key}: unknown key (allowed: "
                              f"{', '.join(DEPLOYMENT_KEYS)})")
    for key in keys:
        if key not in ("hardware", "replicas", *ARRIVAL_KEYS, *SETTING_KEYS, *DEPLOYMENT_KEYS):
            raise KvroofError(f"grid.{key}: unknown key (a deployment, simulation or arrivals "
                              f"setting, hardware or replicas)")
        if not config.grid[key]:
            raise KvroofError(f"grid.{key}: give at least one value")
    count = math.prod(len(config.grid[key]) for key in keys)
    if count > MAX_POINTS:
        raise KvroofError(f"grid: {count:,} points, more than {MAX_POINTS:,}")
    result = []
    for index, combo in enumerate(itertools.product(*(config.grid[k] for k in keys))):
        chosen = dict(zip(keys, combo, strict=True))
        sections: dict[str, dict[str, Any]] = {
            "deployment": dict(config.deployment), "simulation": dict(config.simulation),
            "arrivals": dict(config.arrivals)}
        hardware: Any = config.hardware
        replicas = config.replicas
        for key, value in chosen.items():
            if key == "hardware":
                hardware = value
            elif key == "replicas":
                replicas = value
            elif key in ARRIVAL_KEYS:
                sections["arrivals"][key] = value
            elif key in SETTING_KEYS:
                sections["simulation"][key] = value
            else:
                sections["deployment"][key] = value
        if (not isinstance(replicas, int) or isinstance(replicas, bool)
                or not 1 <= replicas <= MAX_REPLICAS):
            raise KvroofError(f"grid.replicas: expected an integer from 1 to {MAX_REPLICAS:,}, "
                              f"got {replicas!r}")
        result.append(SweepPoint(
            index=index, grid=chosen, model=config.model,
            trace=None if config.trace is None else str(config.trace), format=config.format,
            skip_bad=config.skip_bad,
            hardware=tuple(hardware) if isinstance(hardware, list) else (str(hardware),),
            replicas=replicas, spec_paths=tuple(spec_paths), **sections))
    return result


_TRACES: dict[tuple[str | None, str | None, bool], Any] = {}


def _trace(point: SweepPoint) -> Any:
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    key = (point.trace, point.format, point.skip_bad)
    if key not in _TRACES:
        _TRACES[key] = load_requests(point.trace or MOONCAKE_SLICE, point.format,
                                     skip_bad=point.skip_bad)
    return _TRACES[key]


def _build(point: SweepPoint) -> tuple[list[Any], SimSettings, dict[str, Any]]:
    """The point's deployments (fit checked), settings and arrivals, or a KvroofError."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.memory_fit import check_fit
    from kvroof.simulate.runner import check_applies
    from kvroof.specs.registry import Registry, default_registry

    registry = Registry(list(point.spec_paths)) if point.spec_paths else default_registry()
    where = ", ".join(f"{k}={v}" for k, v in point.grid.items()) or "the base settings"
    try:
        unknown = set(point.arrivals) - set(ARRIVAL_KEYS)
        if unknown:
            raise KvroofError(f"arrivals.{sorted(unknown)[0]}: unknown key (allowed: "
                              f"{', '.join(ARRIVAL_KEYS)})")
        unknown = set(point.simulation) - set(SETTING_KEYS)
        if unknown:
            raise KvroofError(f"simulation.{sorted(unknown)[0]}: unknown key (allowed: "
                              f"{', '.join(SETTING_KEYS)})")
        settings = SimSettings(**{k: _value(k, v) for k, v in point.simulation.items()})
        extra = {k: _value(k, v) for k, v in point.deployment.items()}
        deps = []
        for item in point.hardware:
            spec = ReplicaSpec.parse(str(item))
            dep = deployment(point.model, system=spec.system, registry=registry,
                             **{"tp": spec.tp, **extra})
            check_fit(dep)
            deps += [dep] * point.replicas
        arrivals = {k: _value(k, v) for k, v in point.arrivals.items()}
        given = dict(arrivals)
        if "aging_limit" in point.simulation and "scheduler" not in point.grid:
            given["aging_limit"] = settings.aging_limit  # a grid of schedulers may need it
        check_applies(given, [settings.scheduler])
    except KvroofError as error:
        raise KvroofError(f"grid point {point.index} ({where}): {error}") from None
    return deps, settings, arrivals


def check_points(all_points: Sequence[SweepPoint]) -> None:
    """Build every point's deployments and settings (no simulation): errors before any work."""
    for point in all_points:
        _build(point)


def run_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one point; its row (grid values, then the flattened summary)."""
    from kvroof.simulate.runner import prepare_trace, simulate

    deps, settings, arrivals = _build(point)
    trace = _trace(point)
    limit = arrivals.pop("requests", None)
    if limit is not None:
        import numpy as np

        trace = trace.take(np.arange(min(int(limit), len(trace))))
    users = arrivals.pop("users", None)
    think = float(arrivals.pop("think_time", 0.0))
    trace = prepare_trace(trace, closed_loop=users is not None, **arrivals)
    result = simulate(trace, deps, settings, users=users, think_time=think,
                      skip_bad=point.skip_bad)
    row: dict[str, Any] = {"point": point.index, **point.grid}
    row.update(result.row())
    return row


Progress = Callable[[int, int], None]


def _local(all_points: Sequence[SweepPoint], jobs: int) -> Iterator[dict[str, Any]]:
    if jobs <= 1:
        for point in all_points:
            yield run_point(point)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_point, point) for point in all_points]
        for future in as_completed(futures):
            yield future.result()


def _dask(all_points: Sequence[SweepPoint], address: str) -> Iterator[dict[str, Any]]:
    from importlib import import_module

    try:
        distributed: Any = import_module("distributed")  # untyped: used through Any
    except ImportError:
        raise KvroofError("--dask needs the 'distributed' package (pip install "
                          "'kvroof[distributed]')") from None
    try:
        client = distributed.Client(address, timeout=30)
    except OSError as error:
        raise KvroofError(f"--dask {address}: cannot connect ({error})") from None
    try:
        futures = client.map(run_point, list(all_points), pure=False)
        for future in distributed.as_completed(futures):
            yield future.result()
    finally:
        client.close()


def run_sweep(config: SweepConfig, *, jobs: int = 1, dask: str | None = None,
              progress: Progress | None = None,
              spec_paths: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Run every point of ``config``; rows in point order. ``dask``: a scheduler address;
    ``spec_paths``: folders of the user's own specs."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise KvroofError(f"--jobs: expected a positive integer, got {jobs!r}")
    all_points = points(config, spec_paths)
    check_points(all_points)
    rows: list[dict[str, Any]] = []
    source = _dask(all_points, dask) if dask is not None else _local(all_points, jobs)
    for row in source:
        rows.append(row)
        if progress is not None:
            progress(len(rows), len(all_points))
    rows.sort(key=lambda r: int(r["point"]))
    return rows


def grid_columns(config: SweepConfig) -> list[str]:
    """The grid's keys (the columns that tell rows apart)."""
    return list(config.grid)


def summary_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with the most-read columns first (for printing)."""
    first = ("point", "requests", "ttft_s_p50", "ttft_s_p99", "tpot_s_p50", "throughput_rps",
             "tokens_per_iteration", "power_mean_w")
    return {k: row[k] for k in first if k in row}

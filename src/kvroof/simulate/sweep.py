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
checked before any runs (:func:`check_points`: its deployments built and their fit and
resources checked, its settings, arrival values, seed, output lengths and request count), so
a bad value in the last point costs no work: one line naming the point (its values) and the
key. Points run in this process, on ``jobs`` local worker processes
(:mod:`kvroof.simulate.sweep_pool`) or on an existing Dask cluster
(:mod:`kvroof.simulate.sweep_dask`; the optional extra ``kvroof[distributed]``); each worker
loads the trace once and keeps it. A point that fails as it runs fails alone: its error is
caught where it runs and the other points go on (:func:`iter_sweep` yields each point's
outcome; :func:`run_sweep` collects the rows and the failed points). Ctrl-C or SIGTERM drops
the queued points and stops the workers at once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvroof.errors import KvroofError, UnknownNameError, clip, short_repr
from kvroof.simulate.settings import ReplicaSpec, SimSettings
from kvroof.simulate.sweep_config import (
    ARRIVAL_KEYS,
    DEPLOYMENT_KEYS,
    MAX_CONFIG_BYTES,
    MAX_POINTS,
    SETTING_KEYS,
    SweepConfig,
    SweepPoint,
    load_sweep_config,
    points,
    setting_value,
)

__all__ = ["ARRIVAL_KEYS", "DEPLOYMENT_KEYS", "MAX_CONFIG_BYTES", "MAX_POINTS", "SETTING_KEYS",
           "PointOutcome", "SweepConfig", "SweepPoint", "SweepResult", "check_points",
           "check_trace", "iter_sweep", "load_sweep_config", "points", "run_point", "run_sweep"]

_TRACES: dict[tuple[str | None, str | None, bool], Any] = {}
_REGISTRIES: dict[tuple[str, ...], Any] = {}


def _trace(point: SweepPoint) -> Any:
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    key = (point.trace, point.format, point.skip_bad)
    if key not in _TRACES:
        _TRACES[key] = load_requests(point.trace or MOONCAKE_SLICE, point.format,
                                     skip_bad=point.skip_bad)
    return _TRACES[key]


def _registry(spec_paths: tuple[str, ...]) -> Any:
    """The registry of the built-in specs and ``spec_paths`` (read once per sweep and worker
    process: :func:`check_points` starts afresh)."""
    from kvroof.specs.registry import Registry, default_registry

    if not spec_paths:
        return default_registry()
    if spec_paths not in _REGISTRIES:
        _REGISTRIES[spec_paths] = Registry(list(spec_paths))
    return _REGISTRIES[spec_paths]


def _once(cache: dict[str, Any], key: str, build: Callable[[], Any]) -> Any:
    """``build()``, or what it gave (or raised) for ``key`` before."""
    if key not in cache:
        try:
            cache[key] = (build(), None)
        except KvroofError as error:
            cache[key] = (None, error)
    value, failure = cache[key]
    if failure is not None:
        raise failure
    return value


def _build(point: SweepPoint, cache: dict[str, Any] | None = None,
           ) -> tuple[list[Any], SimSettings, dict[str, Any], Any]:
    """The point's deployments (built, their fit and the replicas' resources checked), its
    settings, arrivals (checked: :func:`~kvroof.simulate.sweep_checks.arrival_values`) and
    registry; or a KvroofError starting with the key. ``cache``: deployments and resources
    already built for other points."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.memory_fit import check_fit
    from kvroof.simulate.resources import replica_resources
    from kvroof.simulate.runner import check_applies
    from kvroof.simulate.sweep_checks import arrival_values, check_switches

    cache = {} if cache is None else cache
    registry = _registry(point.spec_paths)
    unknown = set(point.arrivals) - set(ARRIVAL_KEYS)
    if unknown:
        raise KvroofError(f"arrivals.{sorted(unknown)[0]}: unknown key (allowed: "
                          f"{', '.join(ARRIVAL_KEYS)})")
    unknown = set(point.simulation) - set(SETTING_KEYS)
    if unknown:
        raise KvroofError(f"simulation.{sorted(unknown)[0]}: unknown key (allowed: "
                          f"{', '.join(SETTING_KEYS)})")
    check_switches(point.simulation)
    settings = SimSettings(**{k: setting_value(k, v) for k, v in point.simulation.items()})
    extra = {k: setting_value(k, v) for k, v in point.deployment.items()}
    deps = []
    for item in point.hardware:
        try:
            spec = ReplicaSpec.parse(str(item))
        except KvroofError as error:
            raise KvroofError(str(error).replace("--replica:", "hardware:", 1)) from None

        def build(spec: ReplicaSpec = spec) -> Any:
            try:
                dep = deployment(point.model, system=spec.system, registry=registry,
                                 **{"tp": spec.tp, **extra})
            except UnknownNameError as error:  # name the key that gave the name
                key = {"system": "hardware", "model": "model"}.get(error.kind)
                if key is None:
                    raise
                raise KvroofError(f"{key}: {error}") from None
            check_fit(dep)
            return dep

        key = repr((point.model, point.spec_paths, str(item), extra))
        dep = _once(cache, "deployment " + key, build)

        def resources(dep: Any = dep) -> Any:
            return replica_resources(dep, settings, registry)

        _once(cache, f"resources {key} {settings!r}", resources)
        deps += [dep] * point.replicas
    arrivals = arrival_values(point.arrivals)
    given = dict(arrivals)
    if "aging_limit" in point.simulation and "scheduler" not in point.grid:
        given["aging_limit"] = settings.aging_limit  # a grid of schedulers may need it
    check_applies(given, [settings.scheduler])
    return deps, settings, arrivals, registry


def describe(point: SweepPoint) -> str:
    """``grid point N (KEY=VALUE, ...)``: how errors name a point."""
    where = ", ".join(f"{k}={clip(str(v), 40)}" for k, v in point.grid.items())
    return f"grid point {point.index} ({where or 'the base settings'})"


def error_text(error: BaseException) -> str:
    """One line for an exception of a point: kvroof's own errors as they are, others with
    their type (a bug, or a problem of the machine)."""
    text = str(error) if isinstance(error, KvroofError) else f"{type(error).__name__}: {error}"
    return clip(" ".join(text.split()), 1000)


def check_points(all_points: Sequence[SweepPoint]) -> None:
    """Check every point (deployments built and fitted, resources, settings, arrivals; no
    simulation) before any runs: the first bad point's error names it and its key, and says
    how many others are bad."""
    _REGISTRIES.clear()  # a new sweep reads the user's spec folders afresh (then once)
    cache: dict[str, Any] = {}
    first = None
    bad = 0
    for point in all_points:
        try:
            _build(point, cache)
        except Exception as error:  # a value of a type nothing expected: still one line
            bad += 1
            if first is None:
                first = f"{describe(point)}: {error_text(error)}"
    if first is not None:
        more = "" if bad == 1 else f" (and {bad - 1} more bad point{'s' if bad > 2 else ''})"
        raise KvroofError(first + more)


def check_trace(all_points: Sequence[SweepPoint]) -> None:
    """Load the points' trace here, once (for local runs: workers forked from this process
    find it loaded), so that an unreadable trace, one without arrival times for a point that
    gives neither ``rps`` nor ``users``, or one without output lengths for a point that gives
    no ``output_tokens``, is an error before any point runs."""
    for point in all_points:
        trace = _trace(point)
        where = f"{describe(point)}: {trace.path or trace.name}"
        if trace.arrival_time is None and not {"rps", "users"} & set(point.arrivals):
            raise KvroofError(f"{where}: the trace has no arrival times; give rps or users")
        if "output_tokens" not in point.arrivals:
            used = trace.output_known[:point.arrivals.get("requests", len(trace))]
            if not used.all():
                raise KvroofError(f"{where}: output length unknown ({int((~used).sum()):,} "
                                  "request(s)); give output_tokens (N, exp:MEAN or "
                                  "uniform:LO:HI)")


def _run(point: SweepPoint) -> dict[str, Any]:
    from kvroof.simulate.runner import prepare_trace, simulate

    deps, settings, arrivals, registry = _build(point)
    trace = _trace(point)
    limit = arrivals.pop("requests", None)
    if limit is not None:
        import numpy as np

        trace = trace.take(np.arange(min(limit, len(trace))))
    users = arrivals.pop("users", None)
    think = float(arrivals.pop("think_time", 0.0))
    trace = prepare_trace(trace, closed_loop=users is not None, **arrivals)
    result = simulate(trace, deps, settings, users=users, think_time=think,
                      skip_bad=point.skip_bad, registry=registry)
    row: dict[str, Any] = {"point": point.index, **point.grid}
    row.update(result.row())
    return row


def run_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one point; its row (grid values, then the flattened summary). Errors name the
    point."""
    try:
        return _run(point)
    except KvroofError as error:
        raise KvroofError(f"{describe(point)}: {error}") from None


def point_result(point: SweepPoint) -> tuple[dict[str, Any] | None, str | None]:
    """``(row, None)``, or ``(None, the error)``: what a worker sends back for one point (every
    exception is caught, so one point's failure is only that point's)."""
    try:
        return _run(point), None
    except Exception as error:
        return None, error_text(error)


@dataclass(frozen=True)
class PointOutcome:
    """How one point ended: its row, or the error (``stall``: the whole run's, given to every
    unfinished point of a stalled cluster)."""

    point: SweepPoint
    row: dict[str, Any] | None = None
    error: str | None = None
    stall: bool = False


def check_run_options(jobs: int, timeout: float | None) -> None:
    """``jobs`` a positive integer, ``timeout`` positive seconds or None."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise KvroofError(f"--jobs: expected a positive integer, got {jobs!r}")
    if timeout is not None and (isinstance(timeout, bool)
                                or not isinstance(timeout, int | float)
                                or not (math.isfinite(timeout) and timeout > 0)):
        raise KvroofError(f"--timeout: expected a positive number of seconds, got {timeout!r}")


def iter_sweep(all_points: Sequence[SweepPoint], *, jobs: int = 1, dask: str | None = None,
               timeout: float | None = None,
               note: Callable[[str], None] | None = None,
               ) -> Generator[PointOutcome, None, None]:
    """Run checked points (:func:`check_points`) and yield each one's outcome as it ends.

    ``jobs`` local worker processes (one point at a time in this process when 1 and no
    ``timeout``), or the Dask cluster at ``dask``. ``timeout`` (seconds): locally, a point
    that runs longer is stopped (its worker process is replaced) and fails; on Dask, the run
    ends once no point has finished for that long, its unfinished points failing with one
    reason (``stall``). Closing the iterator, or Ctrl-C/SIGTERM while it waits, drops the
    queued points and stops the workers at once. ``note``: told of events worth a line (Dask
    workers that leave)."""
    from kvroof.simulate.sweep_pool import Lost

    check_run_options(jobs, timeout)
    source: Generator[tuple[int, Any], None, None]
    if dask is not None:
        from kvroof.simulate.sweep_dask import run_on_dask

        source = run_on_dask(point_result, all_points, dask, timeout=timeout, note=note)
    elif jobs > 1 or timeout is not None:
        from kvroof.simulate.sweep_pool import run_in_processes

        source = run_in_processes(point_result, all_points, jobs, timeout)
    else:
        source = ((position, point_result(point)) for position, point in enumerate(all_points))
    with contextlib.closing(source):
        for position, result in source:
            point = all_points[position]
            if isinstance(result, Lost):
                yield PointOutcome(point, error=result.reason, stall=result.stall)
            elif isinstance(result, tuple) and len(result) == 2:
                yield PointOutcome(point, row=result[0], error=result[1])
            else:  # a worker with another kvroof, say
                yield PointOutcome(point, error=f"unexpected result from a worker: "
                                               f"{short_repr(result)}")


@dataclass(frozen=True)
class SweepResult:
    """A sweep's rows (finished points, in point order) and its failed points (``point``, the
    grid values, ``error``)."""

    rows: list[dict[str, Any]]
    failed: list[dict[str, Any]]


def failed_row(outcome: PointOutcome) -> dict[str, Any]:
    """The row of ``failed.csv`` for a point without a result."""
    return {"point": outcome.point.index, **outcome.point.grid, "error": outcome.error}


Progress = Callable[[int, int], None]


def run_sweep(config: SweepConfig, *, jobs: int = 1, dask: str | None = None,
              progress: Progress | None = None, spec_paths: Sequence[str] = (),
              timeout: float | None = None) -> SweepResult:
    """Run every point of ``config`` (checked first: :func:`check_points`); a point that fails
    is listed in :attr:`SweepResult.failed` and the others run on. ``dask``: a scheduler
    address; ``spec_paths``: folders of the user's own specs; ``timeout``: see
    :func:`iter_sweep`; ``progress(done, total)`` after each point."""
    check_run_options(jobs, timeout)
    all_points = points(config, spec_paths)
    check_points(all_points)
    if dask is None:
        check_trace(all_points)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    with contextlib.closing(iter_sweep(all_points, jobs=jobs, dask=dask,
                                       timeout=timeout)) as outcomes:
        for outcome in outcomes:
            if outcome.row is not None:
                rows.append(outcome.row)
            else:
                failed.append(failed_row(outcome))
            if progress is not None:
                progress(len(rows) + len(failed), len(all_points))
    rows.sort(key=lambda r: int(r["point"]))
    failed.sort(key=lambda r: int(r["point"]))
    return SweepResult(rows, failed)


def grid_columns(config: SweepConfig) -> list[str]:
    """The grid's keys (the columns that tell rows apart)."""
    return list(config.grid)


def summary_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with the most-read columns first (for printing)."""
    first = ("point", "requests", "ttft_s_p50", "ttft_s_p99", "tpot_s_p50", "throughput_rps",
             "tokens_per_iteration", "power_mean_w")
    return {k: row[k] for k in first if k in row}

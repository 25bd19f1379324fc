"""A sweep's configuration and its grid points: the YAML file read as untrusted (a size cap, no
key written twice), its sections, and the points its ``grid`` crosses (:mod:`kvroof.simulate.sweep`
runs them)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvroof.cost.deployment import Deployment
from kvroof.errors import KvroofError, SpecError
from kvroof.simulate.settings import MAX_REPLICAS, SimSettings
from kvroof.units import Kind, UnitError, parse_quantity

__all__ = ["ARRIVAL_KEYS", "DEPLOYMENT_KEYS", "MAX_CONFIG_BYTES", "MAX_POINTS", "SETTING_KEYS",
           "SweepConfig", "SweepPoint", "load_sweep_config", "points", "setting_value"]

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


def setting_value(key: str, value: Any) -> Any:
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

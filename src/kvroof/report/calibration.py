"""Calibration on a `kvroof measure` output folder, read and fitted once per (file, system).

Both the config check (which fits the measurements before any figure is drawn, so that a bad
file is an error naming the config key) and the report's measurement section
(:mod:`kvroof.report.measured`) use this one cached fit. It takes a folder and a system name,
not a :class:`~kvroof.report.config.ReportConfig`, so that the config module can call it
without importing the section that tabulates it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kvroof.analysis.calibration import CalibrationResult, calibrate
from kvroof.measure.results import Results, read_results
from kvroof.specs.registry import Registry

__all__ = ["calibrate_folder"]


def calibrate_folder(folder: Path, system_name: str,
                     registry: Registry) -> tuple[CalibrationResult, Results]:
    """Calibrate on ``folder/prefill.csv`` for the system ``system_name`` (cached)."""
    return _calibrate(str(folder / "prefill.csv"), system_name, registry)


@lru_cache(maxsize=4)
def _calibrate(path: str, system_name: str,
               registry: Registry) -> tuple[CalibrationResult, Results]:
    system = registry.system(system_name)
    results = read_results(path)
    result = calibrate(results, system, registry.accelerator(system.accelerator),
                       registry.link(system.host_link))
    return result, results

"""The report's measurement section: calibrate on `kvroof measure` results and tabulate."""

from __future__ import annotations

import math

from kvroof.analysis.calibration import CalibrationResult
from kvroof.measure.results import Results
from kvroof.report.calibration import calibrate_folder
from kvroof.report.config import ReportConfig
from kvroof.report.tables import Table
from kvroof.specs.registry import Registry

__all__ = ["calibrate_measurements", "calibration_table"]


def calibrate_measurements(config: ReportConfig,
                           registry: Registry) -> tuple[CalibrationResult, Results]:
    """Calibrate on ``config.measurements/prefill.csv`` for ``config.measured_system``."""
    assert config.measurements is not None and config.measured_system is not None
    return calibrate_folder(config.measurements, config.measured_system, registry)


def calibration_table(result: CalibrationResult, results: Results) -> Table:
    """Fitted parameters, prediction errors and measured vs predicted kappa_crit."""
    fitted = result.calibration
    rows = [
        ["compute efficiency", f"{fitted.compute_efficiency_max:.4g} x T / (T + "
                               f"{fitted.compute_half_tokens:.4g})"],
        ["link bandwidth per GPU", f"{fitted.link_bandwidth / 1e9:.4g} GB/s"],
        ["latency per copy", f"{fitted.link_latency * 1e6:.4g} us"],
        ["overlap efficiency", "not fitted" if fitted.overlap_efficiency is None
         else f"{fitted.overlap_efficiency:.3g}"],
    ]
    rows += [[f"{e.quantity} error", f"MAPE {100 * e.mape:.1f}%, worst {100 * e.worst:.1f}% "
                                     f"(CSV line {e.worst_row + 2})"] for e in result.errors]

    def shown(value: float | None) -> str:
        if value is None:
            return "-"
        return "never" if math.isinf(value) else f"{value:.3g}"

    rows += [[f"kappa_crit at T = {k.new_tokens}",
              f"measured {shown(k.measured)} ({k.measured_status}), predicted "
              f"{shown(k.predicted)}"] for k in result.kappa]
    return Table("calibration", f"Calibration on {results.path}", ["quantity", "value"], rows,
                 result.notes)

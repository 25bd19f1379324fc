"""What one GPU's compute resolves to from a deployment's settings: its peak FLOP/s for
``compute_dtype`` (or the ``compute`` override), the compute efficiency (the setting, else the
system's calibrated curve ``max x T / (T + half)``, else the accelerator's published achievable
matmul throughput over its peak, else 1) and where it comes from in words, the sustained and the
paper's per-GPU compute, and whether compute is timed by the roofline or op by op from the
kernel tables (``compute_model``: under ``auto`` a ``compute`` override, a ``compute_efficiency``
or a system calibration keeps the roofline, which alone honours them; under ``kernels`` they are
refused).

:class:`~kvroof.cost.deployment_settings.DeploymentSettings` exposes each as a property that
calls the function here; the functions read only the settings in :class:`ComputeSettings`.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array
from kvroof.errors import KvroofError
from kvroof.specs.base import DTYPE_BYTES
from kvroof.specs.hardware import Accelerator, Calibration

__all__ = [
    "COMPUTE_MODELS",
    "ROOFLINE_OVERRIDE",
    "ComputeModel",
    "ComputeSettings",
    "check_compute_dtype",
    "check_compute_model",
    "compute_efficiency_at",
    "compute_efficiency_source",
    "default_compute_efficiency",
    "effective_compute",
    "paper_compute",
    "peak_compute",
    "roofline_setting",
    "uses_kernels",
]

ComputeModel = Literal["roofline", "kernels", "auto"]
COMPUTE_MODELS: tuple[ComputeModel, ...] = ("roofline", "kernels", "auto")


class ComputeSettings(Protocol):
    """The settings a GPU's compute figures are resolved from (a
    :class:`~kvroof.cost.deployment_settings.DeploymentSettings` has them all)."""

    @property
    def accelerator(self) -> Accelerator: ...
    @property
    def compute(self) -> ArrayLike | None: ...
    @property
    def compute_dtype(self) -> str: ...
    @property
    def compute_efficiency(self) -> ArrayLike | None: ...
    @property
    def compute_model(self) -> ComputeModel: ...
    @property
    def calibration(self) -> Calibration | None: ...


def check_compute_dtype(settings: ComputeSettings) -> None:
    """Fail on an unknown ``compute_dtype``, or one the accelerator publishes no peak for
    without a ``compute`` override."""
    if settings.compute_dtype not in DTYPE_BYTES:
        raise KvroofError(f"compute_dtype: unknown dtype {settings.compute_dtype!r}")
    accelerator = settings.accelerator
    if settings.compute is None and settings.compute_dtype not in accelerator.peak_compute:
        known = ", ".join(accelerator.peak_compute)
        raise KvroofError(
            f"compute_dtype: {accelerator.name} has no published peak for "
            f"{settings.compute_dtype} (it has {known}); give compute explicitly"
        )


ROOFLINE_OVERRIDE = "a compute override/calibration was given"
"""Why ``auto`` chose the roofline on an accelerator with kernel tables
(:func:`roofline_setting`)."""


def roofline_setting(settings: ComputeSettings) -> str | None:
    """The setting that only the roofline can honour, or None: ``compute`` (a peak override),
    ``compute_efficiency`` (an explicit efficiency) or ``system`` (its calibration fits the
    roofline's efficiency). The kernel tables carry their own measured times, so none of these
    can apply to them: ``auto`` falls back to the roofline, ``kernels`` refuses them."""
    if settings.compute is not None:
        return "compute"
    if settings.compute_efficiency is not None:
        return "compute_efficiency"
    if settings.calibration is not None:
        return "system"
    return None


def check_compute_model(settings: ComputeSettings) -> None:
    """Refuse, under ``compute_model`` kernels, a setting only the roofline honours (one line
    naming it)."""
    if settings.compute_model != "kernels":
        return
    name = roofline_setting(settings)
    if name is None:
        return
    what = {"compute": "a peak compute override",
            "compute_efficiency": "an explicit compute efficiency",
            "system": "the system's calibration (it fits the roofline's efficiency)"}[name]
    raise KvroofError(f"{name}: {what} applies to the roofline; compute_model kernels times "
                      "each op from the measured kernel tables, which would ignore it (use "
                      "compute_model auto or roofline)")


def uses_kernels(settings: ComputeSettings) -> bool:
    """Whether compute is timed op by op from the kernel tables: ``compute_model`` kernels, or
    auto on an accelerator with tables and without a setting only the roofline honours
    (:func:`roofline_setting`; :mod:`kvroof.cost.kernel_time`)."""
    if settings.compute_model == "roofline":
        return False
    if settings.compute_model == "kernels":
        return True
    if roofline_setting(settings) is not None:
        return False
    from kvroof.kernels import covered

    return bool(covered(settings.accelerator))


def default_compute_efficiency(settings: ComputeSettings) -> float:
    """Efficiency without a setting or calibration: the accelerator's published maximum
    achievable matmul throughput over its peak for ``compute_dtype`` (1 with a ``compute``
    override, or when nothing is published)."""
    if settings.compute is not None:
        return 1.0
    accelerator, dtype = settings.accelerator, settings.compute_dtype
    achieved = accelerator.achievable_compute.get(dtype)  # type: ignore[call-overload]
    peak = accelerator.peak_compute.get(dtype)  # type: ignore[call-overload]
    if achieved is None or peak is None:
        return 1.0
    return float(achieved / peak)


def compute_efficiency_source(settings: ComputeSettings) -> str:
    """Where the compute efficiency comes from, in words (shown in every output)."""
    if settings.compute_efficiency is not None:
        return "set"
    if settings.calibration is not None:
        return "calibrated curve"
    if settings.compute is not None:
        return "peak (compute override)"
    if settings.compute_dtype in settings.accelerator.achievable_compute:
        return "achievable matmul (published)"
    return "peak (no published achievable figure)"


def compute_efficiency_at(settings: ComputeSettings, new_tokens: ArrayLike) -> Any:
    """Compute efficiency for a prefill of ``new_tokens``: the ``compute_efficiency`` setting,
    else the calibrated ``max x T / (T + half)``, else the default
    (:func:`default_compute_efficiency`)."""
    if settings.compute_efficiency is not None:
        return scalar_or_array(np.asarray(settings.compute_efficiency, dtype=np.float64))
    calibration = settings.calibration
    if calibration is None:
        return default_compute_efficiency(settings)
    t = np.asarray(new_tokens, dtype=np.float64)
    half = calibration.compute_half_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = np.where(t > 0, t / np.where(t + half > 0, t + half, 1.0), 1.0)
    return scalar_or_array(calibration.compute_efficiency_max * curve)


def peak_compute(settings: ComputeSettings) -> Any:
    """Peak FLOP/s of one GPU for ``compute_dtype`` (or the ``compute`` override)."""
    if settings.compute is not None:
        return scalar_or_array(np.asarray(settings.compute, dtype=np.float64))
    return settings.accelerator.peak_compute[settings.compute_dtype]  # type: ignore[index]


def effective_compute(settings: ComputeSettings) -> Any:
    """FLOP/s one GPU sustains on large prefills: peak x compute efficiency (for a calibrated
    curve, its maximum; :func:`compute_efficiency_at` gives it at a given T)."""
    if settings.compute_efficiency is None and settings.calibration is not None:
        factor: Any = settings.calibration.compute_efficiency_max
    else:
        factor = compute_efficiency_at(settings, np.inf)
    return scalar_or_array(
        np.asarray(peak_compute(settings), dtype=np.float64)
        * np.asarray(factor, dtype=np.float64)
    )


def paper_compute(settings: ComputeSettings) -> Any:
    """Per-GPU compute as the paper's formula takes it: the peak, times a compute efficiency
    only where one is set or calibrated (never the achievable-matmul default)."""
    if settings.compute_efficiency is None and settings.calibration is None:
        return peak_compute(settings)
    return effective_compute(settings)

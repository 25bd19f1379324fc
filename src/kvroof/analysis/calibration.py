"""Fit the cost model's free parameters to measured prefill rows and report the error.

Input: the rows ``kvroof measure prefill`` writes (T, K, KV bytes, FLOPs, compute, transfer,
serial and overlapped seconds) and the system they were measured on. Fitted:

- the GPU roofline: a row whose measured compute time the HBM reads explain (``HBM bytes /
  (HBM peak x HBM efficiency)`` at least as long) is HBM-bound and fits the HBM efficiency (the
  median over those rows); the others are FLOP-bound and fit the compute efficiency against T,
  ``eff(T) = eff_max x T / (T + T_half)`` of the accelerator's dense peak, by weighted linear
  least squares on ``1 / achieved = a + b / T`` (``a = 1 / (peak eff_max)``, ``T_half = b / a``;
  relative weights). The two fits and the split are iterated to a fixed point. When the
  efficiency does not grow with T (``b < 0``) it is fitted as a constant and the result says so;
- link bandwidth and per-copy latency: ``t_x = bytes / BW + latency x copies`` (copies = one per
  layer for keys and one for values, as the benchmark loads them), weighted least squares; a
  negative latency is refitted as zero and said;
- overlap efficiency ``eta`` (share of the shorter side that layer-wise overlap hides), from
  the overlapped runs when there are any (none on a CPU).

The errors are those of the library's own predictions (:func:`kvroof.ttft` on a deployment of
the benchmark's synthetic stack on the calibrated system), per quantity: mean absolute
percentage error and the worst row. The measured kappa_crit per T (where P_OH crosses 1) is
given next to the predicted one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.deployment import Deployment, Granularity
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.timing import compute_breakdown, ttft
from kvroof.errors import KvroofError, clip
from kvroof.measure.link import fit_latency_bandwidth
from kvroof.measure.prefill import LayerShape, measured_kappa_crit
from kvroof.measure.results import PrefillRow, Results, ResultsError
from kvroof.specs.base import check_spec_name
from kvroof.specs.hardware import Accelerator, Calibration, Link, System

__all__ = [
    "CalibrationResult",
    "KappaComparison",
    "QuantityError",
    "calibrate",
    "calibrated_label",
    "fit_compute_efficiency",
    "fit_link",
    "fit_overlap_efficiency",
    "fit_roofline",
    "hbm_bytes_of_stack",
    "stack_deployment",
]


@dataclass(frozen=True)
class QuantityError:
    """How well the calibrated model predicts one measured quantity."""

    quantity: str
    rows: int
    mape: float
    worst: float
    worst_row: int
    """0-based index into the results' rows (CSV line = index + 2)."""


@dataclass(frozen=True)
class KappaComparison:
    """Measured and predicted kappa_crit at one T (``inf`` where P_OH never reaches 1)."""

    new_tokens: int
    measured: float | None
    measured_status: str
    predicted: float


@dataclass(frozen=True)
class CalibrationResult:
    """The fitted parameters, the calibrated system, and the prediction errors."""

    calibration: Calibration
    system: System
    stack: Deployment
    """The benchmark's synthetic stack on the calibrated system (what the errors come from)."""
    peak_compute: float
    errors: list[QuantityError]
    kappa: list[KappaComparison]
    notes: list[str] = field(default_factory=list)


def _lstsq(design: np.ndarray[Any, Any], target: np.ndarray[Any, Any],
           weights: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    solution, *_ = np.linalg.lstsq(design * weights[:, None], target * weights, rcond=None)
    return np.asarray(solution, dtype=np.float64)


def fit_compute_efficiency(
    new_tokens: ArrayLike, achieved: ArrayLike, peak: float
) -> tuple[float, float, str]:
    """(eff_max, T_half, note) of ``eff(T) = eff_max x T / (T + T_half)``. Rows of a single T
    say nothing about how the efficiency grows with T: the efficiency is then fitted as a
    constant (T_half = 0) and the note says so."""
    t = np.asarray(new_tokens, dtype=np.float64)
    rate = np.asarray(achieved, dtype=np.float64)
    y = 1.0 / rate

    def constant() -> float:
        return float(np.sum(y * rate**2) / np.sum(rate**2))  # relative least squares

    distinct = np.unique(t)
    if distinct.size < 2:
        note = (f"every row has T = {distinct[0]:g}: the growth of compute efficiency with T "
                "cannot be fitted; fitted as a constant (T_half = 0); measure several T to fit "
                "it")
        return 1.0 / (constant() * peak), 0.0, note
    design = np.column_stack([np.ones_like(t), 1.0 / t])
    a, b = _lstsq(design, y, rate)  # weights 1/y: relative error
    note = ""
    if b < 0 or a <= 0:
        a, b = constant(), 0.0
        note = ("compute efficiency does not grow with T in these rows; fitted as a constant "
                "(T_half = 0)")
    return 1.0 / (a * peak), b / a, note


def hbm_bytes_of_stack(shape: LayerShape, layers: int, system: System, accelerator: Accelerator,
                       link: Link, new_tokens: ArrayLike, cached_tokens: ArrayLike) -> Any:
    """HBM bytes the benchmark's stack reads per prefill (weights and KV), from the cost model."""
    dep = stack_deployment(shape, layers, system, accelerator, link)
    return np.asarray(compute_breakdown(dep, new_tokens, cached_tokens).hbm_bytes)


def fit_roofline(
    new_tokens: ArrayLike, flops: ArrayLike, seconds: ArrayLike, hbm_bytes: ArrayLike,
    peak: float, hbm_peak: float, hbm_efficiency: float, rounds: int = 20, margin: float = 0.05,
) -> tuple[float, float, float | None, str]:
    """(eff_max, T_half, HBM efficiency or None, note): split the rows into HBM-bound (the HBM
    reads at the current HBM efficiency take at least the measured time less ``margin``, which
    keeps noisy rows near the ridge out of the compute fit) and FLOP-bound, fit the HBM
    efficiency on the first and the compute efficiency curve on the second, repeat."""
    t = np.asarray(new_tokens, dtype=np.float64)
    f = np.asarray(flops, dtype=np.float64)
    s = np.asarray(seconds, dtype=np.float64)
    b = np.asarray(hbm_bytes, dtype=np.float64)
    eta = hbm_efficiency
    fitted_eta: float | None = None
    notes: list[str] = []
    flop_bound = np.ones(t.shape, dtype=bool)
    for _ in range(rounds):
        flop_bound = s > b / (hbm_peak * eta) * (1 + margin)
        if not (~flop_bound).any():
            break
        implied = b[~flop_bound] / (hbm_peak * s[~flop_bound])
        new_eta = float(np.median(implied))
        if new_eta > 1:
            notes.append(f"the HBM-bound rows imply {new_eta:.2f}x the HBM peak; written as 1")
            new_eta = 1.0
        fitted_eta = new_eta
        if new_eta == eta:
            break
        eta = new_eta
    if not flop_bound.any():
        raise KvroofError("every row is limited by HBM reads, so compute efficiency cannot be "
                          "fitted: measure larger T")
    eff_max, half, note = fit_compute_efficiency(t[flop_bound], f[flop_bound] / s[flop_bound],
                                                 peak)
    if note:
        notes.append(note)
    if fitted_eta is not None:
        notes.append(f"{int((~flop_bound).sum())} of {t.size} rows are HBM-bound; HBM "
                     f"efficiency fitted on them")
    return eff_max, half, fitted_eta, "; ".join(notes)


def fit_link(size: ArrayLike, copies: int, seconds: ArrayLike) -> tuple[float, float, str]:
    """(bandwidth, latency per copy, note) of ``t = bytes / bandwidth + latency x copies`` for
    loads of ``copies`` copies each: :func:`kvroof.measure.link.fit_latency_bandwidth` (relative
    least squares), its intercept shared among the copies."""
    fit = fit_latency_bandwidth(size, seconds)
    if fit.latency_s >= 0 and math.isfinite(fit.bandwidth):
        return fit.bandwidth, fit.latency_s / copies, ""
    b = np.asarray(size, dtype=np.float64)
    s = np.asarray(seconds, dtype=np.float64)
    inverse_bw = float(np.sum(b / s) / np.sum(b * b / s**2))  # relative LS with no intercept
    return 1.0 / inverse_bw, 0.0, "the fitted per-copy latency was negative; refitted with 0"


def fit_overlap_efficiency(
    transfer: ArrayLike, compute: ArrayLike, overlapped: ArrayLike, layers: ArrayLike,
) -> tuple[float, str]:
    """``eta`` with ``overlapped = (x + c)/L + (L-1)/L x (max + (1 - eta) min)``."""
    x = np.asarray(transfer, dtype=np.float64)
    c = np.asarray(compute, dtype=np.float64)
    o = np.asarray(overlapped, dtype=np.float64)
    n = np.asarray(layers, dtype=np.float64)
    base = (x + c) / n + (n - 1) / n * np.maximum(x, c)
    shorter = (n - 1) / n * np.minimum(x, c)
    weight = float(np.sum(shorter**2 / o**2))
    if weight == 0.0:  # one layer: nothing overlaps
        raise KvroofError("overlap fit: with one layer nothing can overlap; measure a stack of "
                          "two layers or more")
    hidden_not = float(np.sum((o - base) * shorter / o**2) / weight)
    eta = 1.0 - hidden_not
    if 0.0 <= eta <= 1.0:
        return eta, ""
    bounded = min(max(eta, 0.0), 1.0)
    return bounded, f"the fitted overlap efficiency {eta:.3f} lies outside [0, 1]; written as " \
                    f"{bounded:g}"


def stack_deployment(shape: LayerShape, layers: int, system: System, accelerator: Accelerator,
                     link: Link) -> Deployment:
    """The benchmark's synthetic stack on ``system`` as the cost model sees it: one GPU
    loading, the whole request as one block with one copy per layer for keys and values.
    Compute is the roofline (``compute_model`` pinned): calibration fits the roofline's
    efficiency, which the kernel tables would ignore."""
    return Deployment(
        model=shape.as_model(layers), accelerator=accelerator, link=link, system=system,
        gpus_loading=1, granularity=Granularity(None, "per-layer-kv"), write_back=False,
        compute_model="roofline",
    )


def _error(name: str, measured: np.ndarray[Any, Any], predicted: np.ndarray[Any, Any],
           index: np.ndarray[Any, Any]) -> QuantityError:
    relative = np.abs(predicted - measured) / measured
    worst = int(np.argmax(relative))
    return QuantityError(name, int(measured.size), float(np.mean(relative)),
                         float(relative[worst]), int(index[worst]))


def calibrated_label(system_label: str, machine: object) -> str:
    """The display name of a system calibrated on the machine a results header describes:
    where the rows were measured comes first, since a CPU run or another GPU calibrated
    against a system's specs is not that system."""
    info = machine if isinstance(machine, dict) else {}
    device = info.get("device")
    name = info.get("device_name")
    if not isinstance(name, str) or not name.strip():
        return f"{system_label} (calibrated)"
    where = clip(name.strip(), 60) + (" (a CPU run)" if device == "cpu" else "")
    return f"calibrated on {where}, against {system_label}"


def calibrate(
    results: Results,
    system: System,
    accelerator: Accelerator,
    link: Link,
    name: str | None = None,
) -> CalibrationResult:
    """Fit ``results`` (prefill rows with their JSON header) measured on ``system``; the
    calibrated system is called ``name`` (default ``<system>-calibrated``), which must be a
    valid spec name (:data:`kvroof.specs.base.NAME_RULE`). A fit that the rows cannot support
    (one transfer size, say) is an error naming the results file."""
    if name is not None:
        try:
            check_spec_name(name)
        except ValueError as error:
            raise KvroofError(f"name: {error}") from None
    rows = results.typed(PrefillRow)
    header = results.header or {}
    shape_data = (header.get("summary") or {}).get("shape")
    if not rows:
        raise ResultsError(f"{results.path}: no rows to calibrate on")
    if not isinstance(shape_data, dict):
        raise ResultsError(f"{results.path}: calibration needs the JSON header written beside "
                           "the CSV (it holds the layer shape)")
    try:
        shape = LayerShape(**{k: int(v) for k, v in shape_data.items()})
    except (TypeError, ValueError):
        raise ResultsError(f"{results.path.with_suffix('.json')}: summary.shape is not a layer "
                           "shape") from None
    layer_counts = {row.layers_run for row in rows}
    if len(layer_counts) != 1:
        raise ResultsError(f"{results.path}: rows mix stacks of {sorted(layer_counts)} layers")
    layers = layer_counts.pop()
    peak = accelerator.peak_compute.get("bf16")
    if peak is None:
        raise KvroofError(f"{accelerator.name} has no bf16 peak to measure efficiency against")
    loaded = [i for i, r in enumerate(rows) if r.K > 0]
    if len(loaded) < 2:
        raise ResultsError(f"{results.path}: needs at least two rows with K > 0 to fit the link")
    t = np.array([r.T for r in rows], dtype=np.float64)
    k = np.array([r.K for r in rows], dtype=np.float64)
    compute_s = np.array([r.compute_s for r in rows])
    transfer_s = np.array([r.transfer_s for r in rows])
    flops = np.array([r.flops for r in rows])
    try:
        eff_max, half, hbm_efficiency, compute_note = fit_roofline(
            t, flops, compute_s,
            hbm_bytes_of_stack(shape, layers, system, accelerator, link, t, k),
            peak, accelerator.hbm_bandwidth,
            float(stack_deployment(shape, layers, system, accelerator, link)
                  .resolved_hbm_efficiency))
        bandwidth, latency, link_note = fit_link(
            [rows[i].kv_bytes for i in loaded], 2 * layers, transfer_s[loaded])
        overlapped = [i for i, r in enumerate(rows) if r.overlap_s is not None]
        eta: float | None = None
        overlap_note = ("no overlapped runs (not measurable on a CPU): overlap efficiency not "
                        "fitted")
        if overlapped:
            eta, overlap_note = fit_overlap_efficiency(
                transfer_s[overlapped], compute_s[overlapped],
                [rows[i].overlap_s or 0.0 for i in overlapped], [layers] * len(overlapped))
    except KvroofError as error:
        raise ResultsError(f"{results.path}: {error}") from None
    fitted = {"compute efficiency": eff_max, "T_half": half, "HBM efficiency": hbm_efficiency,
              "link bandwidth": bandwidth, "latency": latency, "overlap efficiency": eta}
    bad = [k for k, v in fitted.items() if v is not None and not math.isfinite(v)]
    if bad:
        raise ResultsError(f"{results.path}: the rows do not determine {', '.join(bad)} (the "
                           "fit is degenerate); measure more varied T and K")
    if eff_max > 1:
        raise KvroofError(
            f"{results.path}: measured compute reaches {eff_max:.2f}x the bf16 dense peak of "
            f"{accelerator.name}; the results come from other hardware than --system says"
        )
    calibration = Calibration(
        compute_efficiency_max=eff_max, compute_half_tokens=half,
        hbm_efficiency=hbm_efficiency, link_bandwidth=bandwidth,
        link_latency=latency, overlap_efficiency=eta, results=str(results.path),
        rows=len(rows), fitted_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
    )
    calibrated = system.model_copy(update={
        "name": name or f"{system.name}-calibrated",
        "display_name": calibrated_label(system.label, header.get("machine")),
        "aliases": (),
        "calibration": calibration,
    })
    dep = stack_deployment(shape, layers, calibrated, accelerator, link)
    index = np.arange(len(rows))
    serial = ttft(dep, t, k, "serial")
    errors = [
        _error("compute", compute_s, np.asarray(serial.compute), index),
        _error("transfer", transfer_s[loaded], np.asarray(serial.transfer)[loaded],
               index[loaded]),
        _error("serial TTFT", np.array([r.serial_s for r in rows]), np.asarray(serial.ttft),
               index),
    ]
    if overlapped:
        layerwise = np.asarray(ttft(dep, t, k, "layerwise").ttft)
        errors.append(_error("overlapped TTFT",
                             np.array([rows[i].overlap_s or math.nan for i in overlapped]),
                             layerwise[overlapped], index[overlapped]))
    calibration = calibration.model_copy(update={
        "errors": {e.quantity: round(e.mape, 6) for e in errors}})
    calibrated = calibrated.model_copy(update={"calibration": calibration})
    dep = stack_deployment(shape, layers, calibrated, accelerator, link)
    kappa = []
    for tokens in sorted({r.T for r in rows}):
        points = [r for r in rows if tokens == r.T]
        measured = measured_kappa_crit(tokens, [r.K for r in points], [r.p_oh for r in points])
        predicted = float(kappa_crit(dep, tokens).kappa_crit)
        kappa.append(KappaComparison(tokens, measured.kappa_crit, measured.status, predicted))
    notes = [n for n in (compute_note, link_note, overlap_note) if n]
    return CalibrationResult(calibration, calibrated, dep, peak, errors, kappa, notes)


def calibrated_system_data(result: CalibrationResult, source: Path | str) -> dict[str, Any]:
    """The calibrated system as spec-file data (units as text, sources with provenance)."""
    from kvroof.specs.fields import spec_file_data

    data = spec_file_data(result.system)
    sources = dict(result.system.sources)
    sources["calibration"] = (
        f"kvroof calibrate on {source} ({result.calibration.rows} rows) at "
        f"{result.calibration.fitted_at}; errors (MAPE): "
        + ", ".join(f"{k} {100 * v:.1f}%" for k, v in result.calibration.errors.items())
    )
    data["sources"] = sources
    return data

"""Predict every case three ways and summarize the errors per quantity.

- ``before``: kvroof's defaults, no engine profile (what every command gives without
  ``--engine``);
- ``after``: each case's engine profile as shipped (``engine_specs/``; its copy-size parameters
  fitted on the ``in_fit`` subset);
- ``held_out``: as ``after``, but the copy-size parameters are refitted without the case's own
  source (leave one source out), so no case is predicted with a fit that saw it.

Model-level cases are predicted with the ``compute_model`` asked for (``auto`` by default: the
measured kernel tables op by op where they cover the accelerator; or ``roofline``, ``kernels``)
and the ``ttft_clock`` (``kernel`` by default, or ``client``: the engine profiles' serving
overheads added; a case measured by a client says so and is predicted on the client clock).
Each case says whether it shares its GPU and engine with the kernel tables (``kernel_tables``).

The ratio of a case is predicted over measured. Per quantity, over the cases in the statistics
(A or B rating, not excluded, predictable): the median ratio, the worst ratio (the one farthest
from 1 by factor, either way) and the mean absolute percentage error, ``MAPE = mean(|ratio - 1|)``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from kvroof.cost.checks import one_of
from kvroof.cost.deployment_settings import COMPUTE_MODELS, TTFT_CLOCKS
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.cases import QUANTITIES, Case, CaseFile, check_names, load_cases
from kvroof.validation.fit import (
    CopyFit,
    as_params,
    fit_copy_methods,
    fit_points,
    leave_one_source_out,
)
from kvroof.validation.predict import Prediction, kernel_tables_overlap, predict_case

__all__ = ["MODES", "CaseResult", "Mode", "QuantityStats", "ValidationResult", "validate"]

Mode = Literal["before", "after", "held_out"]
MODES: Final[tuple[Mode, ...]] = ("before", "after", "held_out")
MODE_TEXT: Final[dict[str, str]] = {
    "before": "before engine profiles (kvroof's defaults)",
    "after": "with each source's engine profile",
    "held_out": "engine profiles refitted without the case's source (held out)",
}


@dataclass(frozen=True)
class CaseResult:
    """One case and its three predictions."""

    file: CaseFile
    index: int
    case: Case
    before: Prediction
    after: Prediction
    held_out: Prediction

    def prediction(self, mode: Mode) -> Prediction:
        """The prediction in ``mode``."""
        return {"before": self.before, "after": self.after, "held_out": self.held_out}[mode]

    def ratio(self, mode: Mode) -> float | None:
        """Predicted over measured in ``mode`` (``None`` when not predicted)."""
        value = self.prediction(mode).value
        return None if value is None else value / self.case.measured

    @property
    def excluded_reason(self) -> str:
        """Why the statistics leave this case out ("" when they count it)."""
        if self.case.rating == "C":
            return "rated C (qualitative only)"
        if self.case.excluded:
            return self.case.excluded
        problems = [self.prediction(mode).problem for mode in MODES]
        return next((p for p in problems if p), "")

    @property
    def in_statistics(self) -> bool:
        """Whether the error statistics count this case."""
        return not self.excluded_reason


@dataclass(frozen=True)
class QuantityStats:
    """The error of one quantity in one mode."""

    quantity: str
    mode: Mode
    cases: int
    median_ratio: float
    worst_ratio: float
    worst_case: str
    mape: float


def _factor(ratio: float) -> float:
    return max(ratio, 1.0 / ratio)


def _stats(results: Sequence[CaseResult], quantity: str, mode: Mode) -> QuantityStats:
    chosen = [(r.case.id, r.ratio(mode)) for r in results
              if r.case.quantity == quantity and r.in_statistics]
    ratios = [(case_id, ratio) for case_id, ratio in chosen if ratio is not None]
    if not ratios:
        return QuantityStats(quantity, mode, 0, math.nan, math.nan, "", math.nan)
    worst_id, worst = max(ratios, key=lambda item: _factor(item[1]))
    values = [ratio for _, ratio in ratios]
    return QuantityStats(quantity, mode, len(values), statistics.median(values), worst,
                         worst_id, statistics.fmean(abs(v - 1.0) for v in values))


@dataclass(frozen=True)
class ValidationResult:
    """Every case's predictions, the copy-size fits and the statistics."""

    files: tuple[CaseFile, ...]
    results: tuple[CaseResult, ...]
    fits: dict[str, CopyFit]
    held_out_fits: dict[str, dict[str, CopyFit]]
    stats: tuple[QuantityStats, ...]
    compute_model: str = "auto"
    ttft_clock: str = "kernel"
    kernel_tables: dict[str, str] = field(default_factory=dict)
    """Per case id: whether it shares its GPU and engine with the kernel tables."""

    @property
    def default_settings(self) -> bool:
        """Whether the model-level cases used the defaults (auto, kernel clock); the JSON
        adds ``compute_model``, ``ttft_clock`` and each case's ``kernel_tables`` otherwise."""
        return self.compute_model == "auto" and self.ttft_clock == "kernel"

    def held_out_fit_error(self, method: str) -> float:
        """The largest factor error over ``method``'s fitted points when each is predicted by
        the fit without its own source (0 without points)."""
        errors = []
        for point in self.fits[method].points:
            refit = self.held_out_fits[point.source][method]
            ratio = refit.predicted_seconds(point) / point.seconds
            errors.append(max(ratio, 1.0 / ratio) - 1.0)
        return max(errors, default=0.0)

    def result(self, case_id: str) -> CaseResult:
        """The result of the case called ``case_id``."""
        for item in self.results:
            if item.case.id == case_id:
                return item
        from kvroof.errors import KvroofError, short_repr

        known = [item.case.id for item in self.results]
        import difflib

        close = difflib.get_close_matches(case_id, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KvroofError(f"--case: no case {short_repr(case_id)}{hint} (`kvroof validate` "
                          "lists them)")

    def stats_for(self, mode: Mode) -> list[QuantityStats]:
        """The statistics of ``mode``, one per quantity that has cases."""
        return [s for s in self.stats if s.mode == mode]

    @property
    def quantities(self) -> list[str]:
        """The quantities that have cases, in the fixed order of :data:`QUANTITIES`."""
        present = {r.case.quantity for r in self.results}
        return [q for q in QUANTITIES if q in present]

    def worst(self, mode: Mode = "after", count: int = 3) -> list[CaseResult]:
        """The ``count`` cases in the statistics farthest from their measurement."""
        ranked = [r for r in self.results if r.in_statistics and r.ratio(mode) is not None]
        ranked.sort(key=lambda r: _factor(r.ratio(mode) or 1.0), reverse=True)
        return ranked[:count]

    def as_dict(self) -> dict[str, Any]:
        """The documented JSON form (SI units; see docs/validation.md)."""
        cases = []
        for r in self.results:
            item: dict[str, Any] = {
                "id": r.case.id,
                "source": r.file.name,
                "url": r.file.source.url,
                "where": r.case.where,
                "quantity": r.case.quantity,
                "engine": r.case.engine,
                "rating": r.case.rating,
                "measured": r.case.measured,
                "in_fit": r.case.in_fit,
                "in_statistics": r.in_statistics,
                "excluded_reason": r.excluded_reason,
            }
            if not self.default_settings:
                item["kernel_tables"] = self.kernel_tables.get(r.case.id, "")
            for mode in MODES:
                item[mode] = r.prediction(mode).value
                item[f"ratio_{mode}"] = r.ratio(mode)
            cases.append(item)
        settings = {} if self.default_settings else {
            "compute_model": self.compute_model, "ttft_clock": self.ttft_clock}
        return {
            **settings,
            "cases": cases,
            "statistics": [
                {"quantity": s.quantity, "mode": s.mode, "cases": s.cases,
                 "median_ratio": s.median_ratio, "worst_ratio": s.worst_ratio,
                 "worst_case": s.worst_case, "mape": s.mape}
                for s in self.stats
            ],
            "fits": {method: {**_fit_dict(fit),
                              "held_out_max_error": self.held_out_fit_error(method)}
                     for method, fit in self.fits.items()},
            "held_out_fits": {source: {m: _fit_dict(f) for m, f in fits.items()}
                              for source, fits in self.held_out_fits.items()},
            "left_out": [
                {"source": f.name, "what": item.what, "where": item.where, "value": item.value,
                 "reason": item.reason}
                for f in self.files for item in f.left_out
            ],
            "kappa_crit": "no case: no public text read for this validation states a measured "
                          "kappa_crit" if not any(r.case.quantity == "kappa_crit"
                                                  for r in self.results) else "",
        }


def _fit_dict(fit: CopyFit) -> dict[str, Any]:
    return {
        "overhead_s": fit.overhead,
        "overhead_fitted": fit.overhead_fitted,
        "share": fit.share,
        "share_fitted": fit.share_fitted,
        "cases": [p.case_id for p in fit.points],
        "sources": fit.sources,
        "max_error": fit.max_error,
        "rms_log_error": fit.rms_log_error,
    }


def validate(folders: Iterable[str | Path] | None = None,
             registry: Registry | None = None, *, compute_model: str = "auto",
             ttft_clock: str = "kernel") -> ValidationResult:
    """Load the cases (default: the built-in ones), predict each before and after engine
    profiles and held out, and summarize (module docstring). ``compute_model`` and
    ``ttft_clock`` are the deployment settings of the model-level cases."""
    one_of("compute_model", compute_model, COMPUTE_MODELS)
    one_of("ttft_clock", ttft_clock, TTFT_CLOCKS)
    reg = registry or default_registry()
    files = tuple(load_cases(folders))
    check_names(files, reg)
    points = fit_points(files, reg)
    fits = fit_copy_methods(points)
    held_out_fits = leave_one_source_out(points)
    results = []
    overlaps: dict[str, str] = {}
    for loaded in files:
        # a source outside the fit subset is held out by construction: its held-out prediction
        # is the one with the shipped profiles
        held = held_out_fits.get(loaded.name)
        refit = None if held is None else as_params(held)
        for index, case in enumerate(loaded.cases):
            origin = f"case: {loaded.path.name} cases[{index}]"
            after = predict_case(case, reg, origin=origin, compute_model=compute_model,
                                 ttft_clock=ttft_clock)
            results.append(CaseResult(
                loaded, index, case,
                before=predict_case(case, reg, engine_profiles=False, origin=origin,
                                    compute_model=compute_model, ttft_clock=ttft_clock),
                after=after,
                held_out=(predict_case(case, reg, refit=refit, origin=origin,
                                       compute_model=compute_model, ttft_clock=ttft_clock)
                          if refit is not None else after),
            ))
            overlap = kernel_tables_overlap(case, reg)
            if overlap:
                overlaps[case.id] = overlap
    quantities = [q for q in QUANTITIES if any(r.case.quantity == q for r in results)]
    stats = tuple(_stats(results, q, mode) for mode in MODES for q in quantities)
    return ValidationResult(files, tuple(results), fits, held_out_fits, stats, compute_model,
                            ttft_clock, overlaps)

"""The report's "How good is the model" section: the validation's error per quantity and every
case, from :func:`kvroof.validation.run.validate` (no number is computed here)."""

from __future__ import annotations

from kvroof.report.tables import Table
from kvroof.validation.predict import as_text
from kvroof.validation.run import MODES, ValidationResult

__all__ = ["validation_tables"]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def validation_tables(result: ValidationResult) -> list[Table]:
    """Two tables: the error per quantity (before, with engine profiles, held out) and every
    case's measurement and predictions."""
    rows = []
    for quantity in result.quantities:
        row = [quantity]
        for mode in MODES:
            stats = next(s for s in result.stats if s.quantity == quantity and s.mode == mode)
            row.append("-" if not stats.cases else
                       f"{stats.median_ratio:.3g} / {stats.worst_ratio:.3g} / "
                       f"{100 * stats.mape:.0f}%")
        row.insert(1, str(next(s.cases for s in result.stats if s.quantity == quantity)))
        rows.append(row)
    notes = [
        "Ratio = predicted / measured. Each cell: median / worst (farthest from 1, either way) / "
        "MAPE (mean |ratio - 1|), over the A- and B-rated cases that could be predicted.",
        "Before: kvroof's defaults (link peak, 2 us per copy, 256-token blocks per layer, "
        "write-back on, serial). With engine profiles: each source's engine (engine_specs/). "
        "Held out: the copy-size parameters refitted without the case's own source.",
    ]
    for method, fit in result.fits.items():
        notes.append(
            f"Copy-size fit, {method}: overhead {fit.overhead * 1e6:.3g} us"
            + ("" if fit.overhead_fitted else " (not fitted)")
            + f", share of the link {fit.share:.3g}" + ("" if fit.share_fitted else
                                                        " (not fitted)")
            + f"; {len(fit.points)} cases from {len(fit.sources)} sources, each within "
            f"{100 * fit.max_error:.0f}% (factor) of its measurement, "
            f"{100 * result.held_out_fit_error(method):.0f}% when refitted without its source.")
    worst = result.worst("after")
    if worst:
        notes.append("Worst with engine profiles: " + "; ".join(
            f"{w.case.id} ({_ratio(w.ratio('after'))})" for w in worst)
            + " (reasons in docs/validation.md).")
    if not any(r.case.quantity == "kappa_crit" for r in result.results):
        notes.append("No kappa_crit case: no public text read for this validation states a "
                     "measured kappa_crit.")
    summary = Table("validation", "How good is the model: error per quantity",
                    ["quantity", "cases", "before engine profiles", "with engine profiles",
                     "held out"], rows, notes)
    cases = []
    for item in result.results:
        cases.append([
            item.case.id + ("" if item.in_statistics else " *"),
            item.case.quantity,
            item.case.engine,
            as_text(item.case.measured, item.case.quantity),
            _ratio(item.ratio("before")),
            _ratio(item.ratio("after")),
            _ratio(item.ratio("held_out")),
        ])
    every = Table("validation_cases", "How good is the model: every case (ratio predicted / "
                  "measured)", ["case", "quantity", "engine", "measured", "before", "with engine",
                                "held out"], cases,
                  [f"{len(result.results)} cases from {len(result.files)} sources "
                   "(validation/); * = left out of the statistics; `kvroof validate --case ID` "
                   "explains one prediction."],
                  [(f"{f.source.title} ({len(f.cases)} cases)", f.source.url)
                   for f in result.files])
    return [summary, every]

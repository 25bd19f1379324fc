"""The report's figures: for each, its key (the file name), its title and a function that
draws it and writes its caption and its finding in one sentence (the alt text), from the
report's configuration, the registry and the validation results. The measured figures come
first when the report has measurements; the serving-simulation figures are added by
:mod:`kvroof.report.simulation`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from matplotlib.figure import Figure

from kvroof.analysis.regimes import regime_curves
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.memory_fit import fit_problem
from kvroof.cost.timing import ttft
from kvroof.report.config import ReportConfig
from kvroof.report.tables import kappa_cell, paper_input_kappa
from kvroof.specs.hardware import Accelerator
from kvroof.specs.registry import Registry
from kvroof.validation.run import ValidationResult

__all__ = ["FigureSpec", "Made", "figure_specs"]

Made = tuple[Figure, str, str]
"""A figure, its caption and its finding in one sentence (the alt text)."""
FigureSpec = tuple[str, str, Callable[[], Made]]


def _span(values: list[tuple[str, float]]) -> str:
    """"a (where) to b (where)" of labelled values (their lowest and highest)."""
    shown = [(w, v) for w, v in values if math.isfinite(v)]
    if not shown:
        return "never transfer-bound"
    low = min(shown, key=lambda item: item[1])
    high = max(shown, key=lambda item: item[1])
    if low == high:
        return f"{low[1]:.3g} ({low[0]})"
    return f"{low[1]:.3g} ({low[0]}) to {high[1]:.3g} ({high[0]})"


def figure_specs(config: ReportConfig, reg: Registry,
                  validation_result: ValidationResult) -> list[FigureSpec]:
    """(key, title, make) for each figure; make returns the figure, its caption and its
    finding in one sentence (the alt text)."""
    from kvroof.plot import (
        ceilings_figure,
        kappa_vs_t_figure,
        offload_roofline_figure,
        overhead_figure,
        ttft_breakdown_figure,
        what_if_figure,
    )
    from kvroof.plot.roofline_paper import printed_kappa_crit

    first = config.models[0]
    hardware = [(p.accelerator, p.link) for p in config.hardware]

    def placed(model: str, **changes: Any) -> Deployment:
        return config.placed(model, reg, **changes)

    def fitting(deps: list[Deployment]) -> tuple[list[Deployment], str]:
        """The deployments that fit, and a sentence naming those that do not."""
        ok = [d for d in deps if not fit_problem(d)]
        left_out = [f"{d.short_label}: {fit_problem(d)}" for d in deps if fit_problem(d)]
        return ok, (" Left out: " + "; ".join(left_out) + "." if left_out else "")

    def roofline(mode: str) -> Callable[[], Made]:
        def make() -> Made:
            settings = config.settings() if mode == "full" else config.settings(
                tp=1, bandwidth_source="peak")
            fig = offload_roofline_figure(config.models, hardware, mode=mode,  # type: ignore[arg-type]
                                          new_tokens=config.new_tokens, registry=reg,
                                          **settings)
            spans = []
            printed_beside: list[str] = []
            unfit = 0
            for model in config.models:
                values = []
                for accelerator, link in hardware:
                    dep = deployment(model, accelerator=accelerator, link=link, registry=reg,
                                     **settings)
                    if mode == "full" and fit_problem(dep):
                        unfit += 1
                        continue
                    if mode == "full":
                        value = float(kappa_crit(dep, config.new_tokens).kappa_crit)
                    else:  # the paper's C and BW where it gives them, as the figure draws
                        paper = paper_input_kappa(reg, model, accelerator, link)
                        value = float(kappa_paper_for(dep).kappa_crit) if paper is None \
                            else paper
                        printed = printed_kappa_crit(dep) if paper is not None else None
                        if printed is not None:
                            printed_beside.append(
                                f"{reg.model(model).label} on {accelerator} + {link} "
                                f"{value:.3g} (printed {printed:g})")
                    values.append((f"{accelerator} + {link}", value))
                spans.append(f"{reg.model(model).label} {_span(values)}")
            alt = ((f"Full-mode offload roofline at T = {config.new_tokens:g}, TP {config.tp}: "
                    if mode == "full" else "Paper-mode offload roofline (the paper's C and BW, "
                    "as the paper-mode grid): ") + "each curve is flat up to its kappa_crit "
                   "and falls beyond it; kappa_crit " + "; ".join(spans)
                   + (f"; {unfit} deployments do not fit and are not drawn" if unfit else "")
                   + ".")
            if mode == "full":
                detail = ("The y axis is new tokens per second per GPU (the prefill rate a "
                          "request attains): flat while compute-bound, falling as 1/kappa_ratio "
                          "once transfer-bound. Full-mode kappa_crit of a request alone at T = "
                          f"{config.new_tokens:g}, TP {config.tp}, in each legend entry and the "
                          "full-mode grid above (point at a curve for its values). Curves of "
                          "deployments whose weights do not fit are not drawn.")
            else:
                detail = ("Paper mode: the paper's Eq. 6 with the paper's own C and BW (not "
                          "the dense spec peaks), as the paper-mode grid above, drawn as the "
                          "flat-then-1/kappa shape of the paper's Fig. 4 (a formula: no memory "
                          "check). Each legend entry gives the kappa_crit computed from those "
                          "inputs beside the one the paper prints"
                          + (": " + "; ".join(printed_beside) if printed_beside else "") + ".")
            caption = ("The offload roofline per GPU against K/T, load and compute "
                       "overlapped. " + detail)
            return fig, caption, alt
        return make

    def ceilings() -> Made:
        dep = placed(first)
        compute = float(dep.effective_compute)
        hbm_ridge = compute / float(dep.effective_hbm_bandwidth)
        link_ridge = compute / float(dep.effective_bandwidth)
        return ceilings_figure(dep), (
            f"{dep.label}. Each request sits twice at the FLOP/s it attains: at its FLOPs per "
            "HBM byte (circle) and its FLOPs per host-link byte (triangle); the roof it touches "
            f"bounds it. The HBM ridge is at "
            f"{compute / float(dep.effective_hbm_bandwidth):.3g} FLOP/B, the link ridge at "
            f"{compute / float(dep.effective_bandwidth):.3g} FLOP/B; "
            "per-copy latency and all-reduces keep points below their roofs."), (
            f"Hierarchical roofline of {dep.label}: the host-link ridge at {link_ridge:.3g} FLOP "
            f"per byte is {link_ridge / hbm_ridge:.3g} times the HBM ridge at {hbm_ridge:.3g}: "
            "a request needs that many more FLOPs per loaded byte than per HBM byte to stay "
            "compute-bound.")

    def kappa_t() -> Made:
        candidates = []
        for model in config.models:
            for name in config.regime_systems:
                gpus = reg.system(name).num_accelerators
                candidates.append(deployment(model, system=name, registry=reg,
                                             **config.settings(tp=min(config.tp, gpus))))
        deps, left_out = fitting(candidates)
        shown = {d.model.name for d in deps}
        for model in config.models:  # a model that fits none of them: its fallback system
            if reg.model(model).name not in shown:
                dep = placed(model)
                if not fit_problem(dep):
                    deps.append(dep)
        sentences = []
        for dep in deps:
            curves = regime_curves(dep, config.token_budget)
            meet = curves.meet_tokens
            if math.isinf(meet):
                sentences.append(f"{dep.short_label}: the weight reads set a lone request's "
                                 "compute time at every T with a crossover")
            else:
                sentences.append(
                    f"{dep.short_label}: alone, the weight reads set the compute time up to "
                    f"T = {meet:,.0f}; above it the weights stop mattering and the regimes "
                    f"differ only by the all-reduce latency a busy iteration shares (at most "
                    f"{100 * curves.gap_above:.0f}%)")
        return kappa_vs_t_figure(deps, iteration_tokens=config.token_budget), (
            "Full-mode kappa_crit against T for a request alone (solid) and inside a busy "
            f"iteration of {config.token_budget:g} tokens that shares the weight reads "
            "(dash-dot). Alone, a small prefill is limited by reading the weights from HBM, so "
            "kappa_crit falls with T; where attention over the cached context dominates it "
            "rises again until no K is transfer-bound. " + "; ".join(sentences) + "."
            + left_out), (
            "kappa_crit against new tokens T, a request alone and in a busy iteration: "
            + (sentences[0] + "." if sentences else "no deployment fits."))

    def overhead() -> Made:
        dep = deployment(first, system=config.testbed, registry=reg,
                         **config.settings(bandwidth_source="sustained"))
        share = float(ttft(dep, 64, 65536).transfer_share)
        share_8k = float(ttft(dep, 128, 8192).transfer_share)
        return overhead_figure(dep), (
            f"{dep.label}, serial, request alone. Transfer share at K = 65,536, T = 64: "
            f"{100 * share:.1f}% (the paper reports 99%); at K = 8,192, T = 128: "
            f"{100 * share_8k:.1f}% (paper: 88%)."), (
            f"Transfer share of TTFT on {dep.short_label} grows with K and falls with T: "
            f"{100 * share:.1f}% at K = 65,536, T = 64 (the paper: 99%), {100 * share_8k:.1f}% "
            "at K = 8,192, T = 128 (the paper: 88%).")

    def what_if() -> Made:
        deps, left_out = fitting([placed(m) for m in config.models])
        formats = []
        for dep in deps:
            values = []
            for kv in ("bf16", "fp8", "int4"):
                value = kappa_crit(dataclasses.replace(dep, kv_dtype=kv), config.new_tokens)
                values.append(f"{kv} {float(value.kappa_crit):.3g}")
            formats.append(f"{dep.short_label}: " + ", ".join(values))
        return what_if_figure(deps, config.new_tokens, registry=reg), (
            "Left: kappa_crit against per-GPU link bandwidth on each deployment's own host "
            "(solid: its DRAM, shared by NUMA node, caps each load, so a faster link stops "
            "helping at the DRAM share), for the link alone (dotted) and in paper mode "
            "(dashed); points: the whole host swapped for Grace CPUs with NVLink-C2C (diamond: "
            "a Grace per GPU as on GH200; square: a Grace per two GPUs as on GB200). Right: KV "
            "formats; smaller KV raises kappa_crit." + left_out), (
            "What-ifs: kappa_crit rises with host-link bandwidth until the host DRAM share caps "
            "it, and with a smaller KV format (full mode, T = "
            f"{config.new_tokens:g}): " + "; ".join(formats) + ".")

    def workloads() -> Made:
        from kvroof.plot.workload import workload_figure
        from kvroof.report.workloads import report_deployments, report_workloads

        traces = report_workloads(config)
        deps, left_out = fitting([d for d in report_deployments(config, reg, config.settings())
                                  if d.model.name == reg.model(first).name])
        kind = "synthetic workloads (SYNTHETIC, matched to the paper's published statistics)" \
            if all(w.synthetic for w in traces) else "the configured traces"
        import numpy as np

        medians = ", ".join(f"{w.name} {float(np.median(w.kappa_ratio())):,.3g}" for w in traces)
        crits = ", ".join(f"{d.short_label} {kappa_cell(d, config.new_tokens)}" for d in deps)
        alt = (f"Workload distributions: median K/T {medians}; full-mode kappa_crit at T = "
               f"{config.new_tokens:g}: {crits}. Requests above kappa_crit are transfer-bound.")
        return workload_figure(traces, deps, config.new_tokens), (
            f"ECDFs of T, K and K/T for {kind}, {first} on "
            + ", ".join(d.short_label.split(", ", 1)[1] for d in deps)
            + ". The table 'Workloads: share transfer-bound' has every model and mode."
            + left_out), alt

    def families() -> Made:
        from kvroof.report.families import families_figure_and_caption

        return families_figure_and_caption(config, reg)

    def breakdown() -> Made:
        t, k = config.breakdown_tokens
        dep = placed(first)
        tps = [tp for tp in sorted({1, config.tp})
               if not fit_problem(dataclasses.replace(dep, tp=tp, gpus_loading=None))]
        skipped = [tp for tp in sorted({1, config.tp}) if tp not in tps]
        note = f" TP {', '.join(map(str, skipped))}: does not fit." if skipped else ""
        from kvroof.cost.timing import OVERLAP_MODES

        shown = dataclasses.replace(dep, tp=(tps or [dep.tp])[-1], gpus_loading=None)
        times = {mode: float(ttft(shown, t, k, mode).ttft) * 1e3 for mode in OVERLAP_MODES}
        best = min(times, key=lambda mode: times[mode])
        return ttft_breakdown_figure(dep, t, k, tps=tps or [dep.tp]), (
            f"{dep.short_label.rsplit(', TP', 1)[0]} at T = {t:g}, K = {k:g}: layer-wise "
            "overlap hides at most the smaller of the two times." + note), (
            f"TTFT breakdown at T = {t:g}, K = {k:g} on {shown.short_label}: "
            + ", ".join(f"{mode} {value:.3g} ms" for mode, value in times.items())
            + f"; {best} overlap is the shortest.")

    measured: list[FigureSpec] = []
    if config.measurements is not None:
        from kvroof.measure.results import read_results
        from kvroof.plot.calibration import link_figure, prediction_figure
        from kvroof.report.measured import calibrate_measurements

        folder = config.measurements
        result, prefill = calibrate_measurements(config, reg)

        def predictions() -> Made:
            errors = "; ".join(f"{e.quantity} MAPE {100 * e.mape:.1f}%" for e in result.errors)
            return prediction_figure(result, prefill), (
                f"Measurements in {folder} against the model calibrated on them: {errors}."), (
                f"Measured against predicted after calibration: {errors}.")

        measured.append(("calibration", "Measured against predicted", predictions))
        if (folder / "link.csv").exists():
            def link() -> Made:
                system = reg.system(config.measured_system or "")
                peak = reg.link(system.host_link).peak_bandwidth
                fitted = result.calibration
                return link_figure(read_results(folder / "link.csv"), peak), (
                    "Single-copy bandwidth against size with the latency + bandwidth fit and "
                    "the host link's peak."), (
                    f"Copy bandwidth rises with transfer size toward the fitted "
                    f"{fitted.link_bandwidth / 1e9:.3g} GB/s (link peak {peak / 1e9:.3g} GB/s), "
                    f"after {fitted.link_latency * 1e6:.3g} us per copy.")

            measured.append(("link", "Copy bandwidth against transfer size", link))
    def validation() -> Made:
        from kvroof.plot.validation import validation_figure

        ratios = [r for item in validation_result.results
                  if (r := item.ratio("after")) is not None]
        within = sum(0.5 <= r <= 2.0 for r in ratios)
        return validation_figure(validation_result), (
            "How good is the model: every published measurement in validation/ against kvroof's "
            "prediction with its source's engine profile (filled) and before engine profiles "
            "(hollow); the band is a factor 2 either way. Tables 'How good is the model' give "
            "the errors per quantity and per case."), (
            f"Predicted against measured for {len(ratios)} published measurements: {within} "
            "within a factor 2 with engine profiles.")

    specs: list[FigureSpec] = [
        *measured,
        ("roofline", "Offload roofline (full mode)", roofline("full")),
        ("roofline-paper", "Offload roofline (paper mode)", roofline("paper")),
        ("ceilings", "Hierarchical roofline (compute, HBM, host link)", ceilings),
        ("kappa-vs-t", "kappa_crit against new tokens T: alone and in a busy iteration",
         kappa_t),
        ("families", "kappa_crit by attention family: against T and K, and per layer kind",
         families),
        ("overhead", "Overhead grid (transfer share of TTFT)", overhead),
        ("what-if", "What-ifs: link bandwidth and KV format", what_if),
        ("breakdown", "TTFT breakdown by overlap mode and TP", breakdown),
        ("workloads", "Workload distributions and kappa_crit", workloads),
        ("validation", "How good is the model: predicted against measured", validation),
    ]
    return [(key, title, _labelled(make, _compute_note(key, config, reg, validation_result)))
            for key, title, make in specs]


def _compute_note(key: str, config: ReportConfig, reg: Registry,
                  validation_result: ValidationResult) -> Callable[[], str]:
    """The compute-model sentence of figure ``key`` (:mod:`kvroof.report.compute_labels`),
    from the report's setting and the accelerators the figure draws."""
    from kvroof.report.compute_labels import (
        MEASUREMENT_SENTENCE,
        PAPER_SENTENCE,
        compute_model_sentence,
    )

    setting = config.compute_model

    def systems(*names: str) -> list[Accelerator]:
        return [reg.accelerator(reg.system(name).accelerator) for name in names]

    def placed(*models: str) -> list[Accelerator]:
        return [config.placed(model, reg).accelerator for model in models]

    def families() -> list[Accelerator]:
        from kvroof.report.families import FAMILY_PLACEMENTS

        return systems(*(p.system for p in FAMILY_PLACEMENTS))

    def workloads() -> list[Accelerator]:
        from kvroof.report.workloads import report_deployments

        return [d.accelerator for d in report_deployments(config, reg, config.settings())]

    drawn: dict[str, Callable[[], list[Accelerator]]] = {
        "roofline": lambda: [reg.accelerator(p.accelerator) for p in config.hardware],
        "ceilings": lambda: placed(config.models[0]),
        "kappa-vs-t": lambda: systems(*config.regime_systems) + placed(*config.models),
        "families": families,
        "overhead": lambda: systems(config.testbed),
        "what-if": lambda: placed(*config.models),
        "breakdown": lambda: placed(config.models[0]),
        "workloads": workloads,
    }
    fixed = {
        "roofline-paper": PAPER_SENTENCE,
        "link": MEASUREMENT_SENTENCE,
        "calibration": "Compute model: roofline, calibrated on these measurements.",
        "validation": f"Compute model: {validation_result.compute_model} (kvroof validate's "
                      "setting; the tables give each case's prediction).",
    }
    if key in fixed:
        return lambda: fixed[key]
    return lambda: compute_model_sentence(setting, drawn[key]())


def _labelled(make: Callable[[], Made], note: Callable[[], str]) -> Callable[[], Made]:
    """``make`` with the compute-model sentence ``note`` appended to its caption."""
    def run() -> Made:
        fig, caption, alt = make()
        return fig, f"{caption} {note()}", alt
    return run

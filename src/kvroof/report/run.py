"""`kvroof report`: every figure, the paper's tables recomputed, and the full-mode extensions,
written to one folder as PNG (and SVG/PDF on request), report.md and a self-contained
report.html."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from kvroof.analysis.regimes import regime_curves
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.memory_fit import fit_problem
from kvroof.cost.timing import ttft
from kvroof.errors import KvroofError
from kvroof.report.config import ReportConfig
from kvroof.report.render import FigureEntry, render_html, render_markdown
from kvroof.report.tables import Table, build_tables, kappa_cell
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.run import ValidationResult, validate

__all__ = ["ReportResult", "build_report"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportResult:
    """What the report wrote."""

    folder: Path
    markdown: Path
    html: Path
    figures: list[FigureEntry]
    tables: list[Table]
    seconds: float


def _prepare_folder(folder: Path) -> None:
    """``folder`` is the empty staging folder of :func:`kvroof.outputs.staged_folder`."""
    try:
        (folder / "figures").mkdir(exist_ok=True)
    except OSError as error:
        raise KvroofError(f"{folder}: cannot write: {error.strerror or error}") from None


def _figure_specs(config: ReportConfig, reg: Registry,
                  validation_result: ValidationResult) -> list[
        tuple[str, str, Callable[[], tuple[Figure, str]]]]:
    """(key, title, make) for each figure; make returns the figure and its caption."""
    from kvroof.plot import (
        ceilings_figure,
        kappa_vs_t_figure,
        offload_roofline_figure,
        overhead_figure,
        ttft_breakdown_figure,
        what_if_figure,
    )

    first = config.models[0]
    hardware = [(p.accelerator, p.link) for p in config.hardware]

    def placed(model: str, **changes: Any) -> Deployment:
        return config.placed(model, reg, **changes)

    def fitting(deps: list[Deployment]) -> tuple[list[Deployment], str]:
        """The deployments that fit, and a sentence naming those that do not."""
        ok = [d for d in deps if not fit_problem(d)]
        left_out = [f"{d.short_label}: {fit_problem(d)}" for d in deps if fit_problem(d)]
        return ok, (" Left out: " + "; ".join(left_out) + "." if left_out else "")

    def roofline(mode: str) -> Callable[[], tuple[Figure, str]]:
        def make() -> tuple[Figure, str]:
            settings = config.settings() if mode == "full" else config.settings(
                tp=1, bandwidth_source="peak")
            fig = offload_roofline_figure(config.models, hardware, mode=mode,  # type: ignore[arg-type]
                                          new_tokens=config.new_tokens, registry=reg,
                                          **settings)
            parts = []
            for model in config.models:
                for accelerator, link in hardware:
                    dep = deployment(model, accelerator=accelerator, link=link, registry=reg,
                                     **settings)
                    parts.append(f"{model} on {accelerator} + {link}: "
                                 + kappa_cell(dep, config.new_tokens))
            caption = ("Attainable compute per GPU against K/T with load and compute "
                       "overlapped. " + ("Full-mode kappa_crit of a request alone at T = "
                                         f"{config.new_tokens:g}, TP {config.tp}: "
                                         + "; ".join(parts) + ". Curves of deployments whose "
                                         "weights do not fit are not drawn." if mode == "full"
                                         else "Paper mode with dense peaks and peak link "
                                         "bandwidth: the flat-then-1/kappa shape of the "
                                         "paper's Fig. 4 (a formula: no memory check)."))
            return fig, caption
        return make

    def ceilings() -> tuple[Figure, str]:
        dep = placed(first)
        compute = float(dep.effective_compute)
        return ceilings_figure(dep), (
            f"{dep.label}. Each request sits twice at the FLOP/s it attains: at its FLOPs per "
            "HBM byte (circle) and its FLOPs per host-link byte (triangle); the roof it touches "
            f"bounds it. The HBM ridge is at "
            f"{compute / float(dep.effective_hbm_bandwidth):.3g} FLOP/B, the link ridge at "
            f"{compute / float(dep.effective_bandwidth):.3g} FLOP/B; "
            "per-copy latency and all-reduces keep points below their roofs.")

    def kappa_t() -> tuple[Figure, str]:
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
            + left_out)

    def overhead() -> tuple[Figure, str]:
        dep = deployment(first, system=config.testbed, registry=reg,
                         **config.settings(bandwidth_source="sustained"))
        share = float(ttft(dep, 64, 65536).transfer_share)
        share_8k = float(ttft(dep, 128, 8192).transfer_share)
        return overhead_figure(dep), (
            f"{dep.label}, serial, request alone. Transfer share at K = 65,536, T = 64: "
            f"{100 * share:.1f}% (the paper reports 99%); at K = 8,192, T = 128: "
            f"{100 * share_8k:.1f}% (paper: 88%).")

    def what_if() -> tuple[Figure, str]:
        deps, left_out = fitting([placed(m) for m in config.models])
        return what_if_figure(deps, config.new_tokens, registry=reg), (
            "Left: kappa_crit against per-GPU link bandwidth on each deployment's own host "
            "(solid: its DRAM, shared by NUMA node, caps each load, so a faster link stops "
            "helping at the DRAM share), for the link alone (dotted) and in paper mode "
            "(dashed); points: the whole host swapped for Grace CPUs with NVLink-C2C (diamond: "
            "a Grace per GPU as on GH200; square: a Grace per two GPUs as on GB200). Right: KV "
            "formats; smaller KV raises kappa_crit." + left_out)

    def workloads() -> tuple[Figure, str]:
        from kvroof.plot.workload import workload_figure
        from kvroof.report.workloads import report_deployments, report_workloads

        traces = report_workloads(config)
        deps, left_out = fitting([d for d in report_deployments(config, reg, config.settings())
                                  if d.model.name == reg.model(first).name])
        kind = "synthetic workloads (SYNTHETIC, matched to the paper's published statistics)" \
            if all(w.synthetic for w in traces) else "the configured traces"
        return workload_figure(traces, deps, config.new_tokens), (
            f"ECDFs of T, K and K/T for {kind}, {first} on "
            + ", ".join(d.short_label.split(", ", 1)[1] for d in deps)
            + ". The table 'Workloads: share transfer-bound' has every model and mode."
            + left_out)

    def families() -> tuple[Figure, str]:
        from kvroof.report.families import families_figure_and_caption

        return families_figure_and_caption(config, reg)

    def breakdown() -> tuple[Figure, str]:
        t, k = config.breakdown_tokens
        dep = placed(first)
        tps = [tp for tp in sorted({1, config.tp})
               if not fit_problem(dataclasses.replace(dep, tp=tp, gpus_loading=None))]
        skipped = [tp for tp in sorted({1, config.tp}) if tp not in tps]
        note = f" TP {', '.join(map(str, skipped))}: does not fit." if skipped else ""
        return ttft_breakdown_figure(dep, t, k, tps=tps or [dep.tp]), (
            f"{dep.short_label.rsplit(', TP', 1)[0]} at T = {t:g}, K = {k:g}: layer-wise "
            "overlap hides at most the smaller of the two times." + note)

    measured: list[tuple[str, str, Callable[[], tuple[Figure, str]]]] = []
    if config.measurements is not None:
        from kvroof.measure.results import read_results
        from kvroof.plot.calibration import link_figure, prediction_figure
        from kvroof.report.measured import calibrate_measurements

        folder = config.measurements
        result, prefill = calibrate_measurements(config, reg)

        def predictions() -> tuple[Figure, str]:
            errors = "; ".join(f"{e.quantity} MAPE {100 * e.mape:.1f}%" for e in result.errors)
            return prediction_figure(result, prefill), (
                f"Measurements in {folder} against the model calibrated on them: {errors}.")

        measured.append(("calibration", "Measured against predicted", predictions))
        if (folder / "link.csv").exists():
            def link() -> tuple[Figure, str]:
                system = reg.system(config.measured_system or "")
                peak = reg.link(system.host_link).peak_bandwidth
                return link_figure(read_results(folder / "link.csv"), peak), (
                    "Single-copy bandwidth against size with the latency + bandwidth fit and "
                    "the host link's peak.")

            measured.append(("link", "Copy bandwidth against transfer size", link))
    def validation() -> tuple[Figure, str]:
        from kvroof.plot.validation import validation_figure

        return validation_figure(validation_result), (
            "How good is the model: every published measurement in validation/ against kvroof's "
            "prediction with its source's engine profile (filled) and before engine profiles "
            "(hollow); the band is a factor 2 either way. Tables 'How good is the model' give "
            "the errors per quantity and per case.")

    return [
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


def build_report(
    folder: str | Path = "kvroof-report",
    config: ReportConfig | None = None,
    registry: Registry | None = None,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> ReportResult:
    """Write the report into ``folder`` (created if missing; its parent must exist).

    The report is built in a hidden folder first and moved into ``folder`` only when it is
    complete (:func:`kvroof.outputs.staged_folder`): an error or Ctrl-C leaves a previous
    report as it was. ``folder`` must be new, empty, or one kvroof made (it holds
    :data:`kvroof.outputs.MARKER`), unless ``force``; the files of a previous report that this
    one does not write again are removed, other files are kept."""
    from kvroof.outputs import staged_folder

    reg = registry or default_registry()
    config = config or ReportConfig()
    config.check_names(reg)  # before anything is made
    config.check_deployments(reg)
    target = Path(folder)
    with staged_folder(target, force=force, command="report") as work:
        built = _build_into(work, config, reg, progress)
    return ReportResult(target, target / built.markdown.name, target / built.html.name,
                        [FigureEntry(f.key, f.title, [target / p.relative_to(work)
                                                      for p in f.files], f.caption)
                         for f in built.figures], built.tables, built.seconds)


def _build_into(
    folder: str | Path = "kvroof-report",
    config: ReportConfig | None = None,
    registry: Registry | None = None,
    progress: Progress | None = None,
) -> ReportResult:
    """Write the report into the empty staging folder ``folder``."""
    start = time.perf_counter()
    reg = registry or default_registry()
    config = config or ReportConfig()
    config.check_names(reg)
    config.check_deployments(reg)
    say = progress or (lambda message: None)
    target = Path(folder)
    _prepare_folder(target)
    from kvroof.plot.style import save_figure

    validation_result = validate(registry=reg)
    specs = _figure_specs(config, reg, validation_result)
    section = None
    if config.simulation is not None:
        from kvroof.report.simulation import simulation_section

        say("[0] serving simulation")
        section = simulation_section(config, reg)
        specs += section.figures
    steps = len(specs) + 2
    say(f"[1/{steps}] tables: paper mode, full mode, measured points, what-ifs, workloads, "
        "validation")
    from kvroof.report.workloads import report_deployments, report_workloads, workload_table

    tables = build_tables(config, reg)
    from kvroof.report.families import family_table

    tables.append(family_table(config, reg))
    tables.append(workload_table(report_workloads(config),
                                 report_deployments(config, reg, config.settings())))
    if config.measurements is not None:
        from kvroof.report.measured import calibrate_measurements, calibration_table

        tables.insert(0, calibration_table(*calibrate_measurements(config, reg)))
    from kvroof.report.validation import validation_tables

    tables += validation_tables(validation_result)
    if section is not None:
        tables.append(section.table)
    figures = []
    for index, (key, title, make) in enumerate(specs, start=2):
        tick = time.perf_counter()
        fig, caption = make()
        files = [save_figure(fig, target / "figures" / f"{key}.{fmt}") for fmt in config.formats]
        figures.append(FigureEntry(key, title, files, caption))
        say(f"[{index}/{steps}] figure {key} ({time.perf_counter() - tick:.1f} s)")
    intro = [
        "This report recomputes the tables of Meng, Lee and Wang, 'Understanding Bottlenecks for "
        "Efficiently Serving LLM Inference With KV Offloading' (arXiv 2601.19910) in paper mode, "
        "then extends them with kvroof's full model: the GPU's own roofline (FLOPs against the "
        "HBM reads of weights and KV), attention over the cached context, MLA, tensor "
        "parallelism and its all-reduces, per-copy latency and granularity, write-back, host "
        "DRAM shared by NUMA node, overlap, and whether the weights fit at all.",
        f"Settings: T = {config.new_tokens:g} new tokens, TP {config.tp}, dense "
        f"{config.compute_dtype} peaks x "
        + (f"compute efficiency {config.compute_efficiency:g}" if config.compute_efficiency
           else "each accelerator's published achievable matmul rate (H100 SXM: 0.80)")
        + f", {config.bandwidth_source} link bandwidth, link efficiency "
        f"{config.link_efficiency:g}, MLA {config.mla_mode}; system {config.system} (or "
        f"{', '.join(config.fallback_systems)} for a model whose weights do not fit it), testbed "
        f"{config.testbed}.",
        "Two regimes: a request alone reads every weight its tokens use (at small T that read, "
        "not the FLOPs, sets the compute time, and kappa_crit is high); inside a busy iteration "
        f"of {config.token_budget:g} tokens it shares that read and kappa_crit falls toward its "
        "FLOP-only value. Tables give the request alone unless they say otherwise.",
        "kappa_crit: the cached-to-new token ratio K/T above which loading the cache takes "
        "longer than prefilling the new tokens. 'never' means no K makes prefill "
        "transfer-bound at that T.",
    ]
    say(f"[{steps}/{steps}] report.md and report.html")
    title = "kvroof report: KV-cache offloading, compute-bound or transfer-bound?"
    markdown = target / "report.md"
    markdown.write_text(render_markdown(title, intro, figures, tables, target), encoding="utf-8")
    page = target / "report.html"
    page.write_text(render_html(title, intro, figures, tables), encoding="utf-8")
    return ReportResult(target, markdown, page, figures, tables, time.perf_counter() - start)

"""`kvroof report`: every figure, the paper's tables recomputed, and the full-mode extensions,
written to one folder as PNG (and SVG/PDF on request), report.md and a self-contained
report.html."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, max_new_tokens_for_crossover
from kvroof.cost.timing import ttft
from kvroof.errors import KvroofError
from kvroof.report.config import ReportConfig
from kvroof.report.render import FigureEntry, render_html, render_markdown
from kvroof.report.tables import Table, build_tables
from kvroof.specs.registry import Registry, default_registry

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


def _figure_specs(config: ReportConfig, reg: Registry) -> list[
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
    per_gpu = config.settings(tp=1)

    def on_system(model: str, **changes: Any) -> Deployment:
        return deployment(model, system=config.system, registry=reg,
                          **config.settings(**changes))

    def roofline(mode: str) -> Callable[[], tuple[Figure, str]]:
        def make() -> tuple[Figure, str]:
            settings = per_gpu if mode == "full" else config.settings(tp=1,
                                                                bandwidth_source="peak")
            fig = offload_roofline_figure(config.models, hardware, mode=mode,  # type: ignore[arg-type]
                                          new_tokens=config.new_tokens, registry=reg,
                                          **settings)
            parts = []
            for model in config.models:
                for accelerator, link in hardware:
                    dep = deployment(model, accelerator=accelerator, link=link, registry=reg,
                                     **per_gpu)
                    value = float(kappa_crit(dep, config.new_tokens).kappa_crit)
                    parts.append(f"{model} on {accelerator} + {link}: "
                                 + ("never" if value == float("inf") else f"{value:.3g}"))
            caption = ("Attainable compute per GPU against K/T with load and compute "
                       "overlapped. " + ("Full-mode kappa_crit at T = "
                                         f"{config.new_tokens:g}, TP 1: " + "; ".join(parts)
                                         + "." if mode == "full" else
                                         "Paper mode with dense peaks and peak link "
                                         "bandwidth: the flat-then-1/kappa shape of the "
                                         "paper's Fig. 4."))
            return fig, caption
        return make

    def ceilings() -> tuple[Figure, str]:
        dep = on_system(first)
        return ceilings_figure(dep), (
            f"{dep.label}. Requests below the host-link roof are transfer-bound; the link "
            f"ridge sits at {float(dep.effective_compute) / float(dep.effective_bandwidth):.3g}"
            " FLOP per byte loaded, far above the HBM ridge.")

    def kappa_t() -> tuple[Figure, str]:
        deps = [on_system(m, tp=tp) for m in config.models for tp in sorted({1, config.tp})]
        limits = "; ".join(f"{d.short_label}: T_max = {float(max_new_tokens_for_crossover(d)):.4g}"
                           for d in deps)
        return kappa_vs_t_figure(deps), (
            "Full-mode kappa_crit rises with T (attention of the new tokens over each cached "
            "token) until no K is transfer-bound; the paper's constant ignores T. "
            f"Largest T with a crossover: {limits}.")

    def overhead() -> tuple[Figure, str]:
        dep = deployment(first, system=config.testbed, registry=reg,
                         **config.settings(bandwidth_source="sustained"))
        share = float(ttft(dep, 64, 65536).transfer_share)
        share_8k = float(ttft(dep, 128, 8192).transfer_share)
        return overhead_figure(dep), (
            f"{dep.label}, serial. Transfer share at K = 65,536, T = 64: {100 * share:.1f}% "
            f"(the paper reports 99%); at K = 8,192, T = 128: {100 * share_8k:.1f}% (paper: "
            "88%).")

    def what_if() -> tuple[Figure, str]:
        deps = [on_system(m) for m in config.models]
        return what_if_figure(deps, config.new_tokens, registry=reg), (
            "Left: kappa_crit against per-GPU link bandwidth (full: solid; paper: dashed). "
            "Full mode flattens where the host DRAM shared by the system's GPUs becomes the "
            "bound. Right: KV formats; smaller KV raises kappa_crit.")

    def workloads() -> tuple[Figure, str]:
        from kvroof.plot.workload import workload_figure
        from kvroof.report.workloads import report_deployments, report_workloads

        traces = report_workloads(config)
        deps = [d for d in report_deployments(config, reg, config.settings())
                if d.model.name == reg.model(first).name]
        kind = "synthetic workloads (SYNTHETIC, matched to the paper's published statistics)" \
            if all(w.synthetic for w in traces) else "the configured traces"
        return workload_figure(traces, deps), (
            f"ECDFs of T, K and K/T for {kind}, {first} on "
            + ", ".join(d.short_label.split(", ", 1)[1] for d in deps)
            + ". The table 'Workloads: share transfer-bound' has every model and mode.")

    def breakdown() -> tuple[Figure, str]:
        t, k = config.breakdown_tokens
        dep = on_system(first)
        return ttft_breakdown_figure(dep, t, k, tps=sorted({1, config.tp})), (
            f"{dep.short_label.rsplit(', TP', 1)[0]} at T = {t:g}, K = {k:g}: layer-wise "
            "overlap hides at most the smaller of the two times.")

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
    return [
        *measured,
        ("roofline", "Offload roofline (full mode)", roofline("full")),
        ("roofline-paper", "Offload roofline (paper mode)", roofline("paper")),
        ("ceilings", "Three-ceiling roofline", ceilings),
        ("kappa-vs-t", "kappa_crit against new tokens T", kappa_t),
        ("overhead", "Overhead grid (transfer share of TTFT)", overhead),
        ("what-if", "What-ifs: link bandwidth and KV format", what_if),
        ("breakdown", "TTFT breakdown by overlap mode and TP", breakdown),
        ("workloads", "Workload distributions and kappa_crit", workloads),
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

    specs = _figure_specs(config, reg)
    steps = len(specs) + 2
    say(f"[1/{steps}] tables: paper mode, full mode, measured points, what-ifs, workloads")
    from kvroof.report.workloads import report_deployments, report_workloads, workload_table

    tables = build_tables(config, reg)
    tables.append(workload_table(report_workloads(config),
                                 report_deployments(config, reg, config.settings())))
    if config.measurements is not None:
        from kvroof.report.measured import calibrate_measurements, calibration_table

        tables.insert(0, calibration_table(*calibrate_measurements(config, reg)))
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
        "then extends them with kvroof's full model: attention over the cached context, MLA, "
        "tensor parallelism, per-copy latency and granularity, host DRAM sharing, overlap.",
        f"Settings: T = {config.new_tokens:g} new tokens, TP {config.tp}, dense "
        f"{config.compute_dtype} peaks, {config.bandwidth_source} link bandwidth, compute "
        f"efficiency {config.compute_efficiency:g}, link efficiency {config.link_efficiency:g}, "
        f"MLA {config.mla_mode}; system {config.system}, testbed {config.testbed}.",
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

"""`kvroof report`: every figure, the paper's tables recomputed, and the full-mode extensions,
written to one folder as PNG (and SVG/PDF on request) with a CSV of what each figure draws,
report.md, report.json (every table) and a self-contained report.html (figures as inline SVG
with their data: tooltips and legend toggles, no network).

This module builds and writes the folder; the figures, with their captions and alt texts, are
:mod:`kvroof.report.figure_list`'s."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvroof.errors import KvroofError
from kvroof.report.config import ReportConfig
from kvroof.report.figure_list import FigureSpec as FigureSpec
from kvroof.report.figure_list import Made as Made
from kvroof.report.figure_list import figure_specs
from kvroof.report.render import Chart, FigureEntry, render_html, render_markdown
from kvroof.report.tables import Table, build_tables
from kvroof.specs.registry import Registry, default_registry
from kvroof.validation.run import validate

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
    json: Path | None = None
    findings: list[str] = dataclasses.field(default_factory=list)


def _prepare_folder(folder: Path) -> None:
    """``folder`` is the empty staging folder of :func:`kvroof.outputs.staged_folder`."""
    try:
        (folder / "figures").mkdir(exist_ok=True)
    except OSError as error:
        raise KvroofError(f"{folder}: cannot write: {error.strerror or error}") from None


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
    def moved(path: Path) -> Path:
        return target / path.relative_to(work)

    return ReportResult(target, moved(built.markdown), moved(built.html),
                        [dataclasses.replace(f, files=[moved(p) for p in f.files],
                                             data=moved(f.data) if f.data else None)
                         for f in built.figures], built.tables, built.seconds,
                        moved(built.json) if built.json else None, built.findings)


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

    validation_result = validate(registry=reg, compute_model=config.compute_model)
    specs = figure_specs(config, reg, validation_result)
    section = None
    if config.simulation is not None:
        from kvroof.report.simulation import simulation_section

        say("[0] serving simulation")
        section = simulation_section(config, reg)
        specs += section.figures
    planning = None
    if config.planning is not None:
        from kvroof.report.planning import planning_section

        say(f"[0] planning: kvroof plan for {config.planning.model} on "
            f"{', '.join(config.planning.candidates)}")
        planning = planning_section(config, reg)
        specs += planning.figures
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
        tables += section.tables
    if planning is not None:
        tables += planning.tables
    from kvroof.plot.figure_data import figure_csv, figure_data, interactive_svg

    figures = []
    charts: dict[str, Chart] = {}
    for index, (key, title, make) in enumerate(specs, start=2):
        tick = time.perf_counter()
        fig, caption, alt = make()
        files = [save_figure(fig, target / "figures" / f"{key}.{fmt}") for fmt in config.formats]
        # what the figure draws, read once: its CSV and the page's hover data
        data = figure_data(fig)
        csv_file = target / "figures" / f"{key}.csv"
        csv_file.write_text(figure_csv(data), encoding="utf-8")
        svg, hover = interactive_svg(fig, data, f"fig-{key}__", keep_layout=True)
        charts[key] = Chart(svg, hover)
        figures.append(FigureEntry(key, title, files, caption, alt, csv_file))
        say(f"[{index}/{steps}] figure {key} ({time.perf_counter() - tick:.1f} s)")
    intro = [
        "This report recomputes the tables of Meng, Lee and Wang, 'Understanding Bottlenecks for "
        "Efficiently Serving LLM Inference With KV Offloading' (arXiv 2601.19910) in paper mode, "
        "then extends them with kvroof's full model: the GPU's own roofline (FLOPs against the "
        "HBM reads of weights and KV), attention over the cached context, MLA, tensor "
        "parallelism and its all-reduces, per-copy latency and granularity, write-back, host "
        "DRAM shared by NUMA node, overlap, and whether the weights fit at all.",
        f"Settings: T = {config.new_tokens:g} new tokens, TP {config.tp}, compute model "
        f"{config.compute_model}"
        + (" (the measured kernel tables where they cover the accelerator, the roofline "
           "elsewhere)" if config.compute_model == "auto" else "")
        + f", roofline at dense {config.compute_dtype} peaks x "
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
    say(f"[{steps}/{steps}] report.md, report.json and report.html")
    title = "kvroof report: KV-cache offloading, compute-bound or transfer-bound?"
    from kvroof.report.findings import findings

    summary = findings(tables)
    markdown = target / "report.md"
    markdown.write_text(render_markdown(title, intro, figures, tables, target, summary),
                        encoding="utf-8")
    data_file = target / "report.json"
    data_file.write_text(_report_json(title, intro, summary, figures, tables, target),
                         encoding="utf-8")
    page = target / "report.html"
    page.write_text(render_html(title, intro, figures, tables, summary, charts, target),
                    encoding="utf-8")
    return ReportResult(target, markdown, page, figures, tables, time.perf_counter() - start,
                        data_file, summary)


def _report_json(title: str, intro: list[str], summary: list[str], figures: list[FigureEntry],
                 tables: list[Table], base: Path) -> str:
    """report.json: every table (columns with SI units, rows, notes), the summary and each
    figure's files and data file, relative to the report's folder."""
    import json

    from kvroof._version import __version__
    from kvroof.report.cells import table_json

    data = {
        "title": title, "kvroof_version": __version__, "intro": intro, "findings": summary,
        "tables": [table_json(table) for table in tables],
        "figures": [{"key": f.key, "title": f.title, "caption": f.caption, "alt": f.alt,
                     "files": [p.relative_to(base).as_posix() for p in f.files],
                     "data": f.data.relative_to(base).as_posix() if f.data else None}
                    for f in figures],
    }
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"

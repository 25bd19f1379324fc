"""Markdown and self-contained HTML for the report.

Both are laid out in sections (:data:`SECTIONS`): each section's tables, each figure directly
under the table it belongs to, then the table's notes. report.html adds a viewport, a "what
this report finds" box, a contents list with anchors, tables that scroll inside their own box
with numbers right-aligned, and each figure as inline SVG with its data, which a small inline
script turns into tooltips and legend toggles (:mod:`kvroof.report.page_assets`); it needs no
network and no server. Every id in the page is unique: tables keep their key, figures are
``fig-<key>``, sections ``sec-<name>``, and every other id carries ``__`` after one of these.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kvroof.report.cells import numeric_columns
from kvroof.report.page_assets import CSS, SCRIPT
from kvroof.report.tables import Table

__all__ = ["SECTIONS", "Chart", "FigureEntry", "Section", "layout", "render_html",
           "render_markdown"]

@dataclass(frozen=True)
class FigureEntry:
    """A written figure: its files (PNG first), what it shows, its finding in one sentence
    (the alt text) and the CSV of what it draws."""

    key: str
    title: str
    files: list[Path]
    caption: str
    alt: str = ""
    data: Path | None = None


@dataclass(frozen=True)
class Chart:
    """A figure for the page: inline SVG (ids prefixed with ``fig-<key>__``) and its hover
    data (:func:`kvroof.plot.figure_data.interactive_svg`)."""

    svg: str
    hover: dict[str, Any]


@dataclass(frozen=True)
class Section:
    """A part of the report: its tables in order and, per table, the figures shown under it."""

    name: str
    title: str
    tables: list[Table]
    figures: dict[str, list[FigureEntry]] = field(default_factory=dict)
    """Figures under each table (by table key); "" for a section without tables."""

    @property
    def id(self) -> str:
        return f"sec-{self.name}"


SECTIONS: Final[tuple[tuple[str, str, tuple[str, ...], tuple[tuple[str, str], ...]], ...]] = (
    ("measured-here", "Your measurements", ("calibration",),
     (("calibration", "calibration"), ("link", "calibration"))),
    ("paper", "Paper mode: the paper's tables recomputed", ("kappa_m", "kappa_hw", "paper_grid"),
     (("roofline-paper", "paper_grid"),)),
    ("full", "Full mode: a request alone", ("full_grid",),
     (("roofline", "full_grid"), ("ceilings", "full_grid"), ("breakdown", "full_grid"))),
    ("regimes", "Measured kappa_crit, and the two regimes", ("measured",),
     (("kappa-vs-t", "measured"), ("overhead", "measured"))),
    ("what-if", "What-ifs", ("what_if",), (("what-if", "what_if"),)),
    ("workloads", "Workloads", ("workloads",), (("workloads", "workloads"),)),
    ("families", "Attention families", ("families",), (("families", "families"),)),
    ("validation", "How good is the model", ("validation", "validation_cases"),
     (("validation", "validation"),)),
    ("simulation", "Serving simulation", ("paper-loads", "simulation"),
     (("simulation-ttft", "simulation"), ("simulation-timeline", "simulation"))),
    ("planning", "Planning: KV offloading for your traffic", ("planning", "planning_basis"),
     (("planning-rate", "planning"), ("planning-memory", "planning"),
      ("planning-threshold", "planning"))),
)
"""(name, title, table keys, (figure key, the table it goes under)) of each section, in order.
A table or figure not named here goes to a last section, "More"."""


def layout(figures: Sequence[FigureEntry], tables: Sequence[Table]) -> list[Section]:
    """The report's sections with the tables and figures it has (empty sections left out)."""
    by_table = {t.key: t for t in tables}
    by_figure = {f.key: f for f in figures}
    used_tables: set[str] = set()
    used_figures: set[str] = set()
    sections = []
    for name, title, table_keys, figure_places in SECTIONS:
        present = [by_table[k] for k in table_keys if k in by_table]
        placed: dict[str, list[FigureEntry]] = {}
        for key, under in figure_places:
            if key not in by_figure:
                continue
            anchor = under if under in by_table else (present[-1].key if present else "")
            placed.setdefault(anchor, []).append(by_figure[key])
            used_figures.add(key)
        used_tables |= {t.key for t in present}
        if present or placed:
            sections.append(Section(name, title, present, placed))
    rest_tables = [t for t in tables if t.key not in used_tables]
    rest_figures = [f for f in figures if f.key not in used_figures]
    if rest_tables or rest_figures:
        sections.append(Section("more", "More", rest_tables, {"": rest_figures}))
    return sections


# ---------------------------------------------------------------------------------------------
# Markdown


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _md_table(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join(map(_md_cell, table.header)) + " |",
             "|" + "".join("---:|" if numeric else "---|"
                           for numeric in numeric_columns(table))]
    lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def _md_notes(table: Table) -> str:
    lines = [f"- {note}" for note in table.notes]
    if table.links:
        lines += ["", "Sources:", ""] + [f"- [{text}]({url})" for text, url in table.links]
    return "\n".join(lines) + "\n" if lines else ""


def _md_figure(figure: FigureEntry, base: Path) -> str:
    png = figure.files[0].relative_to(base)
    others = [f"[{f.suffix[1:].upper()}]({f.relative_to(base)})" for f in figure.files[1:]]
    if figure.data is not None:
        others.append(f"[data (CSV)]({figure.data.relative_to(base)})")
    alt = (figure.alt or figure.title).replace("[", "(").replace("]", ")")
    return "\n".join([f"#### Figure: {figure.title}", "", f"![{alt}]({png})", "",
                      figure.caption + (f" Also: {', '.join(others)}." if others else ""), ""])


def render_markdown(title: str, intro: list[str], figures: list[FigureEntry],
                    tables: list[Table], base: Path, findings: Sequence[str] = ()) -> str:
    """The report as Markdown with relative image links, in the page's sections."""
    parts = [f"# {title}", ""]
    if findings:
        parts += ["## What this report finds", "", *[f"{i}. {line}" for i, line in
                                                      enumerate(findings, start=1)], ""]
    parts += [*intro, ""]
    for section in layout(figures, tables):
        parts += [f"## {section.title}", ""]
        for figure in section.figures.get("", []):
            parts.append(_md_figure(figure, base))
        for table in section.tables:
            parts.append(_md_table(table))
            for figure in section.figures.get(table.key, []):
                parts.append(_md_figure(figure, base))
            notes = _md_notes(table)
            if notes:
                parts.append(notes)
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# HTML

_LINK = re.compile(r"https?://[^\s<>\"')\]]+[^\s<>\"')\].,;:]|\barXiv (\d{4}\.\d{4,5})\b")


def _text(text: str) -> str:
    """Escaped text with its URLs and arXiv ids as links."""
    out = []
    last = 0
    for match in _LINK.finditer(text):
        out.append(html.escape(text[last:match.start()]))
        shown = match.group(0)
        url = f"https://arxiv.org/abs/{match.group(1)}" if match.group(1) else shown
        out.append(f'<a href="{html.escape(url)}">{html.escape(shown)}</a>')
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _attr(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=True)


def _html_table(table: Table, figures: Sequence[FigureEntry], charts: dict[str, Chart],
                base: Path | None) -> str:
    numeric = numeric_columns(table)
    heading = f"{table.key}__h"

    def cell(tag: str, text: str, index: int) -> str:
        classes = []
        if index < len(numeric) and numeric[index]:
            classes.append("num")
        elif tag == "td" and len(text) > 60:
            classes.append("long")
        cls = f' class="{" ".join(classes)}"' if classes else ""
        return f"<{tag}{cls}>{_text(text)}</{tag}>"

    head = "".join(cell("th", h, i) for i, h in enumerate(table.header))
    body = "".join("<tr>" + "".join(cell("td", c, i) for i, c in enumerate(row)) + "</tr>"
                   for row in table.rows)
    parts = [f'<section class="table-block" id="{_attr(table.key)}" '
             f'aria-labelledby="{heading}">',
             f'<h3 id="{heading}">{_text(table.title)}</h3>',
             f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{heading}">'
             f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"]
    parts += [_html_figure(f, charts.get(f.key), base) for f in figures]
    if table.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_text(n)}</li>" for n in table.notes)
                     + "</ul>")
    if table.links:
        parts.append('<p class="sources">Sources:</p><ul class="notes sources">' + "".join(
            f'<li><a href="{_attr(url)}">{html.escape(text)}</a></li>'
            for text, url in table.links) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _page_svg(svg: str, alt: str) -> str:
    """An inline SVG for the page: its root gets the page's class, an accessible name (the
    alt text) and a width no larger than its own; the font list each text repeats is left to
    the page's style sheet, and matplotlib's global style rule is scoped to the figure."""
    match = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    width = float(match.group(1)) * 4 / 3 if match else 640.0
    svg = svg.replace("<svg ", f'<svg class="kv-chart" role="img" aria-label="{_attr(alt)}" '
                               f'style="max-width:{width:.0f}px" ', 1)
    svg = re.sub(r" font-family: [^;\"]*sans-serif;?", "", svg)
    return svg.replace('<style type="text/css">*{', '<style type="text/css">svg.kv-chart *{')


def _json_script(data: dict[str, Any]) -> str:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _html_figure(figure: FigureEntry, chart: Chart | None, base: Path | None) -> str:
    fid = f"fig-{figure.key}"
    alt = figure.alt or figure.title
    links = []
    if base is not None:
        if figure.data is not None:
            links.append(f'<a href="{_attr(figure.data.relative_to(base).as_posix())}">'
                         "data (CSV)</a>")
        links += [f'<a href="{_attr(f.relative_to(base).as_posix())}">'
                  f"{f.suffix[1:].upper()}</a>" for f in figure.files]
    files = f" Files: {' · '.join(links)}." if links else ""
    if chart is not None:
        body = (f'<div class="plot">{_page_svg(chart.svg, alt)}'
                '<div class="tip" role="status" hidden></div></div>'
                f'<script type="application/json" id="{fid}__data">'
                f"{_json_script(chart.hover)}</script>")
    else:  # no inline SVG: the PNG, embedded
        import base64

        data = base64.b64encode(figure.files[0].read_bytes()).decode("ascii")
        body = f'<div class="plot"><img alt="{_attr(alt)}" src="data:image/png;base64,{data}">' \
               "</div>"
    return (f'<figure class="chart" id="{fid}" aria-labelledby="{fid}__h">'
            f'<h4 id="{fid}__h">Figure: {html.escape(figure.title)}</h4>{body}'
            f"<figcaption>{_text(figure.caption)}{files}</figcaption></figure>")


def _contents(sections: Sequence[Section], has_findings: bool) -> str:
    items = []
    if has_findings:
        items.append('<li><a href="#findings">What this report finds</a></li>')
    items.append('<li><a href="#about">About this report</a></li>')
    for section in sections:
        inner = []
        for figure in section.figures.get("", []):
            inner.append(f'<li><a href="#fig-{_attr(figure.key)}">Figure: '
                         f"{html.escape(figure.title)}</a></li>")
        for table in section.tables:
            inner.append(f'<li><a href="#{_attr(table.key)}">{html.escape(table.title)}</a>'
                         "</li>")
            inner += [f'<li><a href="#fig-{_attr(f.key)}">Figure: {html.escape(f.title)}</a>'
                      "</li>" for f in section.figures.get(table.key, [])]
        items.append(f'<li><a href="#{section.id}">{html.escape(section.title)}</a>'
                     + (f"<ol>{''.join(inner)}</ol>" if inner else "") + "</li>")
    return ('<nav class="contents" id="contents" aria-labelledby="contents__h">'
            f'<h2 id="contents__h">Contents</h2><ol>{"".join(items)}</ol></nav>')


def render_html(title: str, intro: list[str], figures: list[FigureEntry],
                tables: list[Table], findings: Sequence[str] = (),
                charts: dict[str, Chart] | None = None, base: Path | None = None) -> str:
    """The report as one HTML file: figures as inline SVG with their data where ``charts``
    has them (the PNG embedded otherwise); ``base``, the report's folder, links each figure's
    files (relative links, for when the page sits in its folder)."""
    charts = charts or {}
    sections = layout(figures, tables)
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
             f'<header id="top"><h1>{html.escape(title)}</h1></header>']
    if findings:
        parts.append('<section class="findings" id="findings" aria-labelledby="findings__h">'
                     '<h2 id="findings__h">What this report finds</h2><ol>'
                     + "".join(f"<li>{_text(line)}</li>" for line in findings)
                     + "</ol></section>")
    parts.append(_contents(sections, bool(findings)))
    parts.append('<main><section id="about" aria-labelledby="about__h">'
                 '<h2 id="about__h">About this report</h2>')
    parts += [f"<p>{_text(p)}</p>" for p in intro]
    if charts:
        parts.append('<p class="hint">Point at (or tap) a curve, bar or cell for its values; '
                     "click a legend entry to hide or show its series. Each figure's data is "
                     "in figures/ as CSV beside its PNG, and every table in report.json.</p>")
    parts.append("</section>")
    for section in sections:
        parts.append(f'<section id="{section.id}" aria-labelledby="{section.id}__h">'
                     f'<h2 id="{section.id}__h">{html.escape(section.title)}</h2>')
        parts += [_html_figure(f, charts.get(f.key), base) for f in section.figures.get("", [])]
        parts += [_html_table(t, section.figures.get(t.key, []), charts, base)
                  for t in section.tables]
        parts.append("</section>")
    parts.append("</main>")
    if charts:
        parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts)

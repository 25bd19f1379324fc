"""report.html as a page (viewport, findings, contents, unique ids, tables in their own box,
figures under their tables as inline SVG with their data, links, alt texts), the data behind
every figure (a CSV of what it draws, from the same reading as the page's hover data) and
report.json. The page in a real browser: tests/test_report_browser.py.

The default report is built once per session (:func:`built_report`, shared with the browser
tests)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from kvroof.plot.figure_data import figure_csv, figure_data, interactive_svg
from kvroof.report import ReportConfig, ReportResult, build_report
from kvroof.report.cells import cell_quantity, table_json
from kvroof.report.findings import findings
from kvroof.report.render import SECTIONS
from kvroof.report.tables import Table
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


@pytest.fixture(scope="session")
def built_report(tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    """The default report (serving simulation included), built once per test session."""
    return build_report(tmp_path_factory.mktemp("html") / "report", ReportConfig(), REG)


class _Page(HTMLParser):
    """Elements of a page: ids in order, their tags and attributes, links, and the text of
    scripts by id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.ids: list[str] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.elements.append((tag, values))
        if "id" in values:
            self.ids.append(values["id"])
        if tag == "script":
            self._script = values.get("id", "")
            self.scripts[self._script] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data
        else:
            self.text.append(data)


@pytest.fixture(scope="module")
def page(built_report: ReportResult) -> tuple[str, _Page]:
    text = built_report.html.read_text(encoding="utf-8")
    parser = _Page()
    parser.feed(text)
    return text, parser


def test_page_is_one_file_with_a_viewport(page: tuple[str, _Page],
                                          built_report: ReportResult) -> None:
    text, parsed = page
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    # nothing fetched: no external script, style sheet, image or font
    for tag, attrs in parsed.elements:
        assert not attrs.get("src", "").startswith(("http", "//", "figures/")), (tag, attrs)
        assert tag != "link", attrs
        if tag == "script":
            assert "src" not in attrs
    assert "@import" not in text and "url(http" not in text
    # smaller than the page of embedded PNGs it replaces (2.7 MB; about 1.5 MB now)
    assert built_report.html.stat().st_size < 2_700_000


def test_ids_are_unique_and_every_anchor_has_its_target(page: tuple[str, _Page]) -> None:
    _, parsed = page
    duplicates = {i for i in parsed.ids if parsed.ids.count(i) > 1}
    assert not duplicates
    ids = set(parsed.ids)
    anchors = [a["href"][1:] for tag, a in parsed.elements
               if tag == "a" and a.get("href", "").startswith("#")]
    assert len(anchors) > 20 and all(anchor in ids for anchor in anchors)
    # every reference inside an SVG (clip paths, markers) points into the page too
    text, _ = page
    for ref in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', text):
        assert (ref[0] or ref[1]) in ids


def test_contents_lists_every_section_table_and_figure(page: tuple[str, _Page],
                                                       built_report: ReportResult) -> None:
    text, _ = page
    nav = text.split('<nav class="contents"', 1)[1].split("</nav>", 1)[0]
    targets = re.findall(r'href="#([^"]+)"', nav)
    for table in built_report.tables:
        assert table.key in targets
    for figure in built_report.figures:
        assert f"fig-{figure.key}" in targets
    assert "findings" in targets and "about" in targets
    assert sum(t.startswith("sec-") for t in targets) >= 8


def test_findings_box_has_five_lines_from_the_tables(page: tuple[str, _Page],
                                                     built_report: ReportResult) -> None:
    text, _ = page
    box = text.split('id="findings"', 1)[1].split("</section>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", box)
    assert len(items) == 5
    assert built_report.findings == findings(built_report.tables)
    assert len(built_report.findings) == 5
    # each sentence quotes numbers that its table prints
    paper = next(t for t in built_report.tables if t.key == "paper_grid")
    assert any(cell.startswith(built_report.findings[0].split("κ_crit ")[1].split(" ")[0])
               for row in paper.rows for cell in row[1:])
    full = next(t for t in built_report.tables if t.key == "full_grid")
    high = built_report.findings[1].split(" to ")[1].split(" ")[0]
    assert any(row[1:].count(high) for row in full.rows)


def test_findings_follow_the_tables() -> None:
    """Other numbers in the tables, other sentences: nothing in the box is written by hand."""
    grid = Table("paper_grid", "kappa_crit grid, paper mode", ["model", "a + x", "b + y"],
                 [["M1", "2.5 (printed 2.4)", "10"], ["M2", "never", "40"]])
    full = Table("full_grid", "kappa_crit grid, full mode, request alone (T = 1,024, TP 2)",
                 ["model", "a + x", "b + y"],
                 [["M1", "5", "does not fit"], ["M2", "20", "80"]])
    lines = findings([grid, full])
    assert lines[0] == ("Paper mode (the paper's own inputs): κ_crit 2.5 to 40 over 3 model "
                        "and platform pairs; the 1 values the paper prints are matched within "
                        "4%.")
    assert lines[1] == ("Full mode, a request alone at T = 1,024: κ_crit 5 (M1 on a + x) to 80 "
                        "(M2 on b + y), a median 2x the paper-mode value; 1 of 4 pairs do not "
                        "fit in memory.")
    assert findings([]) == []


def test_tables_scroll_in_their_box_and_numbers_are_right_aligned(
        page: tuple[str, _Page]) -> None:
    text, _ = page
    assert text.count('<div class="scroll" role="region" tabindex="0"') == text.count("<table>")
    assert ".scroll { overflow-x: auto;" in text
    grid = text.split('id="paper_grid"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r"<th( class=\"num\")?>", grid)
    assert header[0] == "" and all(h for h in header[1:])  # model left, numbers right
    assert '<td class="num">21.9</td>' in grid
    workloads = text.split('id="workloads"', 1)[1].split("</table>", 1)[0]
    assert "<td>qwen3-235b-a22b, dgx-h100, TP 8</td>" in workloads


def test_each_figure_is_under_its_table(page: tuple[str, _Page],
                                        built_report: ReportResult) -> None:
    text, _ = page
    starts = {t.key: text.index(f'<section class="table-block" id="{t.key}"')
              for t in built_report.tables}
    ends = {key: text.index("</section>", start) for key, start in starts.items()}
    placed = {figure: table for _, _, _, places in SECTIONS for figure, table in places}
    for figure in built_report.figures:
        at = text.index(f'<figure class="chart" id="fig-{figure.key}"')
        table = placed[figure.key]
        assert starts[table] < at < ends[table], figure.key
        # no other table between the figure and its own
        assert not any(starts[table] < start < at for start in starts.values())


def test_figures_are_inline_svg_with_their_data_and_findings(
        page: tuple[str, _Page], built_report: ReportResult) -> None:
    text, parsed = page
    for figure in built_report.figures:
        block = text.split(f'<figure class="chart" id="fig-{figure.key}"', 1)[1].split(
            "</figure>", 1)[0]
        svg = re.search(r'<svg class="kv-chart" role="img" aria-label="([^"]+)"', block)
        assert svg, figure.key
        alt = svg.group(1)
        # the alt text states a finding (a number from the figure), not the title
        assert alt != figure.title and alt == " ".join(figure.alt.split()).replace(
            "&", "&amp;").replace('"', "&quot;").replace("'", "&#x27;").replace(
            "<", "&lt;").replace(">", "&gt;")
        assert re.search(r"\d", alt), (figure.key, alt)
        data = json.loads(parsed.scripts[f"fig-{figure.key}__data"])
        assert data["series"] and sum(len(s["rows"]) for s in data["series"]) > 0
        for series in data["series"]:
            for element in series["els"]:
                assert f'id="{element}"' in block, (figure.key, element)
        for entry in data["legend"]:
            for element in entry["els"]:
                assert f'id="{element}"' in block
        assert f'href="figures/{figure.key}.csv"' in block
        assert f'href="figures/{figure.key}.png"' in block
    assert "<script>\n(function () {" in text  # the page's one inline script


def test_sources_and_the_paper_are_links(page: tuple[str, _Page]) -> None:
    text, _ = page
    assert '<a href="https://arxiv.org/abs/2601.19910">arXiv 2601.19910</a>' in text
    assert '<a href="https://arxiv.org/abs/2505.09343">arXiv 2505.09343</a>' in text
    cases = text.split('id="validation_cases"', 1)[1].split("</section>", 1)[0]
    assert cases.count('<li><a href="https://') >= 5


def test_every_figure_has_a_csv_of_what_it_draws(built_report: ReportResult) -> None:
    for figure in built_report.figures:
        assert figure.data is not None and figure.data.name == f"{figure.key}.csv"
        assert figure.data.parent == figure.files[0].parent  # beside its PNG
        rows = list(csv.reader(figure.data.open(encoding="utf-8")))
        assert rows[0][:3] == ["panel", "series", "kind"] and len(rows) > 1, figure.key
    marker = json.loads((built_report.folder / ".kvroof-output").read_text())
    assert "report.json" in marker["files"] and "figures/roofline.csv" in marker["files"]


def test_report_json_has_every_table_in_si_units(built_report: ReportResult) -> None:
    assert built_report.json is not None
    data = json.loads(built_report.json.read_text(encoding="utf-8"))
    assert [t["key"] for t in data["tables"]] == [t.key for t in built_report.tables]
    assert data["findings"] == built_report.findings
    tables = {t["key"]: t for t in data["tables"]}
    for table in built_report.tables:
        assert len(tables[table.key]["rows"]) == len(table.rows)
        assert len(tables[table.key]["columns"]) == len(table.header)
    workloads = tables["workloads"]
    column = workloads["columns"].index("median TTFT layerwise (s)")
    printed = next(t for t in built_report.tables if t.key == "workloads").rows[0][column]
    assert printed.endswith(" ms")
    assert workloads["rows"][0][column] == pytest.approx(float(printed[:-3]) / 1e3)
    assert "requests (full) (fraction)" in workloads["columns"]
    what_if = tables["what_if"]
    assert "BW per GPU (B/s)" in what_if["columns"] and "B_kv (B)" in what_if["columns"]
    full = tables["full_grid"]["rows"]
    assert any(cell == "does not fit" for row in full for cell in row)  # text kept
    assert any(isinstance(cell, float) for row in full for cell in row[1:])
    assert tables["validation_cases"]["links"][0]["url"].startswith("https://")
    for figure in data["figures"]:
        assert (built_report.folder / figure["data"]).is_file()


def test_table_json_units() -> None:
    table = Table("t", "T", ["name", "time", "share", "bandwidth", "kappa", "mixed"],
                  [["a", "12 ms", "50.0%", "55 GB/s", "never", "3 s"],
                   ["b", "1.5 s", "-", "1,024 MB/s", "7.31 (printed 7.8)", "4 GB/s"],
                   ["c", "", "2%", "-", "12", "x"]])
    data = table_json(table)
    assert data["columns"] == ["name", "time (s)", "share (fraction)", "bandwidth (B/s)",
                               "kappa", "mixed"]
    assert data["rows"][0] == ["a", 0.012, 0.5, 55e9, "never", "3 s"]
    assert data["rows"][1] == ["b", 1.5, None, 1.024e9, "7.31 (printed 7.8)", "4 GB/s"]
    assert data["rows"][2] == ["c", None, 0.02, None, 12.0, "x"]
    assert cell_quantity("5.11e+03") == (5110.0, "")
    assert cell_quantity("13.7 (printed 14.3)") is None


def test_markdown_keeps_figures_under_their_tables(built_report: ReportResult) -> None:
    text = built_report.markdown.read_text(encoding="utf-8")
    assert text.index("### kappa_crit grid, paper mode") < text.index(
        "#### Figure: Offload roofline (paper mode)") < text.index("### kappa_crit grid, full")
    assert "## What this report finds" in text
    assert "[data (CSV)](figures/roofline.csv)" in text
    assert "|---|---:|" in text  # numbers right-aligned there too


# ---------------------------------------------------------------------------------------------
# What a figure draws, read from its artists: one source for the CSV and the hover data


def _sample_figure() -> Figure:
    fig = Figure(figsize=(8, 3), layout="constrained")
    left, middle, right = fig.subplots(1, 3)
    x = np.array([1.0, 10.0, 100.0, 0.0])
    left.plot(x, [2.0, 3.0, 4.0, 5.0], label="curve", color="C0", gid="curve")
    left.step([1.0, 2.0], [0.5, 1.0], where="post", color="C1")
    left.axvline(7.0, color="C0")  # the style of "curve": named after it, toggled with it
    left.axhline(3.5, color="0.4", label="reference")
    left.axvspan(1.0, 2.0, alpha=0.1, gid="region")
    left.fill_between([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [2.0, 3.0, 2.5], label="band")
    left.scatter([3.0], [3.0], gid="dot")
    left.set_xscale("log")
    left.set_xlabel("rate (GB/s)")
    left.set_ylabel("time (ms)")
    left.set_title("lines")
    left.legend()
    middle.bar([0, 1], [1.0, 2.0], label="compute", color="#009E73")
    middle.bar([0, 1], [0.5, 0.5], bottom=[1.0, 2.0], label="load", color="#D55E00")
    middle.set_xticks([0, 1], ["serial\nTP 1", "overlap"])
    middle.set_ylabel("TTFT (ms)")
    middle.set_title("bars")
    middle.legend()
    image = right.imshow(np.array([[0.1, 0.2], [0.3, np.nan]]), origin="lower")
    right.set_xticks([0, 1], ["1K", "2K"])
    right.set_yticks([0, 1], ["64", "128"])
    right.set_xlabel("cached tokens K (tokens)")
    bar = fig.colorbar(image, ax=right)
    bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    bar.set_label("share (%)")
    right.set_title("cells")
    return fig


def test_figure_data_reads_every_kind_of_artist() -> None:
    fig = _sample_figure()
    data = figure_data(fig)
    assert [p.title for p in data.panels] == ["lines", "bars", "cells"]  # no colorbar
    kinds = {s.name: (s.kind, s.rows) for s in data.series}
    # the point at x = 0 is not drawn on a log axis: not in the data
    assert kinds["curve"] == ("line", [(1.0, 2.0), (10.0, 3.0), (100.0, 4.0)])
    assert kinds["curve (vline)"] == ("vline", [(7.0,)])  # named after its legend entry
    assert kinds["reference"] == ("hline", [(3.5,)])
    assert kinds["region"] == ("band", [(1.0, 2.0)])
    assert kinds["band"] == ("area", [(1.0, 1.0, 2.0), (2.0, 1.0, 3.0), (3.0, 1.0, 2.5)])
    assert kinds["dot"] == ("points", [(3.0, 3.0)])
    assert kinds["lines: step 1"] == ("step", [(1.0, 0.5), (2.0, 1.0)])
    assert kinds["compute"] == ("bar", [("serial TP 1", 1.0), ("overlap", 2.0)])
    assert kinds["load"] == ("bar", [("serial TP 1", 0.5, 1.0), ("overlap", 0.5, 2.0)])
    # cells: tick labels as categories, values as the colorbar shows them, NaN not drawn
    assert kinds["share"] == ("cells", [("1K", "64", 10.0), ("2K", "64", 20.0),
                                        ("1K", "128", 30.0)])
    entries = {e.text.get_text(): [data.series[i].name for i in e.series] for e in data.legend}
    assert entries["curve"] == ["curve", "curve (vline)"]
    assert entries["compute"] == ["compute"]


def test_figure_csv_is_the_data_in_si_units() -> None:
    data = figure_data(_sample_figure())
    rows = list(csv.DictReader(io.StringIO(figure_csv(data))))
    curve = [r for r in rows if r["series"] == "curve"]
    assert [(float(r["rate (B/s)"]), float(r["time (s)"])) for r in curve] == [
        (1e9, 0.002), (1e10, 0.003), (1e11, 0.004)]
    load = [r for r in rows if r["series"] == "load"]
    assert load[0]["category"] == "serial TP 1"
    assert float(load[0]["TTFT (s)"]) == pytest.approx(0.5e-3)
    assert float(load[0]["TTFT, bar base (s)"]) == pytest.approx(1e-3)
    cells = [r for r in rows if r["kind"] == "cells"]
    assert [float(r["share (fraction)"]) for r in cells] == pytest.approx([0.1, 0.2, 0.3])
    assert sum(len(s.rows) for s in data.series) == len(rows)


def test_interactive_svg_ids_and_positions_match_the_drawing() -> None:
    fig = _sample_figure()
    gids = {id(a): a.get_gid() for a in fig.findobj()}
    data = figure_data(fig)
    svg, hover = interactive_svg(fig, data, "f__")
    assert {id(a): a.get_gid() for a in fig.findobj()} == gids  # the figure's own gids back
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert len(ids) == len(set(ids)) and all(i.startswith("f__") for i in ids)
    assert not svg.startswith("<?xml") and "<metadata>" not in svg
    assert re.match(r'<svg [^>]*viewBox="0 0 576 216"', svg)
    assert not re.match(r"<svg [^>]*\swidth=", svg)
    curve = next(s for s in hover["series"] if s["name"] == "curve")
    index = next(i for i, s in enumerate(data.series) if s.name == "curve")
    assert curve["els"] == [f"f__s{index}"]
    first = re.search(rf'<g id="{curve["els"][0]}">\s*<path d="M ([\d.]+) ([\d.]+)', svg)
    assert first is not None
    assert curve["rows"][0][:2] == pytest.approx([float(first.group(1)), float(first.group(2))],
                                                  abs=0.06)
    assert curve["rows"][0][2:] == [1.0, 2.0]
    names = [hover["columns"][c] for c in curve["cols"]]
    assert names == [["rate", "GB/s"], ["time", "ms"]]
    bars = next(s for s in hover["series"] if s["name"] == "compute")
    assert len(bars["els"]) == 2 and bars["rows"][0][4:] == ["serial TP 1", 1.0]
    legend = next(e for e in hover["legend"] if e["label"] == "curve")
    assert legend["els"] == [f"f__l{hover['legend'].index(legend)}-text",
                             f"f__l{hover['legend'].index(legend)}-mark"]
    for element in [*legend["els"], *curve["els"]]:
        assert f'id="{element}"' in svg
    json.dumps(hover, allow_nan=False)  # plain JSON


def test_figure_data_of_every_report_figure_is_consistent(built_report: ReportResult,
                                                          page: tuple[str, _Page]) -> None:
    """The page's hover rows are rows of the CSV (one reading of the figure for both)."""
    _, parsed = page
    for figure in built_report.figures:
        assert figure.data is not None
        rows = list(csv.reader(figure.data.open(encoding="utf-8")))
        names = {row[1] for row in rows[1:]}
        hover: dict[str, Any] = json.loads(parsed.scripts[f"fig-{figure.key}__data"])
        for series in hover["series"]:
            if series["rows"]:
                assert series["name"] in names, (figure.key, series["name"])
            for row in series["rows"]:
                assert all(isinstance(v, str) or math.isfinite(v) for v in row)

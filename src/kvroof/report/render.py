"""Markdown and self-contained HTML for the report."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from kvroof.report.tables import Table

__all__ = ["FigureEntry", "render_html", "render_markdown"]


@dataclass(frozen=True)
class FigureEntry:
    """A written figure: its files (PNG first) and what it shows."""

    key: str
    title: str
    files: list[Path]
    caption: str


def _md_table(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join(table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in table.rows]
    lines += [""] + [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def render_markdown(title: str, intro: list[str], figures: list[FigureEntry],
                    tables: list[Table], base: Path) -> str:
    """The report as Markdown with relative image links."""
    parts = [f"# {title}", "", *intro, "", "## Tables", ""]
    parts += [_md_table(table) for table in tables]
    parts += ["## Figures", ""]
    for figure in figures:
        png = figure.files[0].relative_to(base)
        others = ", ".join(f"[{f.suffix[1:].upper()}]({f.relative_to(base)})"
                           for f in figure.files[1:])
        parts += [f"### {figure.title}", "", f"![{figure.title}]({png})", "",
                  figure.caption + (f" Also as {others}." if others else ""), ""]
    return "\n".join(parts)


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; max-width: 1150px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: left; }
th { background: #f2f2f2; }
img { max-width: 100%; border: 1px solid #eee; }
.note { font-size: 0.85em; color: #444; }
figcaption { font-size: 0.9em; color: #333; margin-bottom: 1.5em; }
"""


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in table.rows
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in table.notes)
    return (f'<h3 id="{table.key}">{html.escape(table.title)}</h3>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f'<ul class="note">{notes}</ul>')


def render_html(title: str, intro: list[str], figures: list[FigureEntry],
                tables: list[Table]) -> str:
    """The report as one HTML file with every PNG embedded (base64)."""
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts += [f"<p>{html.escape(p)}</p>" for p in intro]
    parts.append("<h2>Tables</h2>")
    parts += [_html_table(t) for t in tables]
    parts.append("<h2>Figures</h2>")
    for figure in figures:
        data = base64.b64encode(figure.files[0].read_bytes()).decode("ascii")
        parts.append(
            f'<figure id="{figure.key}"><h3>{html.escape(figure.title)}</h3>'
            f'<img alt="{html.escape(figure.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)

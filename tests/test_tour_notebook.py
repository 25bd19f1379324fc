"""The tour notebook shows what a notebook user gets (issue 23, item 11): the HTML reprs of a
result grid, the loaded trace and a simulation result, their ``to_frame()`` and ``explore()``
(tests/test_examples.py runs it)."""

from __future__ import annotations

import json
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "kvroof_tour.ipynb"


def code_cells() -> list[str]:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]).strip() for cell in cells if cell["cell_type"] == "code"]


def last_lines() -> list[str]:
    return [source.splitlines()[-1] for source in code_cells() if source]


def test_the_tour_shows_html_reprs() -> None:
    last = last_lines()
    assert "grid" in last  # a TTFT grid
    assert "trace" in last  # the loaded RequestTrace
    assert 'served["fifo"]' in last  # a SimResult


def test_the_tour_shows_frames_and_explore() -> None:
    sources = "\n".join(code_cells())
    assert '.to_frame("requests")' in sources and "trace.to_frame()" in sources
    assert "kvroof.explore(" in sources and last_lines()[-1] == "explorer"
    ids = [cell.get("id") for cell in json.loads(NOTEBOOK.read_text())["cells"]]
    assert None not in ids and len(set(ids)) == len(ids)  # nbformat 4.5 cell ids

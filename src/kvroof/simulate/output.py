"""A simulation's files: per-request and per-iteration CSVs (column names with their units, as
``SimResult.to_frame()`` has them) and a JSON summary.

Each file is written whole or not at all (:func:`kvroof.outputs.write_text`: a temporary file
renamed into place), so an interrupted run never leaves half a CSV; the command line builds its
output folder apart and moves it in when complete (:func:`kvroof.outputs.staged_folder`), which
never touches files kvroof did not write there.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.jsonsafe import json_safe
from kvroof.outputs import write_text
from kvroof.simulate.metrics import SimResult
from kvroof.simulate.result_frames import frame_columns

__all__ = ["csv_text", "result_json", "rows_csv_text", "write_result"]


def _cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        number = float(value)
        if math.isnan(number):
            return ""
        if number.is_integer() and abs(number) < 1e15:
            return str(int(number))
        return repr(number)
    if isinstance(value, int | np.integer):
        return str(int(value))
    text = str(value)
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(columns: Mapping[str, NDArray[Any]]) -> str:
    """CSV of equal-length columns (empty cell for NaN)."""
    names = list(columns)
    out = io.StringIO()
    out.write(",".join(names) + "\n")
    arrays = [columns[name].tolist() for name in names]
    for row in zip(*arrays, strict=True):
        out.write(",".join(_cell(v) for v in row) + "\n")
    return out.getvalue()


def rows_csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV of dict rows (the union of their keys, in first-seen order)."""
    names: list[str] = []
    for row in rows:
        names += [key for key in row if key not in names]
    out = io.StringIO()
    out.write(",".join(names) + "\n")
    for row in rows:
        out.write(",".join(_cell(row.get(name, "")) for name in names) + "\n")
    return out.getvalue()


def result_json(result: SimResult) -> dict[str, Any]:
    """The summary, settings, replicas and notes of a simulation (JSON-ready)."""
    safe: dict[str, Any] = json_safe({
        "kind": "simulation", "label": result.label, "replicas": result.replicas,
        "settings": result.settings, "notes": result.notes,
        "semantics": dict(result.semantics), "summary": result.summary})
    return safe


def write_result(folder: str | Path, result: SimResult, prefix: str = "") -> list[Path]:
    """``PREFIXrequests.csv``, ``PREFIXiterations.csv`` and ``PREFIXsummary.json`` in
    ``folder``; returns their paths. The CSV headers carry units as ``to_frame()``'s columns
    do (``arrival_s``, ``ttft_s``, ``hbm_hit_tokens``, ``duration_s``:
    :mod:`kvroof.simulate.result_frames`)."""
    base = Path(folder)
    paths = [base / f"{prefix}requests.csv", base / f"{prefix}iterations.csv",
             base / f"{prefix}summary.json"]
    write_text(paths[0], csv_text(frame_columns(result.requests, "requests")))
    write_text(paths[1], csv_text(frame_columns(result.iterations, "iterations")))
    write_text(paths[2], json.dumps(result_json(result), indent=2) + "\n")
    return paths

"""Predicted against measured for every validation case: log-log, the line y = x and the band
within a factor 2, coloured by quantity; bandwidths and times on their own panels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from kvroof.plot.style import color, new_figure, source_line, style
from kvroof.units import Kind
from kvroof.validation.cases import QUANTITIES, UNIT_KINDS
from kvroof.validation.run import Mode, ValidationResult

__all__ = ["validation_figure"]

_MARKERS = ("o", "s", "D", "^", "v", "P")


def _panel(ax: Any, points: list[tuple[float, float, str, str, bool]], quantities: Sequence[str],
           scale: float, unit: str, hollow: list[tuple[float, float, str]]) -> None:
    values = [v for p in points for v in p[:2]] + [v for h in hollow for v in h[:2]]
    low, high = min(values) / 2.5, max(values) * 2.5
    line = np.geomspace(low, high, 50)
    ax.fill_between(line * scale, line * scale / 2, line * scale * 2, color="0.85", alpha=0.5,
                    linewidth=0, label="within 2x", gid="band:2x")
    ax.plot(line * scale, line * scale, color="black", linewidth=0.8, label="y = x", gid="y=x")
    # markers as Line2D (markersize in points = sqrt of scatter's area; zorder 1 as a scatter's):
    # one artist per case
    # keeps its gid, at a fraction of a PathCollection's cost to build and draw
    hollow_size, size = math.sqrt(22), math.sqrt(26)
    for quantity in dict.fromkeys(h[2] for h in hollow):
        index = QUANTITIES.index(quantity)
        mine_before = np.array([h[:2] for h in hollow if h[2] == quantity]) * scale
        ax.plot(mine_before[:, 0], mine_before[:, 1], linestyle="none",
                marker=_MARKERS[index % len(_MARKERS)], markersize=hollow_size,
                markerfacecolor="none", markeredgecolor=color(index), markeredgewidth=0.7,
                alpha=0.6, zorder=1)
    for quantity in quantities:
        index = QUANTITIES.index(quantity)
        mine = [p for p in points if p[2] == quantity]
        if not mine:
            continue
        style = {"linestyle": "none", "marker": _MARKERS[index % len(_MARKERS)],
                 "markersize": size, "color": color(index), "markeredgecolor": "black",
                 "markeredgewidth": 0.3, "zorder": 1}
        for measured, predicted, _, case_id, counted in mine:
            ax.plot([measured * scale], [predicted * scale], alpha=1.0 if counted else 0.35,
                    gid=f"case:{case_id}", **style)
        ax.plot([], [], label=quantity.replace("_", " "), **style)
    if hollow:
        ax.plot([], [], linestyle="none", marker="o", markersize=hollow_size,
                markerfacecolor="none", markeredgecolor="0.4", markeredgewidth=0.7,
                label="before engine profiles")
    ax.set_xscale("log")
    ax.set_yscale("log")
    # equal decades on both axes by widening the data limits (the band and y = x span
    # [low, high]), not by shrinking the box: a box that constrained layout shrinks for the
    # aspect left the titles cut at the top of the saved PNG
    ax.margins(0)
    ax.update_datalim([(low * scale, low * scale), (high * scale, high * scale)])
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    ax.legend(loc="upper left", frameon=False, fontsize=7)


def validation_figure(result: ValidationResult, mode: Mode = "after",
                      show_before: bool = True) -> Figure:
    """Every case predicted in ``mode`` against its measurement (filled markers, ``gid``
    ``"case:<id>"``; faint where the statistics leave the case out), with the predictions before
    engine profiles as hollow markers when ``show_before``. Bandwidths (GB/s) on the left, times
    (seconds) on the right; kappa_crit cases, if any, with the times' panel left out of scale."""
    kinds = {"bandwidth": Kind.BANDWIDTH, "time": Kind.TIME}
    panels: dict[str, list[tuple[float, float, str, str, bool]]] = {k: [] for k in kinds}
    before: dict[str, list[tuple[float, float, str]]] = {k: [] for k in kinds}
    for item in result.results:
        kind = UNIT_KINDS[item.case.quantity]
        panel = "bandwidth" if kind is Kind.BANDWIDTH else "time" if kind is Kind.TIME else None
        if panel is None:
            continue
        value = item.prediction(mode).value
        if value is not None:
            panels[panel].append((item.case.measured, value, item.case.quantity, item.case.id,
                                  item.in_statistics))
        old = item.before.value
        if show_before and mode != "before" and old is not None:
            before[panel].append((item.case.measured, old, item.case.quantity))
    used = [k for k in kinds if panels[k]]
    with style():
        fig, axes = new_figure(ncols=max(1, len(used)), width=5.0, height=5.0)
        for ax, panel in zip(axes, used, strict=False):
            quantities = [q for q in QUANTITIES if any(p[2] == q for p in panels[panel])]
            scale, unit = (1e-9, "GB/s") if panel == "bandwidth" else (1.0, "s")
            _panel(ax, panels[panel], quantities, scale, unit, before[panel])
            ax.set_title("link bandwidth" if panel == "bandwidth" else "times")
        label = {"before": "before engine profiles", "after": "with engine profiles",
                 "held_out": "held out (refitted without each case's source)"}[mode]
        source_line(fig, f"{len(result.results)} published measurements (validation/); filled: "
                         f"{label}" + ("; hollow: before engine profiles" if show_before
                                       and mode != "before" else "")
                         + "; faint: left out of the statistics")
    return fig

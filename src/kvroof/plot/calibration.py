"""Measured against predicted: TTFT and P_OH over the measured (T, K) grid, and link bandwidth
against transfer size with the fitted latency + bandwidth line and the link's peak."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from kvroof.analysis.calibration import CalibrationResult
from kvroof.cost.timing import ttft
from kvroof.measure.link import fit_latency_bandwidth
from kvroof.measure.results import LinkRow, PrefillRow, Results
from kvroof.plot.style import color, new_figure, source_line, style

__all__ = ["link_figure", "prediction_figure"]


def prediction_figure(result: CalibrationResult, results: Results) -> Figure:
    """Left: measured against predicted serial TTFT for every row (``gid`` ``"ttft"``), with
    y = x. Right: P_OH against K per T, measured (markers) and predicted (lines, ``gid``
    ``"p_oh:<T>"``), with P_OH = 1 marked."""
    rows = results.typed(PrefillRow)
    dep = result.stack
    t = np.array([r.T for r in rows], dtype=float)
    k = np.array([r.K for r in rows], dtype=float)
    predicted = ttft(dep, t, k, "serial")
    with style():
        fig, (left, right) = new_figure(ncols=2, width=5.0, height=4.2)
        measured = np.array([r.serial_s for r in rows])
        left.scatter(measured * 1e3, np.asarray(predicted.ttft) * 1e3, s=18, color=color(0),
                     edgecolor="black", linewidth=0.3, gid="ttft")
        low = min(measured.min(), float(np.min(predicted.ttft))) * 1e3 / 1.5
        high = max(measured.max(), float(np.max(predicted.ttft))) * 1e3 * 1.5
        left.plot([low, high], [low, high], color="0.4", linestyle="--", linewidth=0.9)
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("measured serial TTFT (ms)")
        left.set_ylabel("predicted serial TTFT (ms)")
        error = next((e for e in result.errors if e.quantity == "serial TTFT"), None)
        left.set_title("TTFT: measured vs predicted"
                       + (f" (MAPE {100 * error.mape:.1f}%)" if error else ""))
        right.set_xscale("log")
        right.set_yscale("log")
        for index, tokens in enumerate(sorted({r.T for r in rows})):
            points = sorted((r.K, r.p_oh) for r in rows if tokens == r.T)
            ks = np.array([p[0] for p in points], dtype=float)
            right.scatter(ks, [p[1] for p in points], color=color(index), s=18, zorder=3)
            grid = np.geomspace(max(ks.min(), 1.0), ks.max(), 100)
            model = ttft(dep, float(tokens), grid)
            right.plot(grid, np.asarray(model.p_oh), color=color(index), linewidth=1.4,
                       label=f"T = {tokens}", gid=f"p_oh:{tokens}")
        right.axhline(1.0, color="black", linewidth=1.0, linestyle=":", gid="p_oh=1")
        right.set_xlabel("cached tokens K (tokens)")
        right.set_ylabel("P_OH = transfer / compute (ratio)")
        right.set_title("P_OH: measured (points) and predicted (lines)")
        right.legend(frameon=False, fontsize=7)
        source_line(fig, f"{result.system.name}: {rows[0].layers_run}-layer synthetic stack of "
                         f"{rows[0].model}; {results.path}")
    return fig


def link_figure(results: Results, peak_bandwidth: float | None = None) -> Figure:
    """Bandwidth against transfer size for single copies (one curve per direction and memory
    kind, ``gid`` ``"link:<direction>:<pinned|pageable>"``), the fitted latency + bandwidth
    line (dashed) and the link's peak (``gid`` ``"peak"``)."""
    rows = [r for r in results.typed(LinkRow) if r.pattern == "single"]
    with style():
        fig, (ax,) = new_figure(width=6.4, height=4.2)
        groups = sorted({(r.direction, r.pinned) for r in rows})
        for index, (direction, pinned) in enumerate(groups):
            points = sorted((r.bytes_total, r.median_s) for r in rows
                            if (r.direction, r.pinned) == (direction, pinned))
            size = np.array([p[0] for p in points], dtype=float)
            seconds = np.array([p[1] for p in points], dtype=float)
            kind = "pinned" if pinned else "pageable"
            ax.plot(size, size / seconds / 1e9, marker="o", markersize=3, color=color(index),
                    label=f"{direction} {kind}", gid=f"link:{direction}:{kind}")
            if len(size) >= 2:
                fit = fit_latency_bandwidth(size, seconds)
                model = size / np.asarray(fit.predict(size)) / 1e9  # type: ignore[arg-type]
                ax.plot(size, model, color=color(index), linestyle="--", linewidth=0.9,
                        label=f"fit: {fit.bandwidth / 1e9:.3g} GB/s, "
                              f"{fit.latency_s * 1e6:.3g} us per copy")
        if peak_bandwidth is not None:
            ax.axhline(peak_bandwidth / 1e9, color="black", linewidth=1.0, gid="peak",
                       label=f"link peak {peak_bandwidth / 1e9:.3g} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("transfer size (bytes)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_title("Copy bandwidth against transfer size")
        ax.legend(frameon=False, fontsize=7)
        source_line(fig, str(results.path))
    return fig


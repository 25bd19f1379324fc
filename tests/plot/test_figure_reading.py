"""Figures as a reader of a systems paper reads them (issue 23, items 1 to 6), each property
checked on the figure's artists and the Agg renderer's extents, never on pixels:

1. the paper-mode roofline is the paper's Fig. 4: its inputs, its kappa_crit, the printed values
   in the legend, one sloped roof per link;
2. the full-mode roofline reads as a roofline: new tokens/s by default, flat then sloped,
   1-2-5 log labels, what does not fit named in one line;
3. nothing clipped, nothing covered (:mod:`tests.plot.layout`, on every figure);
4. one colour meaning: green and vermillion for the regimes only, a fixed colour per model and
   per accelerator;
5. simulation figures: coinciding curves said, time in minutes or hours, power from 0 with the
   idle baseline, compared runs in one figure, a warning when the offered rate is not served;
6. the KV-format bars on a linear axis (or dots on a log one).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text

from kvroof.analysis.paper import PAPER_COMPUTE, PAPER_KAPPA_CRIT, PAPER_LINK_BANDWIDTH
from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_paper, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.roofline import offload_roofline
from kvroof.plot import (
    ceilings_figure,
    families_figure,
    kappa_vs_t_figure,
    offload_roofline_figure,
    overhead_figure,
    ttft_breakdown_figure,
    validation_figure,
    what_if_figure,
    workload_figure,
)
from kvroof.plot.fitting import NotDrawnWarning
from kvroof.plot.simulate import (
    coinciding,
    latency_vs_rps_figure,
    saturation,
    timeline_figure,
    ttft_cdf_figure,
)
from kvroof.plot.style import (
    COMPUTE_SHADE,
    TRANSFER_SHADE,
    accelerator_color,
    model_color,
    new_figure,
    source_line,
    style,
)
from kvroof.specs.registry import Registry
from tests.plot.layout import draw, problems

REG = Registry(use_env=False)
QWEN = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG,
                  bandwidth_source="sustained")
DEEPSEEK = deployment("deepseek-v3", system="hgx-h200", tp=8, registry=REG,
                      bandwidth_source="sustained")
PAPER_SETTINGS = {"tp": 1, "bandwidth_source": "peak"}  # what the report passes in paper mode


def by_gid(fig: Figure, prefix: str) -> list[Any]:
    return [a for a in fig.findobj() if str(a.get_gid() or "").startswith(prefix)]


def legend_texts(fig: Figure) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return [t.get_text() for legend in [*legends, *fig.legends] for t in legend.get_texts()]


def footer(fig: Figure) -> str:
    return " ".join(t.get_text() for t in fig.texts).replace("\n", " ")


# -- 1. the paper-mode roofline is the paper's figure --------------------------------------


def paper_value(model: str, gpu: str, link: str) -> float:
    """kappa_crit from the paper's own inputs, as the report's paper-mode table computes it."""
    spec = REG.model(model)
    active = spec.published.active if spec.published else 0.0
    return float(kappa_paper(active, kv_bytes_per_token(spec), PAPER_LINK_BANDWIDTH[link],
                             PAPER_COMPUTE[gpu]).kappa_crit)


def test_paper_roofline_uses_the_papers_inputs_and_shows_its_kappa_crit() -> None:
    fig = offload_roofline_figure(["qwen3-235b-a22b", "deepseek-v3"], mode="paper",
                                  registry=REG, **PAPER_SETTINGS)
    qwen, deepseek = fig.axes[0], fig.axes[1]
    (ridge,) = [line for line in qwen.get_lines()
                if line.get_gid() == "kappa-crit:h100-sxm+pcie-gen5-x16"]
    expected = paper_value("qwen3-235b-a22b", "h100", "pcie5")
    assert ridge.get_xdata()[0] == pytest.approx(expected)
    assert round(expected, 1) == 7.3  # the paper's 7.8 is 0.23 x 34, its rounded factors
    assert PAPER_KAPPA_CRIT[("qwen3-235b-a22b", "h100-pcie5")] == 7.8
    labels = [t.get_text() for t in qwen.get_legend().get_texts()]
    assert "h100-sxm + pcie-gen5-x16: 7.31 (paper: 7.8)" in labels
    # the ridge sits on the flat roof at the paper's C for H100 (2,000 TFLOP/s)
    assert ridge.get_ydata()[0] == pytest.approx(PAPER_COMPUTE["h100"] / 1e12)
    (ridge,) = [line for line in deepseek.get_lines()
                if line.get_gid() == "kappa-crit:h100-sxm+pcie-gen5-x16"]
    assert ridge.get_xdata()[0] == pytest.approx(paper_value("deepseek-v3", "h100", "pcie5"))
    assert round(float(ridge.get_xdata()[0]), 1) == 33.7  # the review: 67.1 with dense peaks
    assert "paper's C and BW" in qwen.get_title()


def test_paper_roofline_draws_each_links_sloped_roof_once() -> None:
    """Above its ridge every curve is kappa_M x BW / kappa_ratio, the same for every GPU on a
    link: one grey slope per link (not three coloured ones on top of each other), one flat roof
    per GPU, every ridge on both."""
    fig = offload_roofline_figure(["qwen3-235b-a22b"], mode="paper", registry=REG,
                                  workload_medians=None, **PAPER_SETTINGS)
    ax = fig.axes[0]
    slopes = {line.get_gid(): line for line in ax.get_lines()
              if str(line.get_gid()).startswith("slope:")}
    assert set(slopes) == {"slope:pcie-gen4-x16", "slope:pcie-gen5-x16"}
    roofs = {line.get_gid() for line in ax.get_lines() if str(line.get_gid()).startswith("roof:")}
    assert roofs == {"roof:a100-sxm", "roof:h100-sxm", "roof:b200"}
    for line in slopes.values():  # neutral: not an accelerator's colour
        assert to_hex(line.get_color()) not in {to_hex(accelerator_color(a))
                                                for a in ("a100-sxm", "h100-sxm", "b200")}
    for ridge in [line for line in ax.get_lines()
                  if str(line.get_gid()).startswith("kappa-crit:")]:
        accelerator, link = ridge.get_gid().removeprefix("kappa-crit:").split("+")
        crit, top = ridge.get_xdata()[0], ridge.get_ydata()[0]
        x, y = slopes[f"slope:{link}"].get_data()
        assert np.interp(np.log(crit), np.log(x), np.log(y)) == pytest.approx(math.log(top))
        gpu = {"a100-sxm": "a100", "h100-sxm": "h100", "b200": "b200"}[accelerator]
        assert top == pytest.approx(PAPER_COMPUTE[gpu] / 1e12)


def test_the_dense_peak_panel_stays_beside_it_named_as_such() -> None:
    fig = offload_roofline_figure(["qwen3-235b-a22b"], [("h100-sxm", "pcie-gen5-x16")],
                                  mode="paper", peaks="both", registry=REG, **PAPER_SETTINGS)
    paper, dense = fig.axes[:2]
    assert "paper's C and BW" in paper.get_title() and "dense spec peaks" in dense.get_title()
    dep = deployment("qwen3-235b-a22b", accelerator="h100-sxm", link="pcie-gen5-x16",
                     registry=REG, **PAPER_SETTINGS)
    (ridge,) = [line for line in dense.get_lines()
                if str(line.get_gid()).startswith("kappa-crit:")]
    assert ridge.get_xdata()[0] == pytest.approx(float(kappa_paper_for(dep).kappa_crit))


# -- 2. the full-mode roofline reads as a roofline -------------------------------------------


def test_full_roofline_is_tokens_per_second_flat_then_sloped() -> None:
    # at the roofline, whose compute barely grows with the cached tokens while compute-bound
    # (flat); kernel mode's attention over K grows faster (the tests below use the default)
    hardware = [("h100-sxm", "pcie-gen5-x16"), ("b200", "pcie-gen4-x16")]
    fig = offload_roofline_figure(["qwen3-235b-a22b"], hardware, registry=REG, tp=8,
                                  compute_model="roofline")
    ax = fig.axes[0]
    assert "tokens/s" in ax.get_ylabel()
    for accelerator, link in hardware:
        (curve,) = [line for line in ax.get_lines()
                    if line.get_gid() == f"curve:{accelerator}+{link}"]
        x, y = (np.asarray(v, dtype=float) for v in curve.get_data())
        dep = deployment("qwen3-235b-a22b", accelerator=accelerator, link=link, registry=REG,
                         tp=8, compute_model="roofline")
        np.testing.assert_allclose(y, offload_roofline(dep, x, 128.0).tokens_per_second)
        assert np.all(np.diff(y) <= 1e-9 * y[:-1])  # never rises
        assert y[0] == pytest.approx(y[x < 1.0][-1], rel=0.02)  # flat while compute-bound
        far = x > 1e3  # sloped: 1 / kappa_ratio once transfer-bound
        slope = np.polyfit(np.log(x[far]), np.log(y[far]), 1)[0]
        assert slope == pytest.approx(-1.0, abs=0.05)


def test_full_roofline_y_ticks_are_labelled_at_1_2_5() -> None:
    fig = offload_roofline_figure(["qwen3-235b-a22b"], [("b200", "pcie-gen5-x16")],
                                  registry=REG, tp=8)
    draw(fig)
    ax = fig.axes[0]
    low, high = sorted(ax.get_ylim())
    shown = [(tick.get_loc(), tick.label1.get_text()) for tick in ax.yaxis._update_ticks()
             if tick.label1.get_visible() and tick.label1.get_text()
             and low <= tick.get_loc() <= high]
    assert len(shown) >= 6
    mantissas = {round(value / 10 ** math.floor(math.log10(value) + 1e-9), 6)
                 for value, _ in shown}
    assert mantissas == {1.0, 2.0, 5.0}
    texts = [text for _, text in shown]
    # written the same way: all plain numbers (no "10²" beside "200")
    assert all("\u00d7" not in t and not any(c in t for c in "\u00b2\u00b3\u2074") for t in texts)
    assert all(float(t.replace(",", "")) == pytest.approx(v) for v, t in shown)


def test_what_does_not_fit_is_one_line_not_legend_entries() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDrawnWarning)
        fig = offload_roofline_figure(["qwen3-235b-a22b", "deepseek-v3"], registry=REG, tp=8)
    assert not any("does not fit" in text for text in legend_texts(fig))
    text = footer(fig)
    assert text.count("not drawn") == 1  # Qwen3 fits everywhere at TP 8, DeepSeek-V3 not
    assert ("DeepSeek-V3: not drawn, the weights do not fit at TP 8: a100-sxm + "
            "pcie-gen4-x16, a100-sxm + pcie-gen5-x16, h100-sxm + pcie-gen4-x16, h100-sxm + "
            "pcie-gen5-x16") in text
    assert len(by_gid(fig, "does-not-fit:")) == 4  # still there for `kvroof plot`'s warning


def test_a_chosen_ratio_is_marked_and_labelled_above_the_axes() -> None:
    """``explore()`` can mark its K/T; a figure where no K is transfer-bound names no
    transfer-bound region."""
    fig = offload_roofline_figure(["llama-3.1-70b"], ["dgx-h100"], new_tokens=1e6, tp=8,
                                  registry=REG, mark_ratio=50.0)
    (line,) = by_gid(fig, "mark:chosen")
    assert line.get_xdata()[0] == 50.0
    assert by_gid(fig, "reference-label:chosen")
    assert not by_gid(fig, "region-label:transfer-bound") and not by_gid(
        fig, "region:transfer-bound")
    assert problems(fig) == []


def test_the_same_hardware_named_twice_is_drawn_once() -> None:
    fig = offload_roofline_figure(["llama-3.1-8b"], [("h100-sxm", "pcie-gen5-x16"),
                                                     ("h100-sxm", "pcie-gen5-x16")],
                                  registry=REG)
    assert len(by_gid(fig, "curve:h100-sxm+pcie-gen5-x16")) == 1
    assert len(legend_texts(fig)) == 1


# -- the figures, for the layout and colour checks ------------------------------------------


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    """Simulations: the default report's six policies (which coincide), three at 1.5x on two
    replicas (saturated), and one 200x slower (a 16-hour run)."""
    from kvroof.simulate import SimSettings, simulate
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    trace = load_requests(MOONCAKE_SLICE)
    dep = deployment("llama-3.1-70b", system="paper-testbed", tp=8, registry=REG)
    default = {f"{s} / {p}": simulate(trace, [dep] * 4, SimSettings(scheduler=s, cache_policy=p),
                                      registry=REG)
               for s in ("fifo", "utilization-aware") for p in ("load", "recompute", "split")}
    fast = trace.with_arrivals(trace.arrival_time / 1.5)
    overloaded = {p: simulate(fast, [dep] * 2, SimSettings(cache_policy=p), registry=REG)
                  for p in ("load", "recompute")}
    fast_ok = simulate(fast, [dep] * 4, SimSettings(), registry=REG)
    slow = simulate(trace.with_arrivals(trace.arrival_time * 200), [dep], SimSettings(),
                    registry=REG)
    return {"default": default, "overloaded": overloaded, "fast_ok": fast_ok, "slow": slow,
            "idle": float(dep.accelerator.idle_power)}


def _families() -> Figure:
    from kvroof.analysis.families import FAMILIES

    deps = [deployment(f.model, system="hgx-h200", tp=8, registry=REG) for f in FAMILIES]
    others = [deployment(f.model, system="gh200", tp=1, registry=REG) for f in FAMILIES[2:3]]
    return families_figure(FAMILIES, deps, [*([None] * 2), *others, *([None] * 4)])


def _workloads() -> Figure:
    from kvroof.workload.synth import synthesize

    chat = [synthesize(name, 3000, seed=1) for name in ("sharegpt", "narrativeqa", "docfinqa")]
    other = deployment("qwen3-235b-a22b", system="hgx-h200", tp=8, registry=REG)
    return workload_figure(chat, [QWEN, other])


def _validation() -> Figure:
    from kvroof.validation.run import validate

    return validation_figure(validate(registry=REG))


def _sweep() -> Figure:
    rows = []
    for rps in (1.0, 2.0, 3.0, 4.0):
        for scheduler in ("fifo", "utilization-aware"):
            for policy in ("load", "recompute"):
                base = rps * (1.3 if policy == "recompute" else 1.0)
                rows.append({"rps": rps, "scheduler": scheduler, "cache_policy": policy,
                             "ttft_s_p50": base, "ttft_s_p99": 8 * base})
    return latency_vs_rps_figure(rows, ["scheduler", "cache_policy"])


FIGURES: dict[str, Callable[[dict[str, Any]], Figure]] = {
    "roofline-full": lambda _: offload_roofline_figure(
        ["qwen3-235b-a22b", "deepseek-v3"], registry=REG, tp=8, bandwidth_source="sustained"),
    "roofline-paper": lambda _: offload_roofline_figure(
        ["qwen3-235b-a22b", "deepseek-v3"], mode="paper", registry=REG, **PAPER_SETTINGS),
    "roofline-one-panel": lambda _: offload_roofline_figure(
        ["llama-3.1-8b"], [("h100-sxm", "pcie-gen5-x16"), ("gh200", "nvlink-c2c")],
        registry=REG),
    "roofline-flops": lambda _: offload_roofline_figure(
        ["qwen3-235b-a22b"], registry=REG, tp=8, y="flops"),
    "ceilings": lambda _: ceilings_figure(QWEN),
    "kappa-vs-t": lambda _: kappa_vs_t_figure([QWEN, DEEPSEEK], iteration_tokens=8192),
    "families": lambda _: _families(),
    "overhead": lambda _: overhead_figure(QWEN, metric="p_oh"),
    "what-if": lambda _: what_if_figure([QWEN, DEEPSEEK], registry=REG),
    "breakdown": lambda _: ttft_breakdown_figure(
        deployment("llama-3.1-8b", system="dgx-h100", registry=REG), tps=(1, 8)),
    "workloads": lambda _: _workloads(),
    "validation": lambda _: _validation(),
    "ttft-cdf": lambda r: ttft_cdf_figure(r["default"], "mooncake"),
    "ttft-cdf-saturated": lambda r: ttft_cdf_figure(r["overloaded"]),
    "timeline": lambda r: timeline_figure(next(iter(r["default"].values())), note="fifo"),
    "timeline-compared": lambda r: timeline_figure(r["overloaded"]),
    "timeline-16h": lambda r: timeline_figure(r["slow"]),
    "latency-vs-rps": lambda _: _sweep(),
}


@pytest.fixture(scope="module")
def figures(runs: dict[str, Any]) -> Iterator[dict[str, Figure]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDrawnWarning)
        yield {name: make(runs) for name, make in FIGURES.items()}


# -- 3. nothing clipped, nothing covered ----------------------------------------------------


@pytest.mark.parametrize("name", list(FIGURES))
def test_nothing_clipped_nothing_covered(figures: dict[str, Figure], name: str) -> None:
    """Every text inside the figure; legends outside the axes clear of the data area and the
    axes' labels; a legend inside clear of every plotted point; labels of reference lines (and
    notes) above the axes, clear of each other and of the title."""
    assert problems(figures[name]) == []


def test_the_check_sees_what_it_checks() -> None:
    """The layout check is not vacuous: a legend over a line, a label on the data area and a
    footer past the edge are each reported."""
    with style():
        fig, (ax,) = new_figure(width=4.0, height=3.0)
        ax.plot([0, 1], [0, 1], label="diagonal", gid="data")
        ax.legend(loc="center")
        ax.text(0.5, 0.2, "a label", gid="reference-label:x", transform=ax.transAxes)
        fig.text(0.5, 0.0, "a footer far too long " * 8)
    found = "\n".join(problems(fig))
    assert "covers line 'data'" in found
    assert "sits on the data area" in found
    assert "leaves the figure" in found


def test_a_long_footer_wraps_inside_a_narrow_figure() -> None:
    with style():
        fig, (ax,) = new_figure(width=3.5, height=3.5)
        ax.plot([1, 2], [1, 2])
        source_line(fig, "a source line that names a model, a system, a mode and every "
                         "setting that matters, " * 2 + "supercalifragilisticexpialidocious" * 3)
    assert problems(fig) == []
    assert footer(fig).count("kvroof") == 1 and "\n" in fig.texts[0].get_text()


# -- 4. one colour meaning ------------------------------------------------------------------

REGIME = {to_hex(COMPUTE_SHADE): "compute", to_hex(TRANSFER_SHADE): "transfer"}
# the transfer part of a TTFT bar is transfer by meaning: its gid says "exposed"


def _colours(artist: Any) -> Iterator[str]:
    getters = ("get_color", "get_markerfacecolor", "get_markeredgecolor", "get_facecolor",
               "get_edgecolor")
    for getter in getters:
        if not hasattr(artist, getter):
            continue
        try:
            value = getattr(artist, getter)()
        except (TypeError, ValueError):
            continue
        array = np.asarray(value, dtype=object)
        if array.ndim == 2:
            values = [tuple(row) for row in np.asarray(value, dtype=float)]
        else:
            values = [value]
        for item in values:
            try:
                yield to_hex(item)
            except (TypeError, ValueError):
                continue


def _in_legend(artist: Any, fig: Figure) -> bool:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    return any(artist in legend.findobj() for legend in legends)


@pytest.mark.parametrize("name", list(FIGURES))
def test_green_and_vermillion_mean_the_two_regimes_only(figures: dict[str, Figure],
                                                        name: str) -> None:
    """An artist drawn in green says compute-bound in its gid (or text), one in vermillion
    transfer-bound; a legend entry in them says so in its label. The hierarchical roofline's
    request markers are checked against each request's regime below."""
    fig = figures[name]
    for legend in [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends):
        assert isinstance(legend, Legend)
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            for colour in set(_colours(handle)) & set(REGIME):
                assert REGIME[colour] in text.get_text(), (name, text.get_text())
    for artist in fig.findobj():
        if _in_legend(artist, fig):
            continue
        gid = str(artist.get_gid() or "")
        if gid.startswith(("request-", "request:")):
            continue
        said = gid + " " + (artist.get_text() if isinstance(artist, Text) else "")
        said = said.replace("exposed:", "exposed transfer:")  # the breakdown's gids
        for colour in set(_colours(artist)) & set(REGIME):
            assert REGIME[colour] in said, (name, artist, gid)


def test_ceilings_colour_each_request_by_its_regime() -> None:
    from kvroof.cost.timing import ttft

    fig = ceilings_figure(QWEN)
    points = by_gid(fig, "request-hbm:")
    assert len(points) >= 5
    seen = set()
    for point in points:
        t, k = (float(v) for v in point.get_gid().split(":")[1].split(","))
        bound = str(ttft(QWEN, t, k, "ideal").bound)
        seen.add(bound)
        expected = COMPUTE_SHADE if bound == "compute" else TRANSFER_SHADE
        assert to_hex(point.get_facecolor()[0]) == to_hex(expected)
    assert seen == {"compute", "transfer"}


def _line_colour(fig: Figure, gid_prefix: str) -> str:
    (line,) = [a for a in by_gid(fig, gid_prefix) if hasattr(a, "get_color")][:1]
    return to_hex(line.get_color())


def test_each_model_has_one_colour_in_every_figure(figures: dict[str, Figure]) -> None:
    qwen, deepseek = (to_hex(model_color(m)) for m in ("qwen3-235b-a22b", "deepseek-v3"))
    assert qwen != deepseek
    kappa_t = figures["kappa-vs-t"]
    assert _line_colour(kappa_t, f"full:{QWEN.short_label}") == qwen
    assert _line_colour(kappa_t, f"full:{DEEPSEEK.short_label}") == deepseek
    what_if = figures["what-if"]
    assert _line_colour(what_if, f"full:{QWEN.short_label}") == qwen
    assert _line_colour(what_if, f"full:{DEEPSEEK.short_label}") == deepseek
    families = figures["families"]
    assert _line_colour(families, "kappa:full attention, GQA") == qwen
    assert _line_colour(families, "kappa:full attention, MLA") == deepseek
    # the seven families' models differ from each other
    colours = {to_hex(a.get_color()) for a in by_gid(families, "kappa:")
               if a.get_linestyle() == "-"}
    assert len(colours) == 7
    assert not colours & set(REGIME)


def test_each_accelerator_has_one_colour_in_every_figure(figures: dict[str, Figure]) -> None:
    h100 = to_hex(accelerator_color("h100-sxm"))
    assert h100 == to_hex(accelerator_color("h100-pcie"))  # one colour for the GPU, any variant
    assert len({accelerator_color(a) for a in ("a100-sxm", "h100-sxm", "b200", "h200",
                                               "gh200", "gb200")}) == 6
    assert not {to_hex(accelerator_color(a)) for a in REG.names("accelerator")} & set(REGIME)
    assert not {to_hex(model_color(m)) for m in REG.names("model")} & set(REGIME)
    full, paper = figures["roofline-full"], figures["roofline-paper"]
    one = figures["roofline-one-panel"]
    assert _line_colour(full, "curve:h100-sxm+pcie-gen5-x16") == h100
    assert _line_colour(paper, "roof:h100-sxm") == h100
    assert _line_colour(one, "curve:h100-sxm+pcie-gen5-x16") == h100  # `kvroof plot` too
    assert _line_colour(full, "curve:b200+pcie-gen4-x16") == to_hex(accelerator_color("b200"))
    # within one figure the hardware of the same model differ by accelerator (kappa-vs-t)
    a, b = (deployment("qwen3-235b-a22b", system=s, tp=8, registry=REG)
            for s in ("dgx-h100", "hgx-h200"))
    fig = kappa_vs_t_figure([a, b])
    assert _line_colour(fig, f"full:{a.short_label}") == h100
    assert _line_colour(fig, f"full:{b.short_label}") == to_hex(accelerator_color("h200"))


# -- 5. simulation figures ------------------------------------------------------------------


def test_coinciding_curves_are_said_on_the_figure(figures: dict[str, Figure],
                                                  runs: dict[str, Any]) -> None:
    """The default report's six policies give the same TTFTs (host DRAM serves almost nothing
    on the five-minute slice): the figure says which coincide and draws them as stripes."""
    fig = figures["ttft-cdf"]
    (note,) = by_gid(fig, "note:coincide")
    text = note.get_text().replace("\n", " ")
    for label in runs["default"]:
        assert label in text
    widths = {a.get_gid(): a.get_linewidth() for a in by_gid(fig, "ttft:")}
    assert len(set(widths.values())) > 1
    differ = coinciding({"a": np.array([1.0, 2.0]), "b": np.array([1.0, 2.5]),
                         "c": np.array([1.0, 2.01])})
    assert differ == [["a", "c"]]


def test_a_saturated_run_is_warned_on_the_figure_and_in_the_text(
        figures: dict[str, Figure], runs: dict[str, Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    found = saturation(runs["overloaded"]["load"])
    assert found is not None
    assert found.served_rps < 0.9 * found.offered_rps
    assert found.ttft_last_s > 2 * found.ttft_first_s
    # 1.5x on four replicas: served 89% of the offered rate over the run, but the queue does
    # not grow (the last requests wait no longer than the first): a steady state, no warning
    assert saturation(runs["fast_ok"]) is None
    assert all(saturation(r) is None for r in runs["default"].values())
    for name in ("ttft-cdf-saturated", "timeline-compared"):
        (note,) = by_gid(figures[name], "note:saturated")
        assert "No steady state" in note.get_text() and "offered" in note.get_text()
    assert not by_gid(figures["ttft-cdf"], "note:saturated")

    from kvroof.cli import main

    code = main(["simulate", "--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp",
                 "8", "--replicas", "2", "--time-scale", "1.5", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("warning:")]
    # the command's run is the fixture's overloaded "load" run (the shipped slice 1.5x faster
    # on two replicas, default settings), simulated here through the library
    found = saturation(runs["overloaded"]["load"])
    assert found is not None and line == f"warning: no steady state: {found.message()}"
    main(["simulate", "--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8",
          "--replicas", "4", "--quiet"])
    assert "warning" not in capsys.readouterr().out


def test_long_runs_use_minutes_or_hours(figures: dict[str, Figure],
                                        runs: dict[str, Any]) -> None:
    assert figures["timeline-16h"].axes[1].get_xlabel() == "simulated time (h)"
    assert figures["timeline"].axes[1].get_xlabel() == "simulated time (s)"
    from kvroof.plot.timeline import _time_unit

    assert _time_unit(50 * 60) == ("min", 60.0) and _time_unit(20 * 60) == ("s", 1.0)
    power = by_gid(figures["timeline-16h"], "power")[0]
    x = np.asarray(power.get_xdata(), dtype=float)
    assert x.max() == pytest.approx(runs["slow"].summary["makespan_s"] / 3600, rel=0.02)


def test_power_has_a_baseline(figures: dict[str, Figure], runs: dict[str, Any]) -> None:
    for name in ("timeline", "timeline-16h", "timeline-compared"):
        ax = figures[name].axes[1]
        assert ax.get_ylim()[0] == 0
        (idle,) = by_gid(figures[name], "power:idle")
        assert idle.get_ydata()[0] == pytest.approx(runs["idle"])  # H100's 67 W


def test_compared_runs_share_one_timeline(figures: dict[str, Figure],
                                          runs: dict[str, Any]) -> None:
    fig = figures["timeline-compared"]
    for label in runs["overloaded"]:
        assert by_gid(fig, f"tokens:{label}") and by_gid(fig, f"power:{label}")


def test_an_invisible_decode_area_has_no_legend_entry(figures: dict[str, Figure]) -> None:
    texts = [t.get_text() for t in figures["timeline"].axes[0].get_legend().get_texts()]
    assert "prefill" in texts and "decode" not in texts
    assert by_gid(figures["timeline"], "tokens:decode")  # still drawn (the data)


def test_the_sweep_legend_keys_each_group_and_metric_once(figures: dict[str, Figure]) -> None:
    fig = figures["latency-vs-rps"]
    texts = legend_texts(fig)
    assert "TTFT p50" in texts and "TTFT p99" in texts
    assert sum("scheduler=" in t for t in texts) == 4
    assert fig.axes[0].get_ylabel() == "TTFT (s)"
    (note,) = by_gid(fig, "note:coincide")  # fifo and utilization-aware give the same rows
    assert "scheduler=fifo, cache_policy=load" in note.get_text().replace("\n", " ")


# -- 6. what-if bars ------------------------------------------------------------------------


def test_kv_format_bars_stand_on_a_linear_axis_from_zero(figures: dict[str, Figure]) -> None:
    right = figures["what-if"].axes[1]
    assert right.get_yscale() == "linear" and right.get_ylim()[0] == 0
    bars = [p for p in right.patches if str(p.get_gid()).startswith("kv:")]
    assert len(bars) == 12 and all(bar.get_y() == 0 for bar in bars)


def test_kv_formats_spanning_a_wide_range_are_dots_on_a_log_axis(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kvroof.plot.what_if as what_if

    monkeypatch.setattr(what_if, "DOTS_ABOVE", 1.0)
    fig = what_if_figure([QWEN], registry=REG)
    right = fig.axes[1]
    assert right.get_yscale() == "log"
    assert not [p for p in right.patches if str(p.get_gid()).startswith("kv:")]
    dots = [line for line in right.get_lines() if str(line.get_gid()).startswith("kv:")]
    assert len(dots) == 2 and all(line.get_linestyle() == "None" for line in dots)

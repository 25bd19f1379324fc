"""Figures: each returns a Figure whose artists sit where the library's numbers say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for, max_new_tokens_for_crossover
from kvroof.cost.timing import compute_breakdown, ttft
from kvroof.cost.transfer import transfer_breakdown
from kvroof.errors import KvroofError
from kvroof.plot import (
    ceilings_figure,
    kappa_vs_t_figure,
    offload_roofline_figure,
    overhead_figure,
    save_figure,
    ttft_breakdown_figure,
    what_if_figure,
)
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
QWEN = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG)


def by_gid(fig: Figure, prefix: str) -> list[object]:
    return [a for a in fig.findobj() if (a.get_gid() or "").startswith(prefix)]


def labels_have_units(fig: Figure) -> None:
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            if label:
                assert "(" in label and ")" in label, label


def test_roofline_kappa_lines_at_computed_values() -> None:
    hardware = [("h100-sxm", "pcie-gen4-x16"), ("b200", "pcie-gen5-x16")]
    fig = offload_roofline_figure(["qwen3-235b-a22b"], hardware, new_tokens=128, registry=REG,
                                  tp=8)  # 470 GB of bf16 weights: one 80 GB GPU cannot hold them
    assert isinstance(fig, Figure)
    for accelerator, link in hardware:
        dep = deployment("qwen3-235b-a22b", accelerator=accelerator, link=link, registry=REG,
                         tp=8)
        expected = float(kappa_crit(dep, 128).kappa_crit)
        (line,) = by_gid(fig, f"kappa-crit:{accelerator}+{link}")
        assert line.get_xdata()[0] == pytest.approx(expected)  # type: ignore[attr-defined]
    assert by_gid(fig, "region:compute-bound") and by_gid(fig, "region:transfer-bound")
    assert {a.get_gid() for a in by_gid(fig, "workload:")} == {
        "workload:ShareGPT", "workload:NarrativeQA", "workload:DocFinQA"}
    labels_have_units(fig)


def test_roofline_paper_mode_and_tokens() -> None:
    hardware = [("h100-sxm", "pcie-gen5-x16")]
    fig = offload_roofline_figure(["llama-3.1-70b"], hardware, mode="paper", y="tokens",
                                  workload_medians=None, registry=REG, peaks="spec")
    dep = deployment("llama-3.1-70b", accelerator="h100-sxm", link="pcie-gen5-x16",
                     registry=REG)
    (line,) = by_gid(fig, "kappa-crit:")
    assert line.get_xdata()[0] == pytest.approx(float(kappa_paper_for(dep).kappa_crit))  # type: ignore[attr-defined]
    assert "tokens/s" in fig.axes[0].get_ylabel()
    assert not by_gid(fig, "workload:")


def test_roofline_never_transfer_bound_has_no_line() -> None:
    # a link of 1 PB/s without per-copy latency: attention over the cached tokens (compute
    # growing with K) always outlasts their load
    fig = offload_roofline_figure(["qwen3-8b"], [("h100-sxm", "pcie-gen5-x16")],
                                  registry=REG, bandwidth=1e15, latency=0.0)
    assert not by_gid(fig, "kappa-crit:")
    assert "never" in fig.axes[0].get_legend().get_texts()[0].get_text()


def test_roofline_leaves_out_what_does_not_fit() -> None:
    """DeepSeek-V3's 671 GB of FP8 weights on one 80 GB H100: no curve and no legend entry;
    the footer names it in one line (an empty line keeps the ``does-not-fit`` gid, which
    ``kvroof plot`` reads); paper mode, a formula, draws it."""
    hardware = [("h100-sxm", "pcie-gen5-x16")]
    with pytest.raises(KvroofError, match="does not fit"):  # nothing at all fits: refused
        offload_roofline_figure(["deepseek-v3"], hardware, registry=REG)
    fig = offload_roofline_figure(["deepseek-v3", "llama-3.1-8b"], hardware, registry=REG)
    (entry,) = by_gid(fig, "does-not-fit:h100-sxm+pcie-gen5-x16")
    assert len(entry.get_xdata()) == 0  # type: ignore[attr-defined]
    assert len(by_gid(fig, "kappa-crit:")) == 1  # Llama 3.1 8B's only
    assert fig.axes[0].get_legend() is None
    footer = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "DeepSeek-V3: not drawn, the weights do not fit at TP 1: h100-sxm + pcie-gen5-x16" \
        in footer
    paper = offload_roofline_figure(["deepseek-v3"], hardware, mode="paper", registry=REG)
    assert by_gid(paper, "kappa-crit:") and not by_gid(paper, "does-not-fit:")


def test_ceilings_roofs() -> None:
    """Hierarchical roofline: each roof is intensity x its level's bandwidth; a request sits at
    FLOPs per HBM byte (circle) and FLOPs per link byte (triangle), both at its ideal-overlap
    FLOP/s, each under the roof of its own level."""
    fig = ceilings_figure(QWEN, [(64, 6400)])
    for gid, bandwidth in (("roof:link", float(QWEN.effective_bandwidth)),
                           ("roof:hbm", float(QWEN.effective_hbm_bandwidth))):
        (roof,) = by_gid(fig, gid)
        x, y = roof.get_data()  # type: ignore[attr-defined]
        slope_region = np.asarray(x) < float(QWEN.effective_compute) / bandwidth
        np.testing.assert_allclose(np.asarray(y)[slope_region] * 1e12,
                                   np.asarray(x)[slope_region] * bandwidth)
    achieved = float(ttft(QWEN, 64, 6400, "ideal").achieved_flops)
    parts = compute_breakdown(QWEN, 64, 6400)
    flops = float(parts.flops) / QWEN.tp
    link_bytes = float(transfer_breakdown(QWEN, 6400, 64).bytes_per_rank) + float(
        transfer_breakdown(QWEN, 6400, 64).save_bytes)
    for gid, intensity, bandwidth in (
        ("request-hbm:64,6400", flops / float(parts.hbm_bytes), QWEN.effective_hbm_bandwidth),
        ("request-link:64,6400", flops / link_bytes, QWEN.effective_bandwidth),
    ):
        (point,) = by_gid(fig, gid)
        x, y = point.get_offsets()[0]  # type: ignore[attr-defined]
        assert (x, y) == (pytest.approx(intensity), pytest.approx(achieved / 1e12))
        assert y * 1e12 <= intensity * float(bandwidth) * (1 + 1e-9)  # under its own roof
    labels_have_units(fig)


def test_kappa_vs_t_paper_line_and_never_region() -> None:
    one = deployment("qwen3-235b-a22b", accelerator="h100", tp=8, registry=REG)  # TP 1: no fit
    fig = kappa_vs_t_figure([one], labels=["one"])
    (paper,) = by_gid(fig, "paper:one")
    assert paper.get_ydata()[0] == pytest.approx(float(kappa_paper_for(one).kappa_crit))  # type: ignore[attr-defined]
    (never,) = by_gid(fig, "never:one")
    x0 = never.get_x()  # type: ignore[attr-defined]  # a Rectangle in axvspan
    assert x0 == pytest.approx(float(max_new_tokens_for_crossover(one)))
    (full,) = by_gid(fig, "full:one")
    t, k = full.get_data()  # type: ignore[attr-defined]
    assert k[10] == pytest.approx(float(kappa_crit(one, t[10]).kappa_crit))
    labels_have_units(fig)


def test_overhead_contour_where_p_oh_is_one() -> None:
    dep = deployment("qwen3-235b-a22b", system="paper-testbed", tp=8,
                     bandwidth_source="sustained", registry=REG)
    # up to 16,384 cached tokens: P_OH crosses 1 inside the grid with the roofline (at about
    # 8,192) and with the kernel tables (slower compute, so at more cached tokens)
    cached = [1024, 2048, 4096, 8192, 16384]
    new = [256, 512, 1024, 2048]
    fig = overhead_figure(dep, cached, new)
    (contour,) = by_gid(fig, "contour:p_oh=1")
    paths = contour.get_paths()  # type: ignore[attr-defined]
    vertices = np.concatenate([p.vertices for p in paths if len(p.vertices)])
    assert len(vertices) > 3
    # map index coordinates back to tokens and check P_OH = 1 there
    k = np.exp(np.interp(vertices[:, 0], np.arange(len(cached)), np.log(cached)))
    t = np.exp(np.interp(vertices[:, 1], np.arange(len(new)), np.log(new)))
    p_oh = np.asarray(ttft(dep, t, k).p_oh)
    np.testing.assert_allclose(p_oh, 1.0, rtol=0.05)


def test_what_if_marks_and_curves() -> None:
    fig = what_if_figure([QWEN], registry=REG)
    marks = {a.get_gid() for a in by_gid(fig, "link:")}
    assert {"link:PCIe Gen5 x16", "link:PCIe Gen6 x16"} <= marks
    (full,) = by_gid(fig, "full:")
    bandwidth, values = full.get_data()  # type: ignore[attr-defined]
    import dataclasses

    check = dataclasses.replace(QWEN, bandwidth=float(bandwidth[50]) * 1e9)
    assert values[50] == pytest.approx(float(kappa_crit(check, 128).kappa_crit))
    labels_have_units(fig)


def test_breakdown_bars() -> None:
    small = deployment("llama-3.1-8b", system="dgx-h100", registry=REG)  # fits at TP 1 and 8
    fig = ttft_breakdown_figure(small, 128, 16384, tps=(1, 8))
    import dataclasses

    for tp in (1, 8):
        for mode in ("serial", "layerwise", "ideal"):
            (bar,) = by_gid(fig, f"compute:{mode}:tp{tp}")
            result = ttft(dataclasses.replace(small, tp=tp), 128, 16384, mode)  # type: ignore[arg-type]
            assert bar.get_height() == pytest.approx(float(result.compute) * 1e3)  # type: ignore[attr-defined]
            (top,) = by_gid(fig, f"exposed:{mode}:tp{tp}")
            assert top.get_height() == pytest.approx(float(result.exposed_transfer) * 1e3)  # type: ignore[attr-defined]
    labels_have_units(fig)


def test_source_line_on_every_figure() -> None:
    # DeepSeek-V3's 673 GB of FP8 weights do not fit on 8 x 80 GB: figures refuse it now
    for fig in (ceilings_figure(QWEN), ttft_breakdown_figure(QWEN, tps=(8,))):
        assert any(t.get_text().startswith("kvroof ·") for t in fig.texts)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_save_formats(tmp_path: Path, suffix: str) -> None:
    path = save_figure(ttft_breakdown_figure(QWEN), tmp_path / f"f{suffix}")
    assert path.stat().st_size > 1000


def test_save_errors(tmp_path: Path) -> None:
    fig = ttft_breakdown_figure(QWEN)
    with pytest.raises(KvroofError, match="unsupported figure format"):
        save_figure(fig, tmp_path / "f.jpg")
    with pytest.raises(KvroofError, match="does not exist"):
        save_figure(fig, tmp_path / "missing" / "f.png")


def test_import_kvroof_does_not_import_matplotlib() -> None:
    import subprocess
    import sys

    code = "import sys, kvroof; kvroof.kappa_crit; kvroof.ttft; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_workload_figure_lines_and_shares() -> None:
    from kvroof.analysis.workload.bound import transfer_bound_shares
    from kvroof.plot import workload_figure
    from kvroof.workload.synth import synthesize

    chat = synthesize("sharegpt", 2000, seed=1)
    fig = workload_figure([chat], [QWEN])
    (paper,) = by_gid(fig, f"paper:{QWEN.short_label}")
    assert paper.get_xdata()[0] == pytest.approx(float(kappa_paper_for(QWEN).kappa_crit))  # type: ignore[attr-defined]
    (ecdf,) = by_gid(fig, "ecdf:kappa:synthetic-sharegpt")
    assert ecdf.get_ydata()[-1] == pytest.approx(1.0)  # type: ignore[attr-defined]
    share = transfer_bound_shares(chat, QWEN, "full").requests_transfer_bound
    text = "\n".join(t.get_text() for ax in fig.axes for t in
                     [*ax.texts, *(ax.get_legend().get_texts() if ax.get_legend() else [])])
    assert f"sharegpt {100 * share:.0f}%" in text
    labels_have_units(fig)


def test_overhead_sorts_its_axes() -> None:
    dep = deployment("qwen3-235b-a22b", accelerator="h100", tp=8, registry=REG)
    a = overhead_figure(dep, [65536, 1024, 8192], [2048, 64])
    b = overhead_figure(dep, [1024, 8192, 65536], [64, 2048])
    labels = [t.get_text() for t in a.axes[0].get_xticklabels()]
    assert labels == [t.get_text() for t in b.axes[0].get_xticklabels()] == ["1K", "8K", "64K"]


def test_families_figure_curves_are_the_librarys() -> None:
    from kvroof.analysis.families import FAMILIES
    from kvroof.cost.timing import compute_time
    from kvroof.cost.transfer import transfer_time
    from kvroof.plot import families_figure

    families = FAMILIES[2:5]  # sliding, chunked, linear
    deps = [deployment(f.model, system="dgx-h100", tp=8, registry=REG) for f in families]
    gemma = deployment(families[0].model, system="gh200", registry=REG)
    fig = families_figure(families, deps, [gemma, None, None], new_tokens=128)
    kappa_lines = by_gid(fig, "kappa:")
    assert len(kappa_lines) == 4  # three on dgx-h100, Gemma 3 also on one GH200
    line = next(a for a in kappa_lines if "llama-4" in a.get_gid())  # type: ignore[attr-defined]
    t, values = line.get_data()  # type: ignore[attr-defined]
    np.testing.assert_allclose(values, kappa_crit(deps[1], t).kappa_crit)
    ratio = next(a for a in by_gid(fig, "ratio:") if "qwen3-next" in a.get_gid())  # type: ignore[attr-defined]
    k, shown = ratio.get_data()  # type: ignore[attr-defined]
    np.testing.assert_allclose(shown, np.asarray(transfer_time(deps[2], k, 128))
                               / np.asarray(compute_time(deps[2], 128, k)))


def test_validation_points_sit_at_measured_and_predicted() -> None:
    from kvroof.plot import validation_figure
    from kvroof.validation.run import validate

    result = validate(registry=REG)
    fig = validation_figure(result)
    assert by_gid(fig, "y=x") and by_gid(fig, "band:2x")
    for item in result.results:
        (point,) = by_gid(fig, f"case:{item.case.id}")
        scale = 1e-9 if item.case.quantity == "link_bandwidth" else 1.0
        ((x, y),) = point.get_xydata()  # type: ignore[attr-defined]
        assert x == pytest.approx(item.case.measured * scale)
        assert y == pytest.approx((item.after.value or 0.0) * scale)
    labels_have_units(fig)


@pytest.mark.parametrize(
    ("value", "label"),
    [(1.0, "1"), (10.0, "10"), (100.0, "10²"), (1e-2, "10⁻²"), (1e12, "10¹²"), (50.0, "50"),
     (2e3, "2000"), (0.5, "0.5"), (2e5, "2×10⁵"), (3.2e-5, "3.2×10⁻⁵"), (0.0, ""),
     (float("nan"), "")],
)
def test_log_tick_labels_are_plain_text(value: float, label: str) -> None:
    """Log-axis labels without mathtext: the same numbers matplotlib's default writes as
    $10^{2}$ or $2\\times10^{5}$, as Unicode text."""
    from kvroof.plot.style import log_tick_label

    assert log_tick_label(value) == label


def test_saved_log_axes_use_plain_labels(tmp_path: Path) -> None:
    from matplotlib.ticker import FuncFormatter

    fig = offload_roofline_figure(["qwen3-8b"], [("h100-sxm", "pcie-gen5-x16")], registry=REG)
    save_figure(fig, tmp_path / "r.png")
    assert isinstance(fig.axes[0].xaxis.get_major_formatter(), FuncFormatter)
    labels = [t.get_text() for t in fig.axes[0].xaxis.get_ticklabels()]
    assert "10³" in labels and not any("$" in text for text in labels)

"""Follow-ups of the figures work (issue 23): the report's roofline captions say what the
figures draw (paper mode: the paper's own C and BW, each computed kappa_crit beside the printed
one; full mode: new tokens/s per GPU on the y axis), and ``explore()`` marks the chosen K/T on
its roofline and shows the link bandwidth in use."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

import pytest
from matplotlib.figure import Figure

from kvroof.report import ReportConfig
from kvroof.report.figure_list import figure_specs
from kvroof.specs.registry import Registry
from kvroof.validation.run import validate

REG = Registry(use_env=False)
needs_ipywidgets = pytest.mark.skipif(
    find_spec("ipywidgets") is None,
    reason="ipywidgets is not installed: `pip install 'kvroof[notebook]'` runs this test")


def caption(key: str) -> str:
    specs = {k: make for k, _, make in figure_specs(ReportConfig(), REG, validate(registry=REG))}
    _, text, _ = specs[key]()
    return text


def test_paper_mode_roofline_caption() -> None:
    text = caption("roofline-paper")
    assert "the paper's own C and BW" in text
    assert "Qwen3-235B-A22B on h100-sxm + pcie-gen5-x16 7.31 (printed 7.8)" in text


def test_full_mode_roofline_caption() -> None:
    assert "The y axis is new tokens per second per GPU" in caption("roofline")


@needs_ipywidgets
def test_explore_marks_the_chosen_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    import kvroof
    from kvroof.plot import roofline

    drawn: list[dict[str, Any]] = []
    real = roofline.offload_roofline_figure

    def spy(*args: Any, **kwargs: Any) -> Figure:
        drawn.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(roofline, "offload_roofline_figure", spy)
    explorer = kvroof.explore(registry=REG)
    assert drawn[-1]["mark_ratio"] == pytest.approx(16384 / 128)
    explorer.controls["cached_tokens"].value = 4096
    assert drawn[-1]["mark_ratio"] == pytest.approx(4096 / 128)
    explorer.controls["bandwidth_gbs"].value = 900.0
    assert "56.32 GB/s: the host DRAM share caps the 900 GB/s given" in explorer.readout.value


@needs_ipywidgets
def test_explore_readout_in_human_units() -> None:
    import kvroof

    explorer = kvroof.explore(registry=REG, figure=False)
    assert "iteration of 8,192 tokens" in explorer.readout.value
    explorer.controls["new_tokens"].value = 32_768
    explorer.controls["cached_tokens"].value = 200_000  # a TTFT of seconds, not 4.888e+04 ms
    value = explorer.readout.value
    assert "e+0" not in value and "T = 32,768, K = 200,000" in value
    assert " s</b>" in value


def test_each_caption_says_which_compute_model_timed_it() -> None:
    # the default report sets no compute_model, so every deployment takes the default, auto:
    # the kernel tables where they cover the accelerator (DGX H100's H100 SXM here)
    specs = {k: make for k, _, make in figure_specs(ReportConfig(), REG, validate(registry=REG))}
    for key in ("ceilings", "overhead", "breakdown"):
        caption = specs[key]()[1]
        assert "Compute model: auto: kernels on " in caption, key
        assert caption.endswith("(GEMMs timed on vllm 0.24.0)."), key
    assert "auto: kernels on h100-sxm" in specs["ceilings"]()[1]
    assert specs["roofline-paper"]()[1].endswith(
        "Compute: the paper's Eq. 6 with the paper's own C (a formula, not one of kvroof's "
        "compute models).")
    assert specs["validation"]()[1].endswith(
        "Compute model: auto (kvroof validate's setting; the tables give each case's "
        "prediction).")


def test_kernel_and_auto_captions_name_the_tables_and_what_fell_back() -> None:
    from kvroof.report.compute_labels import compute_model_sentence

    h200, mi300x = REG.accelerator("h200"), REG.accelerator("mi300x")
    # src/kvroof/kernels/data/index.json: h200's GEMM table is aiconfigurator's vLLM 0.24.0
    # data at commit 095f58a51c4c...; no table covers mi300x
    source = "ai-dynamo/aiconfigurator @095f58a (GEMMs timed on vllm 0.24.0)"
    assert compute_model_sentence("auto", [h200, mi300x, h200]) == (
        f"Compute model: auto: kernels on h200, from the measured tables of {source}; "
        "roofline on mi300x (no kernel tables).")
    assert compute_model_sentence("kernels", [mi300x]) == (
        "Compute model: kernels: every op at its roofline on mi300x (no kernel tables).")
    assert compute_model_sentence("roofline", [h200]).startswith("Compute model: roofline")


def test_simulation_captions_name_the_compute_model() -> None:
    """The serving-simulation figures say which compute model timed the iterations: the
    paper testbed's H100 SXM has kernel tables, so the default (auto) takes them; a report set
    to the roofline says so."""
    from kvroof.report.config_sections import SimulationReport
    from kvroof.report.simulation import simulation_section

    small = SimulationReport(requests=20, replicas=1, schedulers=["fifo"],
                             cache_policies=["load"], paper_load_models=[])
    for config, expected in (
            (ReportConfig(simulation=small), "Compute model: auto: kernels on h100-sxm"),
            (ReportConfig(simulation=small, compute_model="roofline"),
             "Compute model: roofline (one whole-model roofline")):
        section = simulation_section(config, REG)
        for _, _, make in section.figures:
            _, caption, _ = make()
            assert expected in caption

"""Notebook ergonomics: HTML representations, pandas frames, figures that display without
pyplot, CSV output and the explore() widgets; every value checked against the library."""

from __future__ import annotations

import csv
import io
import sys
from importlib.util import find_spec

import numpy as np
import pytest

import kvroof
from kvroof.cli import main
from kvroof.describe import spec_html
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry
from kvroof.workload.records import Workload
from kvroof.workload.stats import describe

REG = Registry(use_env=False)
# Tests of the optional extras skip where the extra is not installed (the README's test command
# installs only the 'test' extra).
needs_pandas = pytest.mark.skipif(
    find_spec("pandas") is None,
    reason="pandas is not installed: `pip install 'kvroof[pandas]'` runs this test")
needs_ipywidgets = pytest.mark.skipif(
    find_spec("ipywidgets") is None,
    reason="ipywidgets is not installed: `pip install 'kvroof[notebook]'` runs this test")
DEP = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG)


def test_html_of_specs_and_deployments() -> None:
    spec = REG.accelerator("h100")._repr_html_()
    assert "<table" in spec and "989.4 TFLOP/s" in spec and "nvidia.com" in spec
    model = spec_html(REG.model("qwen3-235b-a22b"))  # with its derived figures
    assert "kv_bytes_per_token" in model and "1.925e+05" in model
    text = DEP._repr_html_()
    assert "Qwen3-235B-A22B" in text and "usable" in text and "<script" not in text


def test_html_of_results() -> None:
    scalar = kvroof.ttft(DEP, 128, 16384)
    assert f"{scalar.ttft:.4g} s" in scalar._repr_html_()
    t, k = np.array([[64.0], [128.0]]), np.array([[0.0, 1000.0, 65536.0]])
    grid = kvroof.ttft(DEP, t, k, "layerwise")
    assert "to_frame()" in grid._repr_html_()
    assert "never transfer-bound" in kvroof.kappa_crit(DEP, 8192)._repr_html_()


@needs_pandas
def test_frames_of_results() -> None:
    t, k = np.array([[64.0], [128.0]]), np.array([[0.0, 1000.0, 65536.0]])
    grid = kvroof.ttft(DEP, t, k, "layerwise")
    frame = grid.to_frame()
    assert len(frame) == 6 and {"new_tokens", "cached_tokens", "ttft_s", "bound"} <= set(frame)
    row = frame.iloc[5]
    assert (row.new_tokens, row.cached_tokens) == (128.0, 65536.0)
    assert row.ttft_s == kvroof.ttft(DEP, 128, 65536, "layerwise").ttft
    kappa = kvroof.kappa_crit(DEP, [64, 128, 8192])
    kframe = kappa.to_frame()
    assert list(kframe.kappa_crit) == list(kappa.kappa_crit)
    assert kframe.reason.iloc[2].startswith("never")  # beyond T_max at TP 8


WORK = Workload.from_columns([10, 20, 30], [100, 0, 600], output_tokens=[5, -1, 7], name="w")


def test_html_of_workloads() -> None:
    assert "p50" in WORK._repr_html_() and "3 requests" in WORK._repr_html_()


@needs_pandas
def test_frames_of_workloads() -> None:
    frame = WORK.to_frame()
    assert list(frame.new_tokens) == [10, 20, 30] and list(frame.output_tokens) == [5, -1, 7]
    stats = describe(WORK).to_frame()
    assert stats.loc["p50", "new_tokens"] == 20.0  # the median of 10, 20, 30


def test_to_frame_without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(KvroofError, match=r"pip install 'kvroof\[pandas\]'"):
        kvroof.ttft(DEP, [1.0], [2.0]).to_frame()


def test_figures_display_without_pyplot() -> None:
    """A fresh interpreter draws a figure and renders it as Jupyter would, without pyplot."""
    import subprocess

    code = ("import sys, kvroof; from kvroof.plot import kappa_vs_t_figure; "
            "dep = kvroof.deployment('qwen3-235b-a22b', system='dgx-h100', tp=8); "
            "png = kappa_vs_t_figure([dep])._repr_png_(); "
            "assert png[:8] == b'\\x89PNG\\r\\n\\x1a\\n' and len(png) > 10000, len(png); "
            "assert 'matplotlib.pyplot' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_csv_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8",
                 "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 1
    assert float(rows[0]["kappa_crit"]) == kvroof.kappa_crit(DEP, 128).kappa_crit
    assert float(rows[0]["other_regime.kappa_crit"]) == pytest.approx(kvroof.kappa_crit(
        kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG,
                          iteration_tokens=8192), 128).kappa_crit)
    assert main(["ttft", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8",
                 "--new-tokens", "64", "--cached-tokens", "1000", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert float(rows[0]["ttft_s"]) == kvroof.ttft(DEP, 64, 1000).ttft
    with pytest.raises(SystemExit):  # --json and --csv exclude each other
        main(["kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--json", "--csv"])


@needs_ipywidgets
def test_explore_widgets_readout() -> None:
    explorer = kvroof.explore(registry=REG, figure=False)
    controls = explorer.controls
    assert controls["tp"].value == 8  # the largest TP of the default deployment that fits
    assert f"{kvroof.kappa_crit(DEP, 128).kappa_crit:.4g}" in explorer.readout.value
    controls["new_tokens"].value = 512
    controls["cached_tokens"].value = 65536
    want = kvroof.ttft(DEP, 512, 65536, "layerwise")
    assert f"{want.ttft * 1e3:.4g} ms" in explorer.readout.value
    controls["regime"].value = "busy iteration"
    busy = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG,
                             iteration_tokens=8192)
    assert f"{kvroof.ttft(busy, 512, 65536, 'layerwise').ttft * 1e3:.4g} ms" in \
        explorer.readout.value
    controls["model"].value = "deepseek-v3"  # 85 GB of FP8 weights per GPU: does not fit
    assert "does not fit" in explorer.readout.value
    controls["hardware"].value = "system hgx-h200"
    assert "does not fit" not in explorer.readout.value
    controls["bandwidth_gbs"].value = 15.0
    slow = kvroof.deployment("deepseek-v3", system="hgx-h200", tp=8, registry=REG,
                             bandwidth=15e9, iteration_tokens=8192)
    assert f"{kvroof.ttft(slow, 512, 65536, 'layerwise').ttft * 1e3:.4g} ms" in \
        explorer.readout.value


@needs_ipywidgets
def test_explore_draws_the_roofline() -> None:
    explorer = kvroof.explore(registry=REG)
    assert explorer.image.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_explore_without_ipywidgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(KvroofError, match=r"pip install 'kvroof\[notebook\]'"):
        kvroof.explore()

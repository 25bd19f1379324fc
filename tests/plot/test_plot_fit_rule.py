"""Figures follow the rule of ``kvroof kappa`` and ``kvroof ttft`` for deployments that do not
fit (issue 24, item 7): DeepSeek-V3 on one 80 GB H100 (673 GB of FP8 weights) used to get a
TTFT in ``plot breakdown``, ``overhead``, ``ceilings`` and ``what-if``. A figure of one
deployment now refuses it with the same one-line error; one of several draws those that fit
and names the others."""

from __future__ import annotations

import dataclasses

import pytest

from kvroof import plot
from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.cost.memory_fit import memory_fit
from kvroof.errors import KvroofError
from kvroof.plot.fitting import NotDrawnWarning
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
TOO_BIG = deployment("deepseek-v3", accelerator="h100", registry=REG)
FITS = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, registry=REG)


def test_the_example_really_does_not_fit() -> None:
    assert not memory_fit(TOO_BIG).fits and memory_fit(FITS).fits


@pytest.mark.parametrize("figure", ["ceilings", "overhead", "breakdown", "what-if",
                                    "kappa-vs-t"])
def test_the_cli_refuses_a_deployment_that_does_not_fit(
        figure: str, tmp_path: pytest.TempPathFactory,
        capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{tmp_path}/f.png"
    code = main(["plot", figure, "--model", "deepseek-v3", "--accelerator", "h100", "-o",
                 target])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "deepseek-v3 does not fit on h100-sxm at TP 1" in err


@pytest.mark.parametrize("draw", [
    lambda dep: plot.ceilings_figure(dep),
    lambda dep: plot.overhead_figure(dep),
    lambda dep: plot.ttft_breakdown_figure(dep, tps=(1,)),
    lambda dep: plot.what_if_figure([dep], registry=REG),
    lambda dep: plot.kappa_vs_t_figure([dep]),
])
def test_the_library_refuses_it_too(draw: object) -> None:
    with pytest.raises(KvroofError, match="does not fit on h100-sxm at TP 1"):
        draw(TOO_BIG)  # type: ignore[operator]


def test_a_figure_of_several_draws_those_that_fit_and_names_the_others() -> None:
    with pytest.warns(NotDrawnWarning, match=r"TP 1 \(471.8 GB of bf16 weights"):
        figure = plot.ttft_breakdown_figure(FITS, tps=(1, 8))
    gids = {str(bar.get_gid()) for ax in figure.axes for bar in ax.patches}
    assert any(gid.endswith(":tp8") for gid in gids)
    assert not any(gid.endswith(":tp1") for gid in gids)
    footer = " ".join(text.get_text() for text in figure.texts)
    assert "not drawn, the weights do not fit: TP 1" in footer


def test_kappa_vs_t_keeps_the_labels_of_what_it_draws() -> None:
    small = dataclasses.replace(FITS, tp=1)
    with pytest.warns(NotDrawnWarning):
        figure = plot.kappa_vs_t_figure([small, FITS], labels=["TP 1", "TP 8"])
    labels = [line.get_label() for ax in figure.axes for line in ax.get_lines()]
    assert any("TP 8" in label for label in labels)
    assert not any("TP 1" in label for label in labels)


def test_a_roofline_where_nothing_fits_is_refused(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: pytest.TempPathFactory) -> None:
    """Llama 3.1 405B needs 101.5 GB of bf16 weights per GPU at TP 8 on 80 GB H100s: the
    roofline used to be written with no curve at all."""
    code = main(["plot", "roofline", "--model", "llama-3.1-405b", "--accelerator", "h100",
                 "-o", f"{tmp_path}/r.png"])
    err = capsys.readouterr().err
    assert code == 2 and "llama-3.1-405b does not fit on h100-sxm at TP 8" in err

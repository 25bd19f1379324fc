"""How a spec shows itself: its own HTML (fields and sources, from the specs layer) and, in
IPython, the table with the figures the cost model derives from it (attached from the top of
the package, so that the specs import nothing above them)."""

from __future__ import annotations

import pytest

import kvroof
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.describe import spec_html
from kvroof.display import number
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def test_a_spec_shows_its_fields_and_sources_by_itself() -> None:
    text = REG.model("qwen3-235b-a22b")._repr_html_()
    assert "<table" in text and "num_layers" in text and "source: " in text
    assert "kv_bytes_per_token" not in text  # derived figures come from above the specs


def test_spec_html_adds_the_derived_figures() -> None:
    model = REG.model("qwen3-235b-a22b")
    text = spec_html(model)
    # the same number the cost model gives, formatted as every HTML table formats numbers
    assert f"<b>kv_bytes_per_token</b></td><td style=\"text-align:left\">" \
           f"{number(kv_bytes_per_token(model, 'bf16'))}<" in text
    assert "source: " in text and text.index("kv_bytes_per_token") < text.index("source: ")


def test_ipython_shows_specs_with_their_derived_figures(tmp_path: pytest.TempPathFactory,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("IPython", reason="IPython comes with the 'notebook' extra")
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    shell = InteractiveShell.instance()
    try:
        assert kvroof.show_specs_in_ipython(shell)
        for spec in (REG.model("gpt-oss-120b"), REG.accelerator("h100")):
            html = shell.display_formatter.format(spec)[0]["text/html"]
            assert html == spec_html(spec)
        assert "kv_bytes_per_token" in shell.display_formatter.format(
            REG.model("gpt-oss-120b"))[0]["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_without_ipython_nothing_is_registered() -> None:
    assert kvroof.show_specs_in_ipython(object()) is False

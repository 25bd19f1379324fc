"""The examples run as a user runs them (a fresh interpreter in another working directory, the
Agg backend, output files in KVROOF_EXAMPLES_OUT) and print what kvroof computes in-process."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

import kvroof
from kvroof.analysis.paper import BINARY_MEGA, MEASURED_BANDWIDTH, PAPER_MODELS
from kvroof.analysis.what_if import what_if_table
from kvroof.specs.registry import ENV_VAR

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOK = EXAMPLES / "kvroof_tour.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def example_env(out: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != ENV_VAR}
    env.update(KVROOF_EXAMPLES_OUT=str(out), MPLBACKEND="Agg")
    return env


def repo_examples_files() -> set[Path]:
    return {path for path in EXAMPLES.rglob("*") if "__pycache__" not in path.parts}


def run_example(script: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with cwd and KVROOF_EXAMPLES_OUT = ``out``; it must exit 0 and must not
    write into the repository's examples folder."""
    before = repo_examples_files()
    proc = subprocess.run([sys.executable, str(script)], cwd=out, env=example_env(out),
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert repo_examples_files() == before, f"{script.name} wrote into {EXAMPLES}"
    return proc


def value_after(label: str, text: str) -> str:
    """The token printed right after ``label`` (the first occurrence)."""
    match = re.search(re.escape(label) + r"\s*(\S+)", text)
    assert match, f"{label!r} not in output:\n{text}"
    return match.group(1)


def table_row(text: str, first: str) -> list[str]:
    """The whitespace-split cells of the first line whose first cell is ``first``."""
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{text}")


def shown(value: float, digits: int = 2) -> str:
    return "never" if math.isinf(value) else f"{value:.{digits}f}"


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    assert path.stat().st_size > 10_000, path
    assert path.read_bytes()[:8] == PNG_MAGIC


# -- scripts ------------------------------------------------------------------------------------
def test_quickstart(tmp_path: Path) -> None:
    out = run_example(EXAMPLES / "quickstart.py", tmp_path).stdout
    dep = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8)
    full = kvroof.kappa_crit(dep, 128).kappa_crit
    paper = kvroof.kappa_paper_for(dep).kappa_crit
    assert value_after("kappa_crit, full mode at T = 128:", out) == f"{full:.3f}"
    assert value_after("kappa_crit, paper mode:", out) == f"{paper:.3f}"
    # docs/cost-model.md: 148 alone (the HBM roof: 59 GB of weights per GPU), 14.6 paper mode
    assert 140 < full < 155 and 14 < paper < 15
    busy = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, iteration_tokens=8192)
    assert value_after("kappa_crit, in an 8192-token iteration:", out) == (
        f"{kvroof.kappa_crit(busy, 128).kappa_crit:.3f}")
    ttft = kvroof.ttft(dep, 128, 16384, overlap="layerwise")
    assert value_after("TTFT (T = 128, K = 16384, layerwise):", out) == f"{ttft.ttft * 1e3:.2f}"
    assert f"{ttft.bound}-bound" in out  # compute-bound: 30 ms of mostly weight reads
    assert_png(tmp_path / "quickstart_roofline.png")


def test_reproduce_paper(tmp_path: Path) -> None:
    out = run_example(EXAMPLES / "reproduce_paper.py", tmp_path).stdout
    b_kv = {m.name: kvroof.kv_bytes_per_token(kvroof.get_model(m.name)) for m in PAPER_MODELS}
    paper_part, full_part = out.split("Same models on", 1)
    crit_part = paper_part.split("kappa_crit on H100 + PCIe5", 1)[1]
    at_64, at_15 = crit_part.split("kappa_crit at the measured", 1)

    # kappa_M: printed 0.42 / 0.23, computed from exact B_kv; 405B differs (1.42 vs 1.57)
    assert table_row(paper_part, "llama-3.1-70b")[1:4] == ["0.42", "0.427", "ok"]
    assert table_row(paper_part, "llama-3.1-405b")[1:4] == ["1.42", "1.569", "DIFFERS"]
    # kappa_HW: H100 + PCIe5 printed 34, 32 from the stated 64 GB/s, 33.55 with x 1.048576
    assert table_row(paper_part, "h100+pcie5")[1:4] == ["34", "32", "33.55"]

    # 14.3 and 7.8 next to the recomputed values
    for name, printed, recomputed in (("llama-3.1-70b", "14.3", 14.34),
                                      ("qwen3-235b-a22b", "7.8", 7.67)):
        row = table_row(at_64, name)
        active = next(m.active_params for m in PAPER_MODELS if m.name == name)
        value = kvroof.kappa_paper(active, b_kv[name], 64e9 * BINARY_MEGA, 2000e12).kappa_crit
        assert row[1] == printed and row[3] == f"{value:.2f}"
        assert value == pytest.approx(recomputed, abs=0.01)
    # 15 GB/s: printed ~3.3 and ~1.8, the formula 3.20 and 1.71, measured 2 and 1
    qwen_15 = kvroof.kappa_paper(22e9, b_kv["qwen3-235b-a22b"], MEASURED_BANDWIDTH, 2000e12)
    assert table_row(at_15, "qwen3-235b-a22b")[1:] == ["1.8", f"{qwen_15.kappa_crit:.2f}", "1"]
    assert table_row(at_15, "llama-3.1-70b")[1:] == ["3.3", "3.20", "2"]

    # full mode on h100 + pcie-gen5-x16, TP 1 and 8 alone and TP 8 busy, as kvroof computes it
    for model in PAPER_MODELS:
        deps = [kvroof.deployment(model.name, accelerator="h100", link="pcie-gen5-x16", tp=tp)
                for tp in (1, 8)]
        deps.append(kvroof.deployment(model.name, accelerator="h100", link="pcie-gen5-x16",
                                      tp=8, iteration_tokens=8192))
        expected = [f"{kvroof.kappa_paper_for(deps[0]).kappa_crit:.2f}"]
        for dep in deps:
            expected += (["no", "fit"] if kvroof.fit_problem(dep)
                         else [shown(kvroof.kappa_crit(dep, 128).kappa_crit)])
        assert table_row(full_part, model.name)[1:] == expected
    # DeepSeek-V3's 673 GB of FP8 weights and Llama-405B's 812 GB of bf16 fit no 8x 80 GB group
    assert table_row(full_part, "deepseek-v3")[2:] == ["no", "fit"] * 3
    assert table_row(full_part, "llama-3.1-405b")[2:] == ["no", "fit"] * 3


def test_what_if(tmp_path: Path) -> None:
    out = run_example(EXAMPLES / "what_if.py", tmp_path).stdout
    deps = [kvroof.deployment(name, system=system, tp=8)
            for name, system in (("qwen3-235b-a22b", "dgx-h100"), ("deepseek-v3", "hgx-h200"))]
    tables = out.split("\n\n")
    for dep in deps:
        block = next(t for t in tables if t.strip().startswith(dep.model.label))
        for row in what_if_table(dep, 128):
            cells = next(line.split() for line in block.splitlines()
                         if line.strip().startswith(row.scenario + " "))
            assert cells[-4:] == [f"{row.kv_bytes_per_token / 1e3:.1f}",
                                  f"{row.bandwidth / 1e9:.1f}", f"{row.kappa_paper:.2f}",
                                  shown(row.kappa_full)]
    # the baseline is the request alone (148 for Qwen3-235B on dgx-h100, docs/cost-model.md)
    assert table_row(out, "baseline")[-1] == f"{kvroof.kappa_crit(deps[0], 128).kappa_crit:.2f}"

    # K/T = 100 at T = 128: the link bandwidth kvroof solves for, per variant
    variants = [{}, {"host_memory_locality": "interleaved"},
                {"host_memory_locality": "interleaved",
                 "granularity": kvroof.Granularity(layout="per-block")}]
    for dep in deps:
        rows = [line.split() for line in out.splitlines()
                if line.split()[:1] == [dep.model.name]]
        assert len(rows) == len(variants)
        for row, change in zip(rows, variants, strict=True):
            need = kvroof.required_bandwidth(dataclasses.replace(dep, **change), 128, 100).value
            assert row[-2:] == [f"{need / 1e9:.0f}", "GB/s"]
        # one copy per block removes the per-copy latency floor, so less bandwidth suffices
        assert float(rows[2][-2]) < float(rows[0][-2])
    assert_png(tmp_path / "what_if.png")


def test_custom_hardware(tmp_path: Path) -> None:
    proc = run_example(EXAMPLES / "custom_hardware.py", tmp_path)
    assert "skipped" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the spec copy lived in a temporary folder

    spec = kvroof.load_spec_file(EXAMPLES / "custom_hardware.yaml")
    assert isinstance(spec, kvroof.Accelerator)
    assert "hypothetical" in spec.display_name.lower()
    assert all("hypothetical" in source.lower() for source in spec.sources.values())
    assert spec.peak_compute["bf16"] == 4000e12 and spec.host_link == "pcie-gen6-x16"

    folder = tmp_path / "specs"
    folder.mkdir()
    shutil.copy(EXAMPLES / "custom_hardware.yaml", folder)
    reg = kvroof.Registry([folder], use_env=False)
    assert reg.problems == []
    out = proc.stdout
    for model in ("qwen3-235b-a22b", "deepseek-v3", "llama-3.1-70b"):
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [model]]
        assert [row[1] for row in rows] == ["1", "8"]
        for tp, row in zip((1, 8), rows, strict=True):
            future = kvroof.deployment(model, accelerator="future-gpu", registry=reg, tp=tp)
            h100 = kvroof.deployment(model, accelerator="h100", registry=reg, tp=tp)
            assert row[2:] == [shown(kvroof.kappa_crit(future, 128).kappa_crit),
                               f"{kvroof.kappa_paper_for(future).kappa_crit:.2f}",
                               shown(kvroof.kappa_crit(h100, 128).kappa_crit)]
            # 4x the compute for 1.9x the bandwidth: kappa_crit falls
            assert (kvroof.kappa_crit(future, 128).kappa_crit
                    < kvroof.kappa_crit(h100, 128).kappa_crit)


# -- the notebook -------------------------------------------------------------------------------
def notebook() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return data


def code_cells() -> list[str]:
    return ["".join(cell["source"]) for cell in notebook()["cells"]
            if cell["cell_type"] == "code"]


def test_notebook_is_stripped_and_plain_python() -> None:
    nb = notebook()
    assert nb["nbformat"] == 4
    cells = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert len(cells) >= 8
    for cell in cells:
        assert cell["outputs"] == [], "outputs must be stripped"
        assert cell["execution_count"] is None
        source = "".join(cell["source"])
        assert not any(line.lstrip().startswith(("%", "!")) for line in source.splitlines())
        compile(source, "<cell>", "exec")  # plain Python, no magics


def check_tour_output(text: str) -> None:
    dep = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8)
    assert f"full, T =  128: {kvroof.kappa_crit(dep, 128).kappa_crit:.2f}" in text
    assert f"= {kvroof.kappa_paper_for(dep).kappa_crit:.2f}" in text
    assert "Qwen3-235B-A22B: 235.09B total, 22.19B active" in text
    if find_spec("pandas") is not None:  # the frames of a simulation result and its trace
        assert "ttft_s" in text and "seen_prefix_tokens" in text


def test_notebook_runs(tmp_path: Path) -> None:
    """With nbclient and nbformat installed, execute the notebook in a Jupyter kernel;
    otherwise (CI: nbclient is not a dependency) run its code cells as one script."""
    try:
        import nbclient  # type: ignore[import-not-found]
        import nbformat  # type: ignore[import-not-found]
    except ImportError:
        script = tmp_path / "kvroof_tour.py"
        script.write_text("\n\n".join(code_cells()) + "\n", encoding="utf-8")
        check_tour_output(run_example(script, tmp_path).stdout)
        return

    from jupyter_client.kernelspec import NoSuchKernel  # type: ignore[import-not-found]

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                                     resources={"metadata": {"path": str(tmp_path)}})
    env = example_env(tmp_path)
    del env["MPLBACKEND"]  # the kernel's own (inline) backend, so that figures display
    try:
        client.execute(env=env)
    except NoSuchKernel:
        pytest.skip("nbclient is installed but no 'python3' Jupyter kernel is available")
    outputs = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]
    check_tour_output("".join(o.get("text", "") for o in outputs if o.output_type == "stream"))
    figure_cells = [source for source in code_cells() if "_figure(" in source.splitlines()[-1]]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == len(figure_cells) >= 4


def test_simulate_mooncake(tmp_path: Path) -> None:
    """The serving-simulation example on the shipped Mooncake slice: one row per scheduler and
    cache policy, and the recompute policy finds nothing in host DRAM."""
    proc = run_example(EXAMPLES / "simulate_mooncake.py", tmp_path)
    rows = [line.split() for line in proc.stdout.splitlines() if line.lstrip().startswith(
        ("fifo", "utilization-aware"))]
    assert len(rows) == 6
    recompute = [row for row in rows if row[1] == "recompute"]
    assert all(row[-4] == "0.0" for row in recompute)  # host hits column

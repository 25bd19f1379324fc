"""`kvroof report` and `kvroof plot`: files written, HTML self-contained, one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.errors import KvroofError, SpecError
from kvroof.report import ReportConfig, build_report, load_report_config
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("r") / "kvroof-report"
    messages: list[str] = []
    build_report(folder, ReportConfig(formats=["png", "svg"]), REG, messages.append)
    assert len(messages) >= 8 and all("\n" not in m for m in messages)
    return folder


def test_report_writes_every_promised_file(report_dir: Path) -> None:
    for key in ("roofline", "roofline-paper", "ceilings", "kappa-vs-t", "overhead", "what-if",
                "breakdown", "workloads", "validation", "families", "planning-rate",
                "planning-memory", "planning-threshold"):
        for suffix in ("png", "svg"):
            path = report_dir / "figures" / f"{key}.{suffix}"
            assert path.stat().st_size > 1000, path
    assert (report_dir / "report.md").stat().st_size > 1000


def test_html_embeds_every_image(report_dir: Path) -> None:
    """Every figure is in the page as inline SVG with its data (tests/test_report_html.py);
    the PNGs stay in figures/."""
    page = (report_dir / "report.html").read_text()
    images = re.findall(r'<svg class="kv-chart" role="img" aria-label="[^"]+"', page)
    assert len(images) == len(list((report_dir / "figures").glob("*.png")))
    assert "src=\"figures/" not in page  # nothing linked, everything embedded
    for table in ("kappa_m", "kappa_hw", "paper_grid", "full_grid", "measured", "what_if",
                  "workloads", "validation", "validation_cases", "families", "planning",
                  "planning_basis"):
        assert f'id="{table}"' in page


def test_markdown_has_the_paper_numbers(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    assert "printed 14.3" in text and "printed 7.8" in text  # paper grid beside printed values
    assert "| Qwen3-235B-A22B | 1 |" in text  # measured kappa_crit for Qwen3-235B
    assert "NVLink-C2C" in text and "FP8 KV" in text and "MLA" in text
    for figure in (report_dir / "figures").glob("*.png"):
        assert f"figures/{figure.name}" in text


def test_cli_report_default_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "report")
    assert code == 0
    assert (tmp_path / "kvroof-report" / "report.html").is_file()
    assert "wrote" in out and "[1/" in err


def test_cli_report_without_the_simulation(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """--no-simulation drops the serving-simulation section a config asks for, and nothing
    else (the config's own settings still apply)."""
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\nnew_tokens: 256\n"
                      "simulation: {requests: 50, schedulers: [fifo], cache_policies: [load], "
                      "paper_load_models: []}\n")
    code, _, _ = run(capsys, "report", "-o", str(tmp_path / "out"), "--config", str(config),
                     "--quiet", "--no-simulation")
    assert code == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Serving simulation" not in text and "T = 256" in text
    assert not list((tmp_path / "out" / "figures").glob("simulation-*"))


def test_cli_report_compute_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--compute-model replaces the config's compute_model (default auto) in every section:
    the captions and the validation section say the roofline."""
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\ncompute_model: kernels\nsimulation: null\n"
                      "planning: null\n")
    code, _, err = run(capsys, "report", "-o", str(tmp_path / "out"), "--config", str(config),
                       "--quiet", "--compute-model", "roofline")
    assert code == 0, err
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Compute model: roofline (one whole-model roofline" in text
    assert "Compute model: kernels" not in text and "Compute model: auto" not in text
    assert "Compute model: roofline (kvroof validate's setting" in text
    assert load_report_config(config, REG).settings()["compute_model"] == "kernels"


def test_report_uses_configured_traces(tmp_path: Path) -> None:
    """A config that names a trace (relative to the config file) analyses it, not synthetic."""
    data = Path(__file__).resolve().parent.parent / "examples" / "data"
    config = tmp_path / "c.yaml"
    (tmp_path / "t.csv").write_text((data / "table_sample.csv").read_text())
    config.write_text("models: [qwen3-235b-a22b]\nworkloads: [{path: t.csv, format: table}]\n"
                      "workload_deployments: [{system: gh200}]\n")
    result = build_report(tmp_path / "out", load_report_config(config, REG), REG)
    table = next(t for t in result.tables if t.key == "workloads")
    assert [row[0] for row in table.rows] == ["t"]  # named after the file
    assert table.rows[0][1] == "qwen3-235b-a22b, gh200, TP 1"
    assert "SYNTHETIC" not in (tmp_path / "out" / "report.md").read_text().split(
        "Workloads: share")[1].split("##")[0]


def test_cli_report_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\nhardware:\n  - {accelerator: h100, link: pcie5}\n"
                      "tp: 2\nnew_tokens: 256\nformats: [png]\n")
    code, _, _ = run(capsys, "report", "-o", str(tmp_path / "out"), "--config", str(config),
                     "--quiet")
    assert code == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "TP 2" in text and "T = 256" in text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("models: [qwen9]\n", "models[0]: unknown model 'qwen9'"),
        ("tp: zero\n", "tp:"),
        ("colour: red\n", "colour: unknown key"),
        ("hardware: [{accelerator: h100}]\n", "hardware.[0].link: missing field"),
        ("formats: [gif]\n", "formats.[0]"),
        ("workload_deployments: [{tp: 2}]\n", "workload_deployments[0]: give a system"),
        ("system: gh200\n", "tp: 8 exceeds the 1 GPUs of gh200"),
        ("compute_dtype: fp4\n", "compute_dtype: h100-sxm has no published peak for fp4"),
        ("models: [unclosed\n", "malformed YAML"),
        ("- a list\n", "expected a mapping"),
        # numbers: finite, in range, integers written as integers; each names its key
        ("new_tokens: .inf\n", "new_tokens: must be a finite number, got inf"),
        # token counts are whole (a report of 128.5 new tokens was built)
        ("new_tokens: 128.5\n", "new_tokens: expected a whole number of tokens, got 128.5"),
        ("breakdown_tokens: [128, 100.5]\n",
         "breakdown_tokens[1]: expected a whole number of tokens, got 100.5"),
        ("token_budget: 8192.5\n", "token_budget: expected a whole number of tokens"),
        ("new_tokens: 1e400\n", "new_tokens: must be a finite number, got '1e400'"),
        ("new_tokens: 2e15\n",  # kvroof.cost.checks.MAX_TOKENS
         "new_tokens: Input should be less than or equal to 1000000000000000 (got '2e15')"),
        ("breakdown_tokens: [-128, .nan]\n",
         "breakdown_tokens[0]: Input should be greater than 0 (got -128) (and 1 more problem)"),
        ("breakdown_tokens: [128, .nan]\n", "breakdown_tokens[1]: must be a finite number"),
        ("compute_efficiency: .nan\n", "compute_efficiency: must be a finite number, got nan"),
        ("seed: -1\n", "seed: Input should be greater than or equal to 0 (got -1)"),
        ("tp: true\n", "tp: Input should be a valid integer (got True)"),
        ("synthetic_requests: 1e9\n", "synthetic_requests: Input should be a valid integer"),
        ("synthetic_requests: 1000000000\n",
         "synthetic_requests: at most 1,000,000 synthetic requests per workload (the report "
         "draws three), got 1,000,000,000"),
        # files: relative to the config's folder, there, and usable
        ("compute_model: fast\n", "compute_model: "),
        ("workloads: [{path: nope.csv}]\n", "workloads[0].path: no such file: "),
        ("workloads: [{path: .}]\n", "workloads[0].path: not a file: "),
        ("workloads: [{path: mystery.txt}]\n", "workloads[0].path: "),
        ("measurements: nope\nmeasured_system: dgx-h100\n", "measurements: no such folder: "),
        ("measurements: .\nmeasured_system: dgx-h100\n", "measurements: "),
        ("measurements: empty\nmeasured_system: dgx-h100\n", "measurements: "),
    ],
)
def test_bad_config(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    (tmp_path / "mystery.txt").write_text("hello\n")  # no format can be told
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "prefill.csv").write_text("")
    with pytest.raises(SpecError) as info:
        load_report_config(path, REG)
    assert str(path) in str(info.value) and fragment.replace(".[", "[") in str(
        info.value).replace(".[", "["), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("workloads: [{path: mystery.txt}]\n",
         "workloads[0].path: {tmp}/mystery.txt: cannot tell the format"),
        ("measurements: .\nmeasured_system: dgx-h100\n",
         "measurements: {tmp} holds no prefill.csv"),
        ("measurements: empty\nmeasured_system: dgx-h100\n",
         "measurements: {tmp}/empty/prefill.csv: empty file (no header row)"),
    ],
)
def test_bad_inputs_are_found_before_any_work(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, fragment: str) -> None:
    """Traces and measurements are checked when the config is read: one line naming the
    config and the key, exit 2, and no output folder (it used to be made first, and left)."""
    (tmp_path / "mystery.txt").write_text("hello\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "prefill.csv").write_text("")
    config = tmp_path / "c.yaml"
    config.write_text(text)
    code, out, err = run(capsys, "report", "-o", str(tmp_path / "out"), "--config",
                         str(config), "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"kvroof: error: {config}: {fragment.format(tmp=tmp_path)}"), err
    assert not (tmp_path / "out").exists()


def test_bad_config_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("system: nowhere\n")
    code, _, err = run(capsys, "report", "-o", str(tmp_path / "o"), "--config", str(path))
    assert code == 2 and err.count("\n") == 1 and "unknown system 'nowhere'" in err


def test_missing_parent_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "report", "-o", str(tmp_path / "no" / "such"))
    assert code == 2 and "does not exist" in err and err.count("\n") == 1


def test_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(KvroofError, match="not a folder"):
        build_report(blocker, registry=REG)


@pytest.mark.parametrize("figure", ["roofline", "ceilings", "kappa-vs-t", "overhead", "what-if",
                                    "breakdown"])
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_cli_plot_writes_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, figure: str,
                              suffix: str) -> None:
    target = tmp_path / f"out{suffix}"
    code, _, err = run(capsys, "plot", figure, "--model", "qwen3-235b-a22b", "--system",
                         "dgx-h100", "--tp", "8", "-o", str(target))
    assert code == 0, err
    data = target.read_bytes()
    assert len(data) > 1000
    magic = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}[suffix]
    assert data.startswith(magic)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["plot", "ceilings", "--model", "nope", "--system", "dgx-h100"], "unknown model"),
        (["plot", "ceilings", "--model", "qwen3-32b", "--system", "nope"], "unknown system"),
        (["plot", "roofline", "--hardware", "h100"], "--hardware: expected ACCELERATOR:LINK"),
        (["plot", "overhead", "--model", "qwen3-32b", "--system", "dgx-h100", "--new", "a"],
         "--new: expected numbers"),
        (["plot", "breakdown", "--model", "qwen3-32b", "--system", "dgx-h100", "--tps", "0"],
         "--tps: expected positive integers"),
        # an empty list or item used to fall back to the default or vanish without a word
        (["plot", "kappa-vs-t", "--model", "qwen3-32b", "--system", "dgx-h100", "--tps", ""],
         "--tps: expected integers separated by commas, got ''"),
        (["plot", "kappa-vs-t", "--model", "qwen3-32b", "--system", "dgx-h100", "--tps", "1,,8"],
         "--tps: expected integers separated by commas, got '1,,8'"),
        (["plot", "ceilings", "--model", "qwen3-32b", "--system", "dgx-h100", "--requests", ""],
         "--requests: expected T:K pairs separated by commas, got ''"),
        (["plot", "overhead", "--model", "qwen3-32b", "--system", "dgx-h100", "--new", "64,"],
         "--new: expected numbers separated by commas, got '64,'"),
        (["plot", "overhead", "--model", "qwen3-32b", "--system", "dgx-h100", "--cached", "inf"],
         "--cached: expected positive finite numbers, got 'inf'"),
        (["plot", "ceilings", "--model", "qwen3-32b", "--system", "dgx-h100", "--requests",
          "1:inf"], "--requests: expected whole numbers of tokens, got '1:inf'"),
        # the cost model's limit (kvroof.cost.checks.MAX_TOKENS) under the flag's name
        (["plot", "overhead", "--model", "qwen3-32b", "--system", "dgx-h100", "--cached",
          "1e300"], "--cached: at most 1e+15 tokens"),
        (["plot", "what-if", "--model", "qwen3-32b", "--system", "dgx-h100", "--new-tokens",
          "1e20"], "argument --new-tokens: at most 1e+15 tokens"),
        (["--spec-path", "", "plot", "roofline"], "--spec-path: expected a folder"),
        # per cached token needs a cached token (was a ZeroDivisionError traceback)
        (["plot", "families", "--system", "dgx-h100", "--cached-tokens", "0"],
         "argument --cached-tokens: must be at least 1, got 0"),
        (["plot", "families", "--system", "dgx-h100", "--new-tokens", "0"],
         "argument --new-tokens: must be at least 1, got 0"),
        # a request computes at least one token (T = 0 broke the log axis with a warning)
        (["plot", "ceilings", "--model", "qwen3-32b", "--system", "dgx-h100", "--requests",
          "0:100"], "--requests: request 0:100: T must be at least 1 token"),
        # paper mode has no T (the figure was drawn the same whatever --new-tokens said)
        (["plot", "roofline", "--mode", "paper", "--new-tokens", "4096"],
         "--new-tokens: paper mode does not depend on it"),
        # the figure runs T to 16,384: the error names the flag (it named iteration_tokens)
        (["plot", "kappa-vs-t", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp",
          "8", "--iteration-tokens", "8192"],
         "--iteration-tokens: 8192.0 is fewer than the request's new tokens T (max 16384)"),
        # a layer-kind setting that applies to none of the plotted models
        (["plot", "ceilings", "--model", "llama-3.1-8b", "--system", "gh200", "--mla",
          "absorbed"], "--mla: llama-3.1-8b has no MLA layers"),
        (["plot", "ceilings", "--model", "qwen3-32b", "--system", "dgx-h100", "--requests",
          "1.5:100.5"], "--requests: expected whole numbers of tokens, got '1.5:100.5'"),
    ],
)
def test_cli_plot_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                            argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, *argv, "-o", str(tmp_path / "x.png"))
    assert code == 2 and out == "" and err.count("\n") == 1 and fragment in err, err


def test_cli_plot_bad_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for target, fragment in ((tmp_path / "x.jpg", "use a .png"),
                             (tmp_path / "none" / "x.png", "does not exist")):
        code, _, err = run(capsys, "plot", "breakdown", "--model", "qwen3-32b", "--system",
                           "dgx-h100", "-o", str(target))
        assert code == 2 and fragment in err


def test_cli_plot_edge_cases(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A what-if where every KV format is never transfer-bound still draws; a roofline for a
    system uses the system (its measured 15 GB/s), not just its accelerator and link."""
    code, _, err = run(capsys, "plot", "what-if", "--model", "deepseek-v3", "--accelerator",
                       "gh200", "--tp", "8", "-o", str(tmp_path / "w.png"))  # TP 1 does not fit
    assert code == 0, err
    from kvroof.cost.deployment import deployment
    from kvroof.cost.kappa import kappa_crit
    from kvroof.plot import offload_roofline_figure

    fig = offload_roofline_figure(["qwen3-235b-a22b"], ["paper-testbed"], registry=REG,
                                  bandwidth_source="sustained", tp=8)  # TP 1 does not fit
    (line,) = [a for a in fig.findobj() if a.get_gid() == "kappa-crit:paper-testbed-8x-h100"]
    dep = deployment("qwen3-235b-a22b", system="paper-testbed", registry=REG,
                     bandwidth_source="sustained", tp=8)
    assert line.get_xdata()[0] == pytest.approx(float(kappa_crit(dep, 128).kappa_crit))  # type: ignore[attr-defined]
    code, _, err = run(capsys, "plot", "roofline", "--system", "paper-testbed", "--model",
                       "qwen3-235b-a22b", "-o", str(tmp_path / "r.png"))
    assert code == 0, err


def test_kappa_vs_t_where_kappa_is_zero_everywhere(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """At a link of 1e-300 GB/s every cached token outlasts the compute: kappa_crit is 0 at
    every T (the library's answer), which a log axis cannot show, so the legend says it and
    no warning is printed (one used to say the data could not be log-scaled)."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.kappa import kappa_crit
    from kvroof.plot import kappa_vs_t_figure

    dep = deployment("llama-3.1-8b", accelerator="h100", bandwidth=1e-291, registry=REG)
    assert float(kappa_crit(dep, 128).kappa_crit) == 0.0
    fig = kappa_vs_t_figure([dep])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("0: transfer-bound from the first cached token" in label for label in labels)
    code, _, err = run(capsys, "plot", "kappa-vs-t", "--model", "llama-3.1-8b",
                         "--accelerator", "h100", "--bandwidth", "1e-300 GB/s", "-o",
                         str(tmp_path / "k.png"))
    assert code == 0 and err == "" and (tmp_path / "k.png").exists(), err


def test_an_error_mid_report_leaves_no_folder(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """A trace that passes the up-front checks (its format can be told) but is broken further
    down fails while the report is built: one line, exit 2, and no output folder left behind
    (the report is built apart; it used to leave a folder of the figures made so far)."""
    (tmp_path / "t.csv").write_text("T,K\n1,2\n3,x\n")
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\nworkloads: [{path: t.csv}]\n")
    code, out, err = run(capsys, "report", "-o", str(tmp_path / "out"), "--config",
                         str(config), "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "t.csv: line 3: 'cached_tokens' must be an integer, got 'x'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "t.csv"]


def test_every_report_deployment_fits_or_is_marked() -> None:
    """The full-mode grid, the measured table, the what-ifs and the workload table print a
    number only for deployments whose weights fit; the others say 'does not fit'."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.memory_fit import fit_problem
    from kvroof.report.tables import build_tables
    from kvroof.report.workloads import report_deployments, report_workloads, workload_table

    config = ReportConfig(synthetic_requests=100)
    tables = {t.key: t for t in build_tables(config, REG)}
    grid = tables["full_grid"]
    for row, name in zip(grid.rows, config.paper_models, strict=True):
        for cell, pair in zip(row[1:], config.hardware, strict=True):
            dep = deployment(name, accelerator=pair.accelerator, link=pair.link, registry=REG,
                             **config.settings())
            assert (cell == "does not fit") == bool(fit_problem(dep)), (name, pair, cell)
    assert any(cell == "does not fit" for row in grid.rows for cell in row)  # 405B, DeepSeek
    for row in tables["what_if"].rows:  # placed on the first system where the model fits
        assert row[-1] != "does not fit"
    deps = report_deployments(config, REG, config.settings())
    rows = workload_table(report_workloads(config), deps).rows
    for row in rows:
        dep = next(d for d in deps if d.short_label == row[1])
        assert row[2].startswith("does not fit") == bool(fit_problem(dep))


def test_family_table_cells_are_the_librarys(report_dir: Path) -> None:
    """One row per attention family; each cell is kappa_crit alone / busy from the library, or
    'does not fit' (DeepSeek-V3's FP8 weights need more than 8 x 80 GB)."""
    from kvroof.cost.deployment import deployment
    from kvroof.cost.kappa import kappa_crit

    text = (report_dir / "report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| sliding window"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    alone = kappa_crit(deployment("gemma-3-27b", system="dgx-h100", tp=8, registry=REG), 128)
    busy = kappa_crit(deployment("gemma-3-27b", system="dgx-h100", tp=8, registry=REG,
                                 iteration_tokens=8192), 128)
    assert cells[6] == f"{float(alone.kappa_crit):.3g} / {float(busy.kappa_crit):.3g}"
    mla = next(line for line in text.splitlines() if line.startswith("| full attention, MLA"))
    assert mla.count("does not fit") == 3
    assert "kappa_crit 0" in text  # the linear hybrid's fixed state, in a busy iteration


def test_plot_families_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "f.png"
    code, _, err = run(capsys, "plot", "families", "--model", "gemma-3-27b", "--model",
                         "qwen3-next-80b-a3b", "--system", "dgx-h100", "--tp", "8",
                         "--other-system", "gh200", "-o", str(out_file))
    assert code == 0, err
    assert out_file.stat().st_size > 1000
    code, _, err = run(capsys, "plot", "families", "--system", "dgx-h100", "--other-system",
                       "nope", "-o", str(out_file))
    assert code == 2 and "--other-system: unknown system" in err

"""The report's planning section (kvroof.report.planning): `kvroof plan` for one model on two
hardware candidates serving the shipped Mooncake trace, as tables and figures in report.md,
report.html and report.json; its numbers are the plan's (checked against an independent call
of kvroof.plan with the inputs written out here); ``--no-planning`` and ``planning: null``
leave it out; bad ``planning:`` values are one-line errors naming the key."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import kvroof
from kvroof.cli import main
from kvroof.errors import KvroofError, SpecError
from kvroof.plan.inputs import SearchSettings
from kvroof.plan.result import Plan
from kvroof.report import ReportConfig, ReportResult, build_report, load_report_config
from kvroof.report.config import HardwarePair
from kvroof.report.planning import planning_section
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
TRACE = Path(kvroof.__file__).parent / "workload" / "data" / "mooncake_conversation_5min.jsonl"
SMALL = dict(models=["llama-3.1-8b"], paper_models=["llama-3.1-8b"],
             hardware=[HardwarePair(accelerator="h100-sxm", link="pcie-gen5-x16")],
             simulation=None, synthetic_requests=1000)
"""A small report (one model, one hardware pair, no serving simulation) with the default
planning section."""


def _recorded_rate() -> float:
    """The shipped trace's own rate, read here with json (not kvroof's reader): the requests
    after the first over the span of the timestamps (milliseconds in the file)."""
    lines = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    span = (lines[-1]["timestamp"] - lines[0]["timestamp"]) / 1e3
    return (len(lines) - 1) / span


def test_recorded_rate_of_the_shipped_trace() -> None:
    # by hand from the file: 918 requests, timestamps 0 ms to 297,000 ms -> 917 / 297 s
    assert _recorded_rate() == pytest.approx(917 / 297)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    return build_report(tmp_path_factory.mktemp("plan") / "report", ReportConfig(**SMALL), REG)


@pytest.fixture(scope="module")
def independent() -> Plan:
    """kvroof.plan with the section's defaults written out (docs/report.md): DeepSeek-V3 on
    an HGX H200 and an HGX B200 at TP 8, the chat preset, MLPerf's objectives (none given),
    a 25% tolerance, 500 GB beside each system's own host memory, the report's cost-model
    settings, and the trace's recorded rate as the target."""
    return kvroof.plan(
        "deepseek-v3", ["hgx-h200:8", "hgx-b200:8"], "chat", target_rps=_recorded_rate(),
        deployment={"compute_dtype": "bf16", "bandwidth_source": "sustained",
                    "link_efficiency": 1.0, "mla_mode": "expanded"},
        search=SearchSettings(tolerance=0.25, dram_sizes=(500e9,)), registry=REG)


def _table(report: ReportResult, key: str) -> Any:
    return next(t for t in report.tables if t.key == key)


def test_the_section_shows_the_plans_numbers(report: ReportResult, independent: Plan) -> None:
    table = _table(report, "planning")
    assert [row[0] for row in table.rows] == ["hgx-h200:8x1", "hgx-b200:8x1"]
    column = {name: i for i, name in enumerate(table.header)}
    for row, cand in zip(table.rows, independent.candidates, strict=True):
        assert cand.error is None and cand.verdict is not None and cand.curve is not None
        assert cand.without is not None and cand.with_offload is not None
        chosen = cand.curve.recommended or cand.with_offload
        assert row[column["verdict"]] == cand.verdict.sentence
        assert row[column["requests/s without offloading"]] == f"{cand.without.max_rps:.3g}"
        assert row[column["requests/s with offloading"]] == f"{chosen.max_rps:.3g}"
        assert chosen.at_max is not None and cand.without.at_max is not None
        assert row[column["host hit with"]] == f"{100 * chosen.at_max.hit_host:.1f}%"
        assert row[column["HBM hit without"]] == f"{100 * cand.without.at_max.hit_hbm:.1f}%"
        assert cand.threshold is not None
        setting = cand.threshold.setting
        assert row[column["reload from (cached tokens)"]] == \
            ("never" if setting is None else f"{setting:,}")
        # GPUs for the target by hand: ceil(target / (rate per replica)) replicas of TP 8
        for arm, name in ((cand.without, "GPUs without"), (chosen, "GPUs with")):
            gpus = math.ceil(_recorded_rate() / (arm.max_rps / cand.replicas)) * cand.tp
            assert row[column[name]] == f"{gpus:,}"
        assert row[column["cost per million tokens without / with"]] == "-"  # no prices
    # real numbers: both candidates meet the objectives at some rate
    assert all(float(row[column["requests/s without offloading"]]) > 0 for row in table.rows)
    basis = _table(report, "planning_basis")
    for row, cand in zip(basis.rows, independent.candidates, strict=True):
        v = cand.validity
        assert v is not None
        assert row[1:6] == [v.compute_model, v.engine, v.semantics, v.closest_case,
                            v.closest_error]
    assert "Rates: the highest Poisson arrival rate" in " ".join(table.notes)
    assert f"{independent.simulations:,} simulations" in " ".join(table.notes)


def test_the_section_is_on_the_pages(report: ReportResult) -> None:
    text = report.markdown.read_text(encoding="utf-8")
    assert "## Planning: KV offloading for your traffic" in text
    assert "### Planning: what the answers rest on" in text and "engine semantics" in text
    page = report.html.read_text(encoding="utf-8")
    for anchor in ("sec-planning", "planning", "planning_basis", "fig-planning-rate",
                   "fig-planning-memory", "fig-planning-threshold"):
        assert f'id="{anchor}"' in page
    for key in ("planning-rate", "planning-memory", "planning-threshold"):
        assert (report.folder / "figures" / f"{key}.png").stat().st_size > 1000
        assert (report.folder / "figures" / f"{key}.csv").is_file()
        assert f"figures/{key}.png" in text
    assert report.json is not None
    data = json.loads(report.json.read_text(encoding="utf-8"))
    keys = [t["key"] for t in data["tables"]]
    assert "planning" in keys and "planning_basis" in keys


def test_prices_and_a_target_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("planning: {model: llama-3.1-8b, candidates: [h100], tolerance: 0.5, "
                      "dram_sizes: [20 GB], slo_ttft: 2 s, slo_tpot: 200 ms, target_rps: 4, "
                      "gpu_hour_price: 2, dram_gb_price: 0.001}\nsimulation: null\n")
    loaded = load_report_config(config, REG)
    section = planning_section(loaded, REG)
    expected = kvroof.plan(
        "llama-3.1-8b", ["h100"], "chat", slo_ttft=2.0, slo_tpot=0.2, target_rps=4.0,
        gpu_hour_price=2.0, dram_gb_price=0.001,
        deployment={"compute_dtype": "bf16", "bandwidth_source": "sustained",
                    "link_efficiency": 1.0, "mla_mode": "expanded"},
        search=SearchSettings(tolerance=0.5, dram_sizes=(20e9,)), registry=REG)
    cand = expected.candidates[0]
    assert cand.sizing_without is not None and cand.sizing_with is not None
    row = section.tables[0].rows[0]
    cost = row[section.tables[0].header.index("cost per million tokens without / with")]
    without = cand.sizing_without.per_million_tokens
    with_ = cand.sizing_with.per_million_tokens
    assert without is not None and with_ is not None
    assert cost == f"{without:.3g} / {with_:.3g}"
    # the cost per million tokens by hand: one GPU at 2 per hour serving the highest meeting
    # rate of requests of the trace's mean prompt + output tokens
    assert cand.without is not None
    tokens = cand.without.max_rps * 3600 * (expected.reuse.mean_input
                                            + expected.reuse.mean_output)
    assert without == pytest.approx(2.0 / tokens * 1e6)
    assert "4 requests/s" in " ".join(section.tables[0].notes)


def test_no_planning_flag_and_null_key(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\npaper_models: [llama-3.1-8b]\n"
                      "hardware: [{accelerator: h100-sxm, link: pcie-gen5-x16}]\n"
                      "simulation: null\nsynthetic_requests: 1000\nnew_tokens: 256\n")
    code = main(["report", "-o", str(tmp_path / "out"), "--config", str(config), "--quiet",
                 "--no-planning"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and out.startswith("wrote "), err
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Planning" not in text and "T = 256" in text  # the config's own settings apply
    assert not list((tmp_path / "out" / "figures").glob("planning-*"))
    tables = json.loads((tmp_path / "out" / "report.json").read_text())["tables"]
    assert tables and not {t["key"] for t in tables} & {"planning", "planning_basis"}
    config.write_text("planning: null\n")
    assert load_report_config(config, REG).planning is None
    assert ReportConfig().planning is not None  # on by default


@pytest.mark.parametrize(("text", "fragment"), [
    ("planning: {colour: red}\n", "planning.colour: unknown key"),
    ("planning: {model: qwen9}\n", "planning.model: unknown model 'qwen9'"),
    ("planning: {candidates: []}\n", "planning.candidates: List should have at least 1 item"),
    ("planning: {candidates: [nope]}\n", "planning.candidates[0]: unknown accelerator 'nope'"),
    ("planning: {candidates: [h100, 'dgx-h100:0']}\n",
     "planning.candidates[1]: TP and replicas must be positive"),
    ("planning: {candidates: [h100, h100]}\n", "planning.candidates: h100 given twice"),
    ("planning: {candidates: ['dgx-h100:8']}\n",
     "planning.candidates[0]: deepseek-v3 does not fit on h100-sxm at TP 8"),
    ("planning: {candidates: ['dgx-h100:3']}\n", "planning.candidates[0]: tp: 3 does not divide"),
    ("planning: {slo_ttft: 2}\n", "planning.slo_ttft: expected a time with its unit"),
    ("planning: {slo_tpot: 50 parsecs}\n", "planning.slo_tpot: '50 parsecs': unknown unit"),
    ("planning: {slo_percentile: 0}\n", "planning.slo_percentile: Input should be greater than 0"),
    ("planning: {tolerance: 1}\n", "planning.tolerance: Input should be less than 1"),
    ("planning: {tolerance: .nan}\n", "planning.tolerance: must be a finite number"),
    ("planning: {dram_sizes: []}\n", "planning.dram_sizes: List should have at least 1 item"),
    ("planning: {dram_sizes: [500]}\n", "planning.dram_sizes[0]: expected a capacity with its "
                                        "unit"),
    ("planning: {target_rps: -1}\n", "planning.target_rps: Input should be greater than 0"),
    ("planning: {dram_gb_price: 1}\n", "planning.dram_gb_price: give gpu_hour_price too"),
    ("planning: {gpu_hour_price: -2}\n",
     "planning.gpu_hour_price: Input should be greater than or equal to 0"),
    ("planning: {workload: sharegpt}\n", "planning.workload: Input should be 'chat'"),
    ("planning: {skip_bad: maybe}\n", "planning.skip_bad: Input should be a valid boolean"),
])
def test_bad_planning_config(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_report_config(path, REG)
    message = str(info.value).replace(".[", "[")
    assert str(path) in message and fragment in message, message
    assert "\n" not in message


def test_a_plan_that_cannot_run_is_one_line(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    """Qwen3-235B-A22B's 32,768-token context is shorter than the trace's longest prompts:
    the plan stops (skip_bad would skip them), the report says so in one line and writes
    nothing."""
    config = tmp_path / "c.yaml"
    config.write_text("models: [llama-3.1-8b]\nsimulation: null\n"
                      "planning: {model: qwen3-235b-a22b}\n")
    code = main(["report", "-o", str(tmp_path / "out"), "--config", str(config), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("kvroof: error: planning: ") and "longer than the model's context " \
        "(32,768)" in err, err
    assert not (tmp_path / "out").exists()
    with pytest.raises(KvroofError, match=r"^planning: the config leaves"):
        from kvroof.report.planning import planning_arguments

        planning_arguments(ReportConfig(planning=None))

"""The report's serving-simulation section: present by default, set by `simulation:` in the
config, absent with `simulation: null`; bad keys are one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.report import build_report, load_report_config
from kvroof.simulate.paper import simulate_paper_load
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def test_simulation_section(tmp_path: Path) -> None:
    config_file = tmp_path / "report.yaml"
    config_file.write_text("models: [qwen3-235b-a22b]\nsimulation: {requests: 120, replicas: 2, "
                           "schedulers: [fifo], cache_policies: [load, recompute], "
                           "paper_load_models: [llama-3.1-70b]}\n")
    config = load_report_config(config_file, REG)
    result = build_report(tmp_path / "out", config, REG)
    table = next(t for t in result.tables if t.key == "simulation")
    assert [row[0] for row in table.rows] == ["fifo / load", "fifo / recompute"]
    paper = next(t for t in result.tables if t.key == "paper-loads")
    # one row per workload the paper served, the paper's figures in parentheses
    assert [row[:2] for row in paper.rows] == [["sharegpt", "llama-3.1-70b"],
                                               ["narrativeqa", "llama-3.1-70b"]]
    assert "(4,064)" in paper.rows[0][2] and "(196 W)" in paper.rows[0][6]
    # the served rate, not a TTFT that grows with the run: the simulation's own figure
    served = simulate_paper_load("sharegpt", "llama-3.1-70b", registry=REG).summary
    assert paper.header[5] == "served (requests/s)"
    assert paper.rows[0][5] == f"{served['throughput_rps']:.3g}"
    assert "120 requests" in table.notes[0]
    keys = [f.key for f in result.figures]
    assert "simulation-ttft" in keys and "simulation-timeline" in keys
    assert "Serving simulation" in (tmp_path / "out" / "report.md").read_text()


def test_simulation_by_default_and_null_leaves_it_out(tmp_path: Path) -> None:
    from kvroof.report.config import ReportConfig, SimulationReport

    assert ReportConfig().simulation == SimulationReport()  # the Mooncake slice, paper testbed
    config_file = tmp_path / "report.yaml"
    config_file.write_text("simulation: null\n")
    assert load_report_config(config_file, REG).simulation is None


@pytest.mark.parametrize(("text", "field"), [
    ("simulation: {scheduler: fifo}", "simulation.scheduler"),
    ("simulation: {model: llama-9}", "simulation.model"),
    ("simulation: {model: deepseek-v3, system: paper-testbed}", "simulation"),
    ("simulation: {trace: nowhere.jsonl}", "simulation.trace"),
    ("simulation: {paper_load_models: [llama-9]}", "simulation.paper_load_models[0]"),
    ("simulation: {paper_load_models: [deepseek-v3]}", "simulation.paper_load_models[0]"),
])
def test_bad_simulation_keys(tmp_path: Path, text: str, field: str) -> None:
    config_file = tmp_path / "report.yaml"
    config_file.write_text(text + "\n")
    with pytest.raises(SpecError) as error:
        load_report_config(config_file, REG)
    assert error.value.field == field, str(error.value)

"""The report's serving-simulation section: present by default, set by `simulation:` in the
config, absent with `simulation: null`; bad keys are one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.report import build_report, load_report_config
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def test_simulation_section(tmp_path: Path) -> None:
    config_file = tmp_path / "report.yaml"
    config_file.write_text("models: [qwen3-235b-a22b]\nsimulation: {requests: 120, replicas: 2, "
                           "schedulers: [fifo], cache_policies: [load, recompute]}\n")
    config = load_report_config(config_file, REG)
    result = build_report(tmp_path / "out", config, REG)
    table = next(t for t in result.tables if t.key == "simulation")
    assert [row[0] for row in table.rows] == ["fifo / load", "fifo / recompute"]
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
])
def test_bad_simulation_keys(tmp_path: Path, text: str, field: str) -> None:
    config_file = tmp_path / "report.yaml"
    config_file.write_text(text + "\n")
    with pytest.raises(SpecError) as error:
        load_report_config(config_file, REG)
    assert error.value.field == field, str(error.value)

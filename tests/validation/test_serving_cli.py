"""`kvroof validate --quantity serving`: the table per case with measured, simulated and ratio,
the error per case, valid JSON with the documented keys, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.validation.serving import validate_serving
from tests.validation.serving_fixture import write_small_case

# The keys docs/validation.md documents for `kvroof validate --quantity serving --json`.
TOP_KEYS = {"scale", "carry_caches", "stages", "statistics", "conditions", "left_out"}
STAGE_KEYS = {"source", "url", "condition", "label", "rating", "rate_rps", "where",
              "measured_saturated", "simulated_saturated", "requests", "duration_s", "hbm_hit",
              "host_hit", "preemptions", "replica_share_max", "metrics"}
CONDITION_KEYS = {"source", "url", "condition", "label", "assumptions", "wall_s", "cpu_s",
                  "router", "router_weights", "semantics"}
METRIC_KEYS = {"measured", "simulated", "ratio", "excluded"}
STATS_KEYS = {"condition", "saturated_included", "ratios", "median_ratio", "worst_ratio",
              "worst_where", "mape"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_table_shows_each_case_with_its_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write_small_case(tmp_path)
    code, out, _ = run(capsys, "validate", "--quantity", "serving", "--cases", str(tmp_path))
    assert code == 0
    assert "small-hbm-only: HBM only [B]" in out and "small-offload: with host DRAM" in out
    assert "TTFT measured" in out and "TPOT simulated" in out and "error per case" in out
    result = validate_serving([tmp_path])
    first = result.scores[0]
    ratio = first.ratio("mean_ttft")
    assert ratio is not None
    line = next(row for row in out.splitlines() if row.startswith("2/s"))
    assert f"{ratio:.3g}" in line and "50 ms" in line  # the measured 0.05 s of the file
    saturated = next(row for row in out.splitlines() if row.startswith("4/s"))
    assert saturated.rstrip().endswith(("M", "MS"))  # flagged, not dropped


def test_json_has_the_documented_keys(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    write_small_case(tmp_path)
    code, out, _ = run(capsys, "validate", "--quantity", "serving", "--cases", str(tmp_path),
                       "--json", "--stage-scale", "0.5")
    assert code == 0
    data = json.loads(out)
    assert set(data) == TOP_KEYS and data["scale"] == 0.5
    assert all(set(s) == STAGE_KEYS for s in data["stages"])
    assert all(set(m) == METRIC_KEYS for s in data["stages"] for m in s["metrics"].values())
    assert all(set(s) == STATS_KEYS for s in data["statistics"])
    assert all(set(c) == CONDITION_KEYS for c in data["conditions"])
    assert data["carry_caches"] is True
    # the router and weights of the small case file (tests/validation/serving_fixture.py)
    assert [c["router_weights"] for c in data["conditions"]] == [
        "queue=2,kv-utilization=2,prefix=3,host-prefix=0,no-hit-lru=0",
        "queue=1,kv-utilization=1,prefix=1,host-prefix=1,no-hit-lru=1"]
    assert {s["condition"] for s in data["statistics"]} == {"small-hbm-only", "small-offload",
                                                            "all"}


def test_fresh_stages_flag_runs_each_stage_alone(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write_small_case(tmp_path)
    code, out, _ = run(capsys, "validate", "--quantity", "serving", "--cases", str(tmp_path),
                       "--json", "--fresh-stages")
    assert code == 0
    data = json.loads(out)
    assert data["carry_caches"] is False
    fresh = validate_serving([tmp_path], carry_caches=False)
    assert [s["metrics"]["mean_ttft"]["simulated"] for s in data["stages"]] == pytest.approx(
        [s.simulated.mean_ttft for s in fresh.scores])


@pytest.mark.parametrize("argv", [("validate", "--stage-scale", "0.5"),
                                  ("validate", "--fresh-stages"),
                                  ("validate", "--quantity", "serving", "--case", "x"),
                                  ("validate", "--quantity", "serving", "--stage-scale", "0")])
def test_flags_that_do_not_apply_are_one_line_errors(
        capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err

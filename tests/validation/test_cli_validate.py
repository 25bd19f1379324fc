"""`kvroof validate`: the table, --case, --engine-profiles, valid JSON with the documented
keys, one-line errors; `kvroof plot validation`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.validation.predict import as_text
from kvroof.validation.run import validate


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _no_constants(name: str) -> float:
    raise AssertionError(f"JSON has a {name} token")


# The keys docs/validation.md documents for `kvroof validate --json`.
TOP_KEYS = {"cases", "statistics", "fits", "held_out_fits", "left_out", "kappa_crit"}
CASE_KEYS = {"id", "source", "url", "where", "quantity", "engine", "rating", "measured",
             "in_fit", "in_statistics", "excluded_reason", "before", "after", "held_out",
             "ratio_before", "ratio_after", "ratio_held_out"}
STATS_KEYS = {"quantity", "mode", "cases", "median_ratio", "worst_ratio", "worst_case", "mape"}
FIT_KEYS = {"overhead_s", "overhead_fitted", "share", "share_fitted", "cases", "sources",
            "max_error", "rms_log_error", "held_out_max_error"}


def test_json_is_valid_and_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--json")
    assert code == 0
    data = json.loads(out, parse_constant=_no_constants)
    assert set(data) == TOP_KEYS
    assert data["cases"] and all(set(case) == CASE_KEYS for case in data["cases"])
    assert all(set(s) == STATS_KEYS for s in data["statistics"])
    assert {s["mode"] for s in data["statistics"]} == {"before", "after", "held_out"}
    assert set(data["fits"]) == {"copy-engine", "copy-kernel"}
    assert all(set(fit) == FIT_KEYS for fit in data["fits"].values())
    assert all({"source", "what", "where", "value", "reason"} == set(item)
               for item in data["left_out"])
    result = validate()
    first = data["cases"][0]
    assert first["after"] == pytest.approx(result.results[0].after.value)


def test_table_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate")
    assert code == 0
    result = validate()
    for item in result.results:
        assert item.case.id in out
    assert "error per quantity" in out and "held out" in out
    assert "copy-engine: per-copy overhead" in out
    assert "kappa_crit: no case" in out


def test_engine_profiles_off_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    result = validate()
    item = next(r for r in result.results if r.case.id == "sglang-pr40278-gb300-kernel-32768")
    _, on, _ = run(capsys, "validate")
    _, off, _ = run(capsys, "validate", "--engine-profiles", "off")
    assert item.before.value is not None and item.after.value is not None
    before = as_text(item.before.value, item.case.quantity)
    after = as_text(item.after.value, item.case.quantity)
    line_on = next(line for line in on.splitlines() if line.startswith(item.case.id))
    line_off = next(line for line in off.splitlines() if line.startswith(item.case.id))
    assert after in line_on and before in line_off
    assert "before engine profiles (kvroof's defaults)" in off


def test_case_explains_each_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--case", "agentic-kvc-h20-cpu-hit-64k")
    assert code == 0
    assert "https://gitea.gahow.org/gahow/agentic-kvc" in out
    assert "engine vllm-0.12-offload" in out  # origin of the engine's settings
    assert "kvroof's default" in out  # origin of the settings before engine profiles
    assert "T = 16 computed, K = 65520 loaded" in out  # 16-token reuse blocks
    assert "model_specs/qwen3-30b-a3b.yaml" in out


def test_unknown_case_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", "--case", "agentic-kvc-h20-cpu-hit-65k")
    assert code == 2
    assert err.startswith("kvroof: error: --case: no case 'agentic-kvc-h20-cpu-hit-65k'")
    assert err.count("\n") == 1


def test_broken_user_cases_exit_2_naming_file_and_field(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "bad.yaml").write_text(
        "source: {title: T, url: 'https://example.com'}\n"
        "cases:\n  - {id: x, quantity: copy_time, rating: A, engine: memcpy-async, "
        "accelerator: h100, copy_size: 4 KiB, where: w, timed: t, measured: 3}\n")
    code, _, err = run(capsys, "validate", "--cases", str(folder))
    assert code == 2
    assert err.startswith(f"kvroof: error: {folder / 'bad.yaml'}: cases[0].measured: ")
    assert err.count("\n") == 1


def test_plot_validation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "validation.png"
    code, _, _ = run(capsys, "plot", "validation", "-o", str(target))
    assert code == 0 and target.stat().st_size > 1000


def test_case_json_has_the_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--case", "flexkv-pr193-h20-per-call", "--json")
    assert code == 0
    data = json.loads(out, parse_constant=_no_constants)
    assert set(data) >= CASE_KEYS
    inputs = {i["name"]: i for i in data["explain_after"]["inputs"]}
    assert inputs["per-copy overhead"]["from"].startswith("engine memcpy-async")
    assert data["explain_before"]["inputs"]


def test_a_case_file_for_a_folder_is_one_line(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """--cases takes folders: a file is named as such (it was said not to exist)."""
    path = tmp_path / "case.yaml"
    path.write_text("cases: []\n")
    code, _, err = run(capsys, "validate", "--cases", str(path))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"kvroof: error: {path}: is a file; give the folder"), err


def test_missing_cases_folder_is_one_line(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    code, _, err = run(capsys, "validate", "--cases", str(tmp_path / "nope"))
    assert code == 2
    assert err.startswith(f"kvroof: error: {tmp_path / 'nope'}: validation folder does not exist")
    assert err.count("\n") == 1

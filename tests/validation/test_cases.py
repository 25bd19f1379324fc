"""The validation cases: every file loads, every case names known specs and predicts a finite
number; broken files give one-line errors naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.specs.registry import Registry
from kvroof.validation.cases import (
    QUANTITIES,
    builtin_validation_dir,
    check_names,
    load_case_file,
    load_cases,
)
from kvroof.validation.run import MODES, validate

FILES = load_cases()
CASES = [(f, i, c) for f in FILES for i, c in enumerate(f.cases)]


def test_at_least_thirty_cases_over_the_quantities() -> None:
    assert len(CASES) >= 30
    quantities = {c.quantity for _, _, c in CASES}
    assert {"link_bandwidth", "copy_time", "layer_load_time", "prefill_compute_time",
            "ttft_with_prefix"} <= quantities
    assert quantities <= set(QUANTITIES)
    assert len({c.id for _, _, c in CASES}) == len(CASES)


def test_every_source_has_a_url_and_every_case_says_what_was_timed() -> None:
    for loaded in FILES:
        assert loaded.source.url.startswith("https://")
        for case in loaded.cases:
            assert case.where and case.timed
            if case.rating == "B":
                assert case.assumptions


@pytest.mark.parametrize(("loaded", "index", "case"), CASES, ids=[c.id for _, _, c in CASES])
def test_case_names_known_specs(registry: Registry, loaded: object, index: int,
                                case: object) -> None:
    from kvroof.validation.cases import Case

    assert isinstance(case, Case)
    registry.engine(case.engine)
    if case.model is not None:
        registry.model(case.model)
    assert case.system or case.accelerator or case.link
    for kind in ("system", "accelerator", "link"):
        name = getattr(case, kind)
        if name is not None:
            registry.get(kind, name)  # type: ignore[call-overload]


def test_check_names_accepts_the_builtin_cases(registry: Registry) -> None:
    check_names(FILES, registry)


def test_every_case_predicts_a_finite_number(registry: Registry) -> None:
    result = validate(registry=registry)
    assert len(result.results) == len(CASES)
    for item in result.results:
        for mode in MODES:
            prediction = item.prediction(mode)
            if prediction.value is None:
                assert prediction.problem and not item.in_statistics
                continue
            assert math.isfinite(prediction.value) and prediction.value > 0, (item.case.id, mode)
            assert prediction.inputs


GOOD = """\
source:
  title: My measurements
  url: https://example.com/mine
defaults:
  quantity: link_bandwidth
  rating: A
  engine: memcpy-async
  accelerator: h100
cases:
  - id: mine-1
    where: "table 1"
    timed: "one copy"
    measured: 40 GB/s
    copy_size: 16 MiB
"""


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    folder = tmp_path / "cases"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_a_good_user_file_loads(tmp_path: Path) -> None:
    loaded = load_case_file(write(tmp_path, GOOD))
    assert loaded.cases[0].measured == 40e9
    assert loaded.cases[0].copy_size == 16 * 2**20


@pytest.mark.parametrize(("old", "new", "field", "fragment"), [
    ("measured: 40 GB/s", "measured: 40", "cases[0].measured", "with its unit"),
    ("measured: 40 GB/s", "measured: 40 GB", "cases[0].measured", "is a capacity"),
    ("measured: 40 GB/s", "measured: 40 parsecs", "cases[0].measured", "unknown unit"),
    ("quantity: link_bandwidth", "quantity: latency", "cases[0].quantity", "link_bandwidth"),
    ("    copy_size: 16 MiB\n", "", "cases[0].copy_size", "a link_bandwidth case needs"),
    ("    where: \"table 1\"\n", "", "cases[0].where", "missing field"),
    ("    where: \"table 1\"\n", "    where: \"table 1\"\n    colour: red\n", "cases[0].colour",
     "unknown key"),
    ("  url: https://example.com/mine", "  url: example.com", "source.url", "pattern"),
    ("  rating: A\n", "  rating: A\n  id: shared\n", "defaults.id", "not a case field"),
    ("  rating: A\n", "  rating: B\n", "cases[0].assumptions",
     "a B-rated case lists what it assumes"),
    ("  accelerator: h100\n", "", "cases[0]", "give a system, an accelerator or a link"),
    ("cases:\n", "notes: x\ncases:\n", "notes", "unknown key"),
])
def test_broken_file_is_a_one_line_error(tmp_path: Path, old: str, new: str, field: str,
                                         fragment: str) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(SpecError) as info:
        load_case_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {field}"), message
    assert fragment in message, message


def test_error_names_a_field_set_in_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("engine: memcpy-async", "engine: memcpy-async\n  tp: 0"))
    with pytest.raises(SpecError, match=r"cases\[0\]\.tp: .*\(set in defaults\)"):
        load_case_file(path)


def test_malformed_yaml_and_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="malformed YAML at line"):
        load_case_file(write(tmp_path, GOOD + "  - id: [unclosed\n"))
    twice = GOOD + GOOD[GOOD.index("  - id"):]
    with pytest.raises(SpecError, match=r"cases\[1\]\.id: duplicate case id 'mine-1'"):
        load_case_file(write(tmp_path, twice))
    write(tmp_path, GOOD)
    write(tmp_path, GOOD, "again.yaml")
    with pytest.raises(SpecError, match=r"duplicate case id 'mine-1' \(also in"):
        load_cases([tmp_path / "cases"])


def test_unknown_names_are_errors_naming_the_field(tmp_path: Path, registry: Registry) -> None:
    path = write(tmp_path, GOOD.replace("engine: memcpy-async", "engine: vllm-9"))
    with pytest.raises(SpecError) as info:
        check_names([load_case_file(path)], registry)
    assert str(info.value).startswith(f"{path}: cases[0].engine: unknown engine 'vllm-9'")


def test_a_deployment_that_does_not_fit_is_left_out_with_the_reason(
        tmp_path: Path, registry: Registry) -> None:
    text = """\
source: {title: T, url: "https://example.com/t"}
cases:
  - id: too-big
    quantity: prefill_compute_time
    rating: A
    engine: vllm-0.12-offload
    model: llama-3.1-405b
    accelerator: h100
    new_tokens: 128
    cached_tokens: 0
    where: "row 1"
    timed: "TTFT"
    measured: 1 s
  - id: fits
    quantity: prefill_compute_time
    rating: A
    engine: vllm-0.12-offload
    model: llama-3.1-8b
    accelerator: h100
    new_tokens: 128
    where: "row 2"
    timed: "TTFT"
    measured: 20 ms
"""
    write(tmp_path, text)
    result = validate([tmp_path / "cases"], registry)
    big = result.result("too-big")
    assert big.after.value is None and big.before.value is None
    assert big.excluded_reason.startswith("does not fit: ")
    assert not big.in_statistics
    (stats,) = [s for s in result.stats_for("after") if s.quantity == "prefill_compute_time"]
    assert stats.cases == 1


def test_builtin_folder_is_the_repository_one() -> None:
    assert builtin_validation_dir().name == "validation"


def test_token_counts_are_whole(tmp_path: Path) -> None:
    """T = 1024.5 was accepted and priced; a case's token counts are whole numbers."""
    from kvroof.validation.cases import builtin_validation_dir

    text = (builtin_validation_dir() / "agentic-kvc-h20.yaml").read_text()
    assert "new_tokens: 1024\n" in text
    path = write(tmp_path, text.replace("new_tokens: 1024\n", "new_tokens: 1024.5\n", 1))
    with pytest.raises(SpecError, match=r"new_tokens: expected a whole number of tokens, got "
                                        r"1024\.5"):
        load_case_file(path)
    # infinity is no whole number either (it was an OverflowError traceback)
    path = write(tmp_path, text.replace("new_tokens: 1024\n", "new_tokens: .inf\n", 1))
    with pytest.raises(SpecError, match=r"new_tokens: expected a whole number of tokens, got inf"):
        load_case_file(path)

"""Serving case files: the built-in ones load and name known specs, the model-level loader skips
them, and malformed files are refused with one-line errors naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.specs.registry import Registry
from kvroof.validation.cases import load_cases
from kvroof.validation.serving_cases import (
    check_serving_names,
    load_serving_cases,
    load_serving_file,
)
from tests.validation.serving_fixture import SMALL_CASE, write_small_case


def test_builtin_serving_files_load_and_name_known_specs(registry: Registry) -> None:
    files = load_serving_cases()
    assert len(files) >= 2
    check_serving_names(files, registry)
    for loaded in files:
        assert loaded.source.url.startswith("https://")
        # replayed as run: llm-d's scoring router with the guide's weights, the kernel tables
        # where they cover the accelerator, the engine profile's offload store and write-back
        assert loaded.replay.router == "scoring" and loaded.replay.compute_model == "auto"
        assert loaded.replay.workload.arrival == "poisson"  # the profile's load.type
        for condition in loaded.conditions:
            assert condition.assumptions
            assert all(stage.where for stage in condition.stages)
            assert condition.router_weights is not None
            assert condition.write_back is None and condition.offload_store is None


def test_model_level_loader_skips_the_serving_folder(tmp_path: Path) -> None:
    builtin = load_cases()
    assert all("serving" not in f.path.parts[-2:-1] for f in builtin)
    write_small_case(tmp_path)
    with pytest.raises(SpecError, match="no case files"):  # the serving file is not read
        load_cases([tmp_path])


def test_small_file_loads_with_si_units(tmp_path: Path) -> None:
    loaded = load_serving_file(write_small_case(tmp_path))
    first = loaded.conditions[0].stages[0]
    assert first.mean_ttft == pytest.approx(0.05)  # "0.05 s"
    assert loaded.conditions[1].stages[0].mean_tpot == pytest.approx(0.005)  # "5 ms"
    assert loaded.conditions[1].dram_cache == 8 * 2**30  # "8 GiB"
    assert loaded.replay.workload.stage_duration == 4.0


BROKEN = [
    ("replay:\n  model: qwen3-0.6b", "replay:\n  model: qwen3-0.6b\n  modle: x", "replay.modle"),
    ("replay:\n  model: qwen3-0.6b", "replay:\n  modle: qwen3-0.6b", "replay.model"),
    ("mean_ttft: 0.05 s", "mean_ttft: 0.05", "conditions[0].stages[0].mean_ttft"),
    ("    dram_cache: 8 GiB\n", "", "conditions[1].dram_cache"),
    ('saturated: true, notes: "a test of a saturated stage"', "saturated: true",
     "conditions[0].stages[1].saturated"),
    ("{rate: 4,", "{rate: 1,", "conditions[0].stages"),
    ("id: small-offload", "id: small-hbm-only", "conditions[1].id"),
    ("    throughput: total\n", "    throughput: tokens\n", "replay.workload.throughput"),
    ("    assumptions: [\"a test\"]\n    excluded_metrics", "    excluded_metrics",
     "conditions[0].assumptions"),
    ("  accelerator: h100-sxm\n", "", "replay"),
    ("left_out:", "leftout:", "leftout"),
    ("{rate: 3, where: \"row 3\", mean_ttft: 0.03 s, mean_tpot: 5 ms, mean_e2e: 0.1 s}",
     "{rate: 3, where: \"row 3\"}", "conditions[1].stages[0]"),
    ("no-hit-lru=1", "no-hit-lru=x", "conditions[1].router_weights"),
    ("prefix=3", "prefixx=3", "conditions[0].router_weights"),
    ("  router: scoring\n", "  router: least-loaded\n", "conditions[0].router_weights"),
    ("    arrival: poisson\n", "    arrival: gamma\n", "replay.workload.arrival"),
    ("    stage_interval: 1.5 s\n", "    stage_interval: -1 s\n",
     "replay.workload.stage_interval"),
    ("  router: scoring\n", "  router: scoring\n  compute_model: exact\n",
     "replay.compute_model"),
]


@pytest.mark.parametrize(("old", "new", "field"), BROKEN, ids=[b[2] for b in BROKEN])
def test_malformed_files_give_one_line_errors(tmp_path: Path, old: str, new: str,
                                              field: str) -> None:
    assert old in SMALL_CASE
    path = write_small_case(tmp_path, SMALL_CASE.replace(old, new, 1))
    with pytest.raises(SpecError) as error:
        load_serving_file(path)
    message = str(error.value)
    assert "\n" not in message
    assert str(path) in message and field in message


def test_unknown_model_is_named(tmp_path: Path, registry: Registry) -> None:
    path = write_small_case(tmp_path, SMALL_CASE.replace("qwen3-0.6b", "no-such-model"))
    with pytest.raises(SpecError, match=r"replay\.model") as error:
        check_serving_names([load_serving_file(path)], registry)
    assert "\n" not in str(error.value)

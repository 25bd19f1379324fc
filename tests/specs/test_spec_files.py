"""Every built-in spec file: loads, sits in the right folder, has sources, unique names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvroof.specs.loader import load_spec_file
from kvroof.specs.registry import Registry, builtin_spec_dirs, normalize_name

FILES = sorted(p for d in builtin_spec_dirs() for p in d.rglob("*.yaml"))
FOLDER_KIND = {"accelerators": "accelerator", "links": "link", "systems": "system",
               "model_specs": "model", "engine_specs": "engine"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_file_loads_and_is_named_after_its_spec(path: Path) -> None:
    # held to the limits of a user's file (nesting, aliases, keys written twice) ...
    spec = load_spec_file(path)
    # ... which the registry's fast reading of packaged files leaves to this test
    assert load_spec_file(path, packaged=True) == spec
    assert spec.name == path.stem
    assert yaml.safe_load(path.read_text())["spec"] == FOLDER_KIND[path.parent.name]
    assert spec.sources, "every built-in spec cites its sources"
    assert "default" not in spec.sources, "built-in specs cite a source per field"
    for field, source in spec.sources.items():
        assert len(source) > 10, f"{field}: a source must say where the number comes from"


def test_names_and_aliases_are_unique(registry: Registry) -> None:
    for kind in ("accelerator", "link", "system", "model", "engine"):
        seen: dict[str, str] = {}
        for spec in registry.all(kind):  # type: ignore[arg-type]
            for key in (spec.name, *spec.aliases):
                norm = normalize_name(key)
                assert seen.setdefault(norm, spec.name) == spec.name, (kind, key)


def test_files_found() -> None:
    assert len(FILES) >= 20 + 9 + 7 + 24 + 8


@pytest.mark.parametrize(
    ("name", "bus_bits", "gbit_per_pin"),
    [("rtx-4090", 384, 21), ("rtx-pro-6000-server", 512, 28), ("t4", 256, 10)],
)
def test_gddr_bandwidth_is_bus_times_rate(
    registry: Registry, name: str, bus_bits: int, gbit_per_pin: int
) -> None:
    """GDDR cards: bandwidth = bus width x per-pin rate / 8 (1008, 1792, 320 GB/s)."""
    assert registry.accelerator(name).hbm_bandwidth == bus_bits * gbit_per_pin * 1e9 / 8


def test_a100_40gb_differs_from_80gb_only_in_memory(registry: Registry) -> None:
    small, large = registry.accelerator("a100-sxm-40gb"), registry.accelerator("a100-sxm")
    assert small.peak_compute == large.peak_compute
    assert small.peak_compute_sparse == large.peak_compute_sparse
    assert (small.tdp, small.host_link, small.scale_up_bandwidth) == (
        large.tdp, large.host_link, large.scale_up_bandwidth)
    assert (small.hbm_capacity, small.hbm_bandwidth) == (40e9, 1555e9)


def test_sparse_peaks_are_twice_dense_where_printed(registry: Registry) -> None:
    """NVIDIA prints 2:4-sparse figures at 2x dense; the new cards keep that relation, except
    the RTX PRO 6000's family-wide "4,000 AI TOPS" (FP4, at the Workstation clock) and GB300's
    FP4, where NVIDIA prints 1,440 sparse against 1,080 dense PFLOPS per 72 GPUs (4/3, not 2)."""
    for name in ("rtx-4090", "a100-sxm-40gb", "gb300"):
        acc = registry.accelerator(name)
        for dtype, sparse in acc.peak_compute_sparse.items():
            ratio = 4 / 3 if (name, dtype) == ("gb300", "fp4") else 2
            assert sparse == pytest.approx(ratio * acc.peak_compute[dtype], rel=1e-3), (name, dtype)
    assert registry.accelerator("t4").peak_compute_sparse == {}


def test_builtins_validate_and_refer_to_known_specs() -> None:
    """The registry validates a built-in when first used (start-up time); here every one is
    validated, its name matches the file's, and every accelerator, link and tier it names
    exists."""
    registry = Registry(use_env=False)
    registry.check_builtins()
    for kind in ("accelerator", "link", "system", "model", "engine"):
        for entry in registry.entries(kind):  # type: ignore[arg-type]
            assert entry.spec == load_spec_file(entry.path), entry  # type: ignore[arg-type]

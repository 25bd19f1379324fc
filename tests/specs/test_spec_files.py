"""Every built-in spec file: loads, sits in the right folder, has sources, unique names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvroof.specs.loader import load_spec_file
from kvroof.specs.registry import Registry, builtin_spec_dirs, normalize_name

FILES = sorted(p for d in builtin_spec_dirs() for p in d.rglob("*.yaml"))
FOLDER_KIND = {"accelerators": "accelerator", "links": "link", "systems": "system",
               "model_specs": "model"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_file_loads_and_is_named_after_its_spec(path: Path) -> None:
    spec = load_spec_file(path)
    assert spec.name == path.stem
    assert yaml.safe_load(path.read_text())["spec"] == FOLDER_KIND[path.parent.name]
    assert spec.sources, "every built-in spec cites its sources"
    assert "default" not in spec.sources, "built-in specs cite a source per field"
    for field, source in spec.sources.items():
        assert len(source) > 10, f"{field}: a source must say where the number comes from"


def test_names_and_aliases_are_unique(registry: Registry) -> None:
    for kind in ("accelerator", "link", "system", "model"):
        seen: dict[str, str] = {}
        for spec in registry.all(kind):  # type: ignore[arg-type]
            for key in (spec.name, *spec.aliases):
                norm = normalize_name(key)
                assert seen.setdefault(norm, spec.name) == spec.name, (kind, key)


def test_files_found() -> None:
    assert len(FILES) >= 14 + 9 + 7 + 23

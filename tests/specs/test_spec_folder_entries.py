"""Entries of a spec folder that are not regular files (issue 24, item 13): a FIFO, a symlink
loop, a broken link and a link to a device are each skipped with a warning naming the path
and what it is, never opened (opening a FIFO would block) and never skipped silently."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from kvroof.specs.folders import builtin_files, not_a_file
from kvroof.specs.registry import Registry, SpecWarning

GOOD = """spec: link
name: my-link
kind: pcie
peak_bandwidth: 64 GB/s
sources: {default: "test"}
"""


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "good.yaml").write_text(GOOD, encoding="utf-8")
    return folder


def _load(folder: Path) -> tuple[Registry, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = Registry([folder], use_env=False)
    return registry, [str(w.message) for w in caught if issubclass(w.category, SpecWarning)]


@pytest.mark.parametrize("kind", ["fifo", "loop", "broken", "device"])
def test_a_special_entry_is_skipped_with_a_warning(tmp_path: Path, kind: str) -> None:
    folder = _folder(tmp_path)
    entry = folder / "odd.yaml"
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "loop":
        os.symlink(folder / "other.yaml", entry)
        os.symlink(entry, folder / "other.yaml")
    elif kind == "broken":
        os.symlink(tmp_path / "missing.yaml", entry)
    else:
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero here")
        os.symlink("/dev/zero", entry)
    expected = {"fifo": "a FIFO", "loop": "a symlink loop", "broken": "a broken link",
                "device": "a device"}[kind]
    registry, messages = _load(folder)
    assert f"skipped: {entry}: {expected}, not a spec file" in messages
    assert registry.link("my-link").peak_bandwidth == 64e9  # the good file still loads
    assert any(expected in problem for problem in registry.problems)


def test_a_regular_file_and_a_link_to_one_are_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    os.symlink(folder / "good.yaml", tmp_path / "link.yaml")
    assert not_a_file(folder / "good.yaml") is None
    assert not_a_file(tmp_path / "link.yaml") is None


def test_a_spec_path_that_is_a_fifo_is_not_a_folder(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _, messages = _load(fifo)
    assert messages == [f"skipped: {fifo}: not a folder"]


def test_every_builtin_spec_file_is_a_regular_file() -> None:
    assert builtin_files() and all(not_a_file(path) is None for _, path in builtin_files())

"""Registries: built-ins, user folders, KVROOF_SPEC_PATH, overrides, aliases, suggestions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvroof.cost.deployment import deployment
from kvroof.errors import KvroofError, UnknownNameError
from kvroof.specs.registry import ENV_VAR, Registry, SpecWarning, default_registry

USER_GPU = """\
spec: accelerator
name: {name}
display_name: {display}
vendor: me
aliases: [{alias}]
peak_compute: {{bf16: 123 TFLOPS}}
hbm_capacity: 24 GB
hbm_bandwidth: 1 TB/s
tdp: 300 W
host_link: pcie-gen4-x16
sources: {{default: my own measurements}}
"""


def user_folder(tmp_path: Path, name: str = "my-gpu", display: str = "Mine",
                alias: str = "mygpu") -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(USER_GPU.format(name=name, display=display, alias=alias))
    return folder


def test_lookup_is_case_insensitive_and_accepts_aliases(registry: Registry) -> None:
    by_name = registry.model("qwen3-235b-a22b")
    assert registry.model("QWEN3-235B-A22B") is by_name
    assert registry.model("Qwen/Qwen3-235B-A22B") is by_name
    assert registry.model("qwen3_235b_a22b") is by_name


def test_unknown_name_lists_close_names(registry: Registry) -> None:
    with pytest.raises(UnknownNameError) as info:
        registry.model("qwen3-235b-a23b")
    assert "qwen3-235b-a22b" in info.value.suggestions
    assert "\n" not in str(info.value)


def test_user_folder_adds_specs(tmp_path: Path) -> None:
    registry = Registry([user_folder(tmp_path)], use_env=False)
    assert registry.accelerator("MYGPU").peak_compute["bf16"] == 123e12
    assert "h100-sxm" in registry.names("accelerator")  # built-ins stay


def test_env_var_adds_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv(ENV_VAR, os.pathsep.join([str(user_folder(tmp_path)), str(other)]))
    assert default_registry().accelerator("my-gpu").vendor == "me"
    monkeypatch.delenv(ENV_VAR)
    assert "my-gpu" not in default_registry().names("accelerator")


def test_user_spec_overrides_builtin_with_warning(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, name="h100-sxm", display="My H100", alias="my-h100")
    with pytest.warns(SpecWarning, match="overrides"):
        registry = Registry([folder], use_env=False)
    entry = registry.entry("accelerator", "h100-sxm")
    assert entry.spec.display_name == "My H100"
    assert not entry.builtin


def test_override_takes_over_the_builtin_aliases(tmp_path: Path) -> None:
    """The built-in h100-sxm's alias is h100 (hardware_specs/accelerators/h100-sxm.yaml); a user
    h100-sxm that lists only its own alias still answers to h100, and the warning stays."""
    assert "h100" in Registry(use_env=False).accelerator("h100-sxm").aliases
    folder = user_folder(tmp_path, name="h100-sxm", display="My H100", alias="my-h100")
    with pytest.warns(SpecWarning, match="overrides"):
        registry = Registry([folder], use_env=False)
    assert registry.accelerator("h100").display_name == "My H100"  # unknown before
    assert registry.accelerator("my-h100").display_name == "My H100"


def test_an_alias_claimed_elsewhere_is_not_inherited(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, name="h100-sxm", display="My H100", alias="my-h100")
    user_folder(tmp_path, name="other-gpu", display="Other", alias="h100")
    with pytest.warns(SpecWarning, match="overrides"):
        registry = Registry([folder], use_env=False)
    assert registry.accelerator("h100").display_name == "Other"
    assert registry.accelerator("h100-sxm").display_name == "My H100"


def test_a_dropped_override_leaves_the_builtin(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, name="h100-sxm", display="My H100", alias="my-h100")
    text = (folder / "h100-sxm.yaml").read_text().replace("pcie-gen4-x16", "nope")
    (folder / "h100-sxm.yaml").write_text(text)
    with pytest.warns(SpecWarning):
        registry = Registry([folder], use_env=False)
    (problem,) = registry.problems
    assert "host_link: no link named 'nope'" in problem and "stays" in problem
    builtin = registry.entry("accelerator", "h100")
    assert builtin.builtin and builtin.spec.name == "h100-sxm"


def test_a_file_as_spec_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvroof.cli import main

    path = user_folder(tmp_path) / "my-gpu.yaml"
    with pytest.warns(SpecWarning):
        registry = Registry([path], use_env=False)
    assert registry.problems == [f"{path}: is a file; a spec path names a folder of spec files "
                                 "(put the file in a folder and give the folder)"]
    assert main(["--spec-path", str(path), "list", "links"]) == 0
    err = capsys.readouterr().err
    assert err == f"kvroof: warning: skipped: {registry.problems[0]}\n"


def test_broken_user_folder_does_not_hide_builtins(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "bad.yaml").write_text("spec: model\nname: [unclosed\n")
    (folder / "dangling.yaml").write_text(
        USER_GPU.format(name="ghost", display="G", alias="g").replace("pcie-gen4-x16", "nope")
    )
    with pytest.warns(SpecWarning, match="skipped"):
        registry = Registry([folder, tmp_path / "missing"], use_env=False)
    assert len(registry.problems) == 3
    assert any("malformed YAML" in p for p in registry.problems)
    assert any("host_link: no link named 'nope'" in p for p in registry.problems)
    assert any("does not exist" in p for p in registry.problems)
    assert "ghost" not in registry.names("accelerator")
    assert len(registry.names("model")) == 38


def test_registry_contents(registry: Registry) -> None:
    assert len(registry.names("model")) == 38
    assert {"a100-sxm", "a100-sxm-40gb", "a100-pcie", "h100-sxm", "h100-pcie", "h200", "gh200",
            "b200", "gb200", "b300", "gb300", "l40s", "rtx-4090", "rtx-pro-6000-server", "t4",
            "h20", "mi300x", "mi325x", "mi355x", "gaudi3"} <= set(registry.names("accelerator"))
    assert {"pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "pcie-gen6-x16", "nvlink-c2c",
            "cxl2-x8-expander", "nvme-gen4-x4", "nvme-gen5-x4", "rdma-400g"} <= set(
        registry.names("link"))
    assert len(registry.names("system")) >= 7


def test_t4_has_no_bf16_and_says_so(registry: Registry) -> None:
    """Turing has no BF16 tensor path: the default compute dtype is refused with the dtypes the
    T4 has, and fp16 works."""
    with pytest.raises(KvroofError, match="t4 has no published peak for bf16"):
        deployment("llama-3.2-1b", accelerator="t4", registry=registry)
    dep = deployment("llama-3.2-1b", accelerator="t4", compute_dtype="fp16", registry=registry)
    assert dep.peak_compute == 65e12


def test_values_from_files_are_cut_in_messages(tmp_path: Path) -> None:
    """A reference 10,000 characters long is shown cut to 80 (errors.short_repr)."""
    folder = user_folder(tmp_path, alias="a" * 10_000)
    text = (folder / "my-gpu.yaml").read_text().replace("pcie-gen4-x16", "x" * 10_000)
    (folder / "my-gpu.yaml").write_text(text)
    with pytest.warns(SpecWarning):
        registry = Registry([folder], use_env=False)
    (problem,) = registry.problems
    assert "host_link: no link named 'xxx" in problem and len(problem) < len(str(folder)) + 150


def test_the_json_copy_of_the_builtins_is_current() -> None:
    """kvroof.specs.builtin_cache: the committed copy holds exactly what the YAML files parse
    to, under their current digest (else run ``python -m kvroof.specs.builtin_cache``)."""
    from kvroof.specs.builtin_cache import CACHE_FILE, cached_data
    from kvroof.specs.loader import MAX_SPEC_BYTES
    from kvroof.specs.registry import builtin_files
    from kvroof.yamlfiles import load_packaged_yaml

    files = builtin_files()
    cached = cached_data(files, MAX_SPEC_BYTES)
    assert cached is not None, (f"{CACHE_FILE.name} is out of date: run "
                                "python -m kvroof.specs.builtin_cache")
    for name, path in files:  # the same values, keys in the same order (show prints them)
        parsed = load_packaged_yaml(path, MAX_SPEC_BYTES, "spec files")
        assert json.dumps(cached[name]) == json.dumps(parsed), name


def test_json_round_trip_keeps_values_and_order() -> None:
    from kvroof.specs.builtin_cache import survives_json

    assert survives_json({"b": 1, "a": [1.5, "x", None, {"z": True}]})
    # an int that JSON would keep, but a tuple, a date, NaN or a non-string key it would not
    import datetime

    for changed in ({"a": (1, 2)}, {"a": datetime.date(2026, 1, 1)}, {"a": float("nan")},
                    {1: "x"}):
        assert not survives_json(changed), changed


@pytest.mark.parametrize("damage", ["stale", "corrupt", "missing", "a file fewer"])
def test_a_stale_or_broken_copy_falls_back_to_the_yaml(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    """The copy can only make start-up slower: out of date, unreadable, absent or listing other
    files, the registry parses the YAML and holds the same specs."""
    import json

    from kvroof.specs import builtin_cache

    copy = tmp_path / "builtin_specs.json"
    original = json.loads(builtin_cache.CACHE_FILE.read_text(encoding="utf-8"))
    h100 = next(name for name in original["files"] if name.endswith("/h100-sxm.yaml"))
    if damage == "stale":  # the digest of other bytes, with a wrong value inside
        original["files"][h100]["name"] = "not-h100"
        original["digest"] = "0" * 40
        copy.write_text(json.dumps(original))
    elif damage == "corrupt":
        copy.write_text("{not json")
    elif damage == "a file fewer":
        del original["files"][h100]
        copy.write_text(json.dumps(original))
    monkeypatch.setattr(builtin_cache, "CACHE_FILE", copy)
    registry = Registry(use_env=False)
    assert registry.accelerator("h100").name == "h100-sxm"
    assert registry.names("model") == Registry(use_env=False).names("model")


def test_the_yaml_readers_still_import_from_userfiles() -> None:
    """They moved to kvroof.yamlfiles (so that PyYAML loads only when needed); the old
    import path keeps working."""
    from kvroof import userfiles, yamlfiles

    assert userfiles.load_yaml_file is yamlfiles.load_yaml_file
    assert userfiles.YAML_LOADERS is yamlfiles.YAML_LOADERS
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        userfiles.nothing  # noqa: B018


def test_unknown_name_mentions_skipped_files(tmp_path: Path) -> None:
    """A name that may live in a user file the registry had to skip: the error says files were
    skipped (it only suggested an unrelated built-in)."""
    (tmp_path / "e.yaml").write_text("spec: engine\nname: my-eng\nfoo: [\n")
    with pytest.warns(SpecWarning, match="skipped"):
        reg = Registry([tmp_path], use_env=False)
    with pytest.raises(UnknownNameError, match=r"1 of your spec files or folders could not be "
                                               r"read: see the warning above"):
        reg.engine("my-eng")
    with pytest.raises(UnknownNameError) as info:
        Registry(use_env=False).engine("my-eng")
    assert "skipped" not in str(info.value)

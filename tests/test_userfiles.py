"""Untrusted YAML and JSON: size, encoding, nesting, alias bombs and duplicate keys give one
line naming the file (and the key), with both YAML loaders; error messages never show a
user's value whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.errors import SpecError, clip, short_repr
from kvroof.report import load_report_config
from kvroof.specs.loader import MAX_SPEC_BYTES, load_spec_file
from kvroof.specs.registry import Registry, SpecWarning
from kvroof.userfiles import (
    ALIAS_NODE_BUDGET,
    MAX_DEPTH,
    YAML_LOADERS,
    check_depth,
    load_json_file,
    load_yaml_file,
    load_yaml_text,
)

REG = Registry(use_env=False)
LOADERS = sorted(YAML_LOADERS)


def test_both_loaders_are_checked() -> None:
    """PyYAML's pure-Python loader always exists; this venv's PyYAML has libyaml too (the
    project's CI installs the manylinux wheel, which bundles it)."""
    assert LOADERS == ["libyaml", "python"]


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The classic 'billion laughs': each level holds ``width`` aliases of the one below, so
    display_name stands for width**levels strings (9**9 = 387,420,489 here)."""
    lines = ["spec: model", "name: bomb", "a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    lines.append("display_name: [" + ", ".join([f"*a{levels - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def expect(text: str, loader: str, fragment: str, field: str = "") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_yaml_text(text, "f.yaml", loader)
    message = str(info.value)
    assert message.startswith("f.yaml: ") and "\n" not in message, message
    assert fragment in message, message
    assert info.value.field == field, message
    return info.value


@pytest.mark.parametrize("loader", LOADERS)
def test_alias_bomb_is_refused(loader: str) -> None:
    # a0 = 10 nodes, a1 stands for 9 x 10 = 90 through aliases, a2 for 9 x 91 = 819 (909 in
    # all); the first alias of a3 (line 6) brings 820 more, past the budget of 1000
    assert ALIAS_NODE_BUDGET == 1000
    expect(alias_bomb(), loader, "aliases stand for more than 1,000 nodes (a YAML alias bomb?)"
           "; write the values out (line 6)", "a3[0]")


@pytest.mark.parametrize("loader", LOADERS)
def test_small_aliases_and_merge_keys_still_work(loader: str) -> None:
    text = ("base: &b {tp: 8, dtype: bf16}\nother:\n  <<: *b\n  tp: 4\n"
            "list: &l [1, 2]\nagain: *l\n")
    data = load_yaml_text(text, "f.yaml", loader)
    assert data["other"] == {"tp": 4, "dtype": "bf16"}  # the explicit key wins over the merge
    assert data["again"] == [1, 2]


@pytest.mark.parametrize("loader", LOADERS)
def test_recursive_alias_is_refused(loader: str) -> None:
    expect("x: &a [1, *a]\n", loader, "alias *a refers to a node that contains it", "x[1]")


@pytest.mark.parametrize("loader", LOADERS)
def test_deep_nesting_is_refused(loader: str) -> None:
    text = "display_name: " + "[" * 600 + "]" * 600 + "\n"
    error = expect(text, loader, f"nested deeper than {MAX_DEPTH} levels (line 1)",
                   clip("display_name" + "[0]" * MAX_DEPTH))
    assert len(error.field) <= 80
    # exactly MAX_DEPTH levels (the top-level mapping is the first) is fine
    ok = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert load_yaml_text(ok, "f.yaml", loader) is not None


@pytest.mark.parametrize("loader", LOADERS)
def test_duplicate_keys_name_both_lines(loader: str) -> None:
    expect("spec: link\nname: a\nname: b\n", loader,
           "name: key written twice (lines 2 and 3); YAML would keep only the last value",
           "name")
    expect("attention:\n  kind: gqa\n  heads: 2\n  kind: mla\n", loader,
           "lines 2 and 4", "attention.kind")
    expect("hardware:\n  - {accelerator: h100, accelerator: b200}\n", loader,
           "lines 2 and 2", "hardware[0].accelerator")
    # equal after YAML resolution: 0x10 and 16 are the same integer key
    expect("0x10: a\n16: b\n", loader, "lines 1 and 2", "16")


@pytest.mark.parametrize("loader", LOADERS)
def test_other_malformed_yaml(loader: str) -> None:
    expect("a: 1\n---\nb: 2\n", loader, "more than one YAML document (a second '---') (line 2)")
    expect("a: " + "1" * 5000 + "\n", loader, "malformed YAML")
    expect("a: [1\n", loader, "malformed YAML at line")
    assert load_yaml_text("", "f.yaml", loader) is None


def test_size_and_encoding(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("#" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(SpecError, match=r"big.yaml: larger than 1 MiB, the limit for spec files"):
        load_spec_file(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(SpecError, match=r"bin.yaml: not UTF-8 text \(byte 0x89 at offset 0\)"):
        load_yaml_file(binary, 100, "test files")
    gz = tmp_path / "gz.yaml"
    gz.write_bytes(b"\x1f\x8b\x08\x00\xff")
    with pytest.raises(SpecError, match=r"gzip-compressed\?"):
        load_yaml_file(gz, 100, "test files")
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml_file(bom, 100, "test files") == {"a": 1}


def test_bad_user_specs_are_skipped_and_builtins_stay(tmp_path: Path) -> None:
    """The README: a broken file is skipped with a one-line warning and never hides the
    built-in specs. Each of these used to hang, or end every command with a traceback."""
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    (tmp_path / "deep.yaml").write_text(
        "spec: model\nname: deep\ndisplay_name: " + "[" * 600 + "]" * 600 + "\n")
    (tmp_path / "dup.yaml").write_text("spec: link\nname: a\nname: b\n")
    with pytest.warns(SpecWarning) as caught:
        registry = Registry([tmp_path], use_env=False)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3 and all("\n" not in m for m in messages)
    assert "bomb.yaml: a3[0]: its aliases" in messages[0]
    assert "deep.yaml: display_name[0]" in messages[1] and "nested deeper" in messages[1]
    assert "dup.yaml: name: key written twice" in messages[2]
    assert registry.names("model") == REG.names("model")


def test_cli_survives_bad_user_specs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "deep.yaml").write_text("spec: link\nname: x\nx: " + "[" * 2000 + "\n")
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    assert main(["--spec-path", str(tmp_path), "show", "accelerator", "h100"]) == 0
    out, err = capsys.readouterr()
    assert "H100" in out and err.count("kvroof: warning: skipped:") == 2
    assert err.count("\n") == 2


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"\x00\x01\xfe\xff" * 10, "not UTF-8 text (byte 0xfe at offset 2)"),
        (b"tp: 8\ntp: 4\n", "tp: key written twice (lines 1 and 2)"),
        (alias_bomb().split("display_name")[0].encode() + b"models: *a8\n", "a3[0]: its aliases"),
        (b"models: " + b"[" * 100 + b"]" * 100 + b"\n", "nested deeper than 32 levels"),
        (b"# " + b"x" * (1 << 20) + b"\n", "larger than 1 MiB, the limit for report configs"),
    ],
)
def test_bad_report_config_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 content: bytes, fragment: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(SpecError, match=None) as info:
        load_report_config(path, REG)
    assert str(info.value).startswith(f"{path}: ") and fragment in str(info.value)
    assert main(["report", "--config", str(path), "-o", str(tmp_path / "out")]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_json_files(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"a": 1, "a": 2}')
    with pytest.raises(SpecError, match=r"c.json: a: key written twice in one object"):
        load_json_file(path, 100, "test files")
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SpecError, match=r"nested deeper than 32 levels"):
        load_json_file(path, 1 << 20, "test files")
    path.write_text("[" * 40 + "]" * 40)  # parsed, then found too deep
    with pytest.raises(SpecError, match=r"nested deeper than 32 levels"):
        load_json_file(path, 1 << 20, "test files")
    path.write_text("1" * 5000)
    with pytest.raises(SpecError, match=r"c.json: not valid JSON \(Exceeds the limit"):
        load_json_file(path, 1 << 20, "test files")
    path.write_text('{"a": [1, {"b": null}]}')
    assert load_json_file(path, 100, "test files") == {"a": [1, {"b": None}]}


def test_check_depth() -> None:
    assert check_depth({"a": [1, 2]}, 2) is None
    assert check_depth({"a": [[1]]}, 2) == 3
    deep: list[object] = []
    for _ in range(5000):  # deeper than the interpreter could recurse into
        deep = [deep]
    assert check_depth(deep) == MAX_DEPTH + 1


def test_short_repr_is_bounded() -> None:
    assert short_repr("abc") == "'abc'"
    text = short_repr("x" * 10_000)
    assert len(text) == 80 and "..." in text
    assert short_repr(10**5000) == "<an integer of 16610 bits>"  # bit_length of 10**5000
    nested: list[object] = [list(range(1000))] * 1000
    assert len(short_repr(nested)) <= 80
    assert clip("abcdef", 5) == "ab..."

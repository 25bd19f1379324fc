"""`kvroof list` and `kvroof show`: output shape, JSON keys, and exit status 2 on bad names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvroof.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_models_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "models")
    assert code == 0
    for name in ("qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b", "kimi-k2"):
        assert name in out


@pytest.mark.parametrize("kind", ["models", "accelerators", "links", "systems"])
def test_list_json(capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, out, _ = run(capsys, "list", kind, "--json")
    assert code == 0
    items = json.loads(out)
    assert isinstance(items, list) and items
    assert all("name" in item for item in items)


def test_show_model_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "model", "deepseek-ai/DeepSeek-V3", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["name"] == "deepseek-v3"
    assert data["kv_bytes_per_token"] == 70_272  # 61 x (512 + 64) x 2 B (MLA latent + RoPE key)
    assert data["params_total"] == pytest.approx(671e9, rel=0.01)  # published 671B
    assert data["params_active"] > data["params_active_without_embedding"]


def test_show_accelerator_human(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "accelerator", "H100")
    assert code == 0
    assert "989.4 TFLOP/s" in out
    assert "3.35 TB/s" in out


@pytest.mark.parametrize(
    "argv",
    [["show", "model", "qwen4"], ["show", "accelerator", "h1000"], ["show", "system", "nope"]],
)
def test_unknown_name_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "unknown" in err and "Traceback" not in err


def test_spec_path_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        "spec: link\nname: my-link\nkind: pcie\npeak_bandwidth: 10 GB/s\n"
        "sources: {default: test}\n"
    )
    code, out, _ = run(capsys, "--spec-path", str(tmp_path), "show", "link", "my-link", "--json")
    assert code == 0
    assert json.loads(out)["peak_bandwidth"] == 10e9


def test_console_script_runs_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvroof.cli", "show", "model", "nope"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("kvroof: error: unknown model 'nope'")
    assert "Traceback" not in result.stderr


def test_example_user_spec_folder(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).resolve().parent.parent / "examples" / "my_specs"
    code, out, _ = run(capsys, "--spec-path", str(folder), "show", "accelerator", "lab-gpu",
                       "--json")
    assert code == 0
    assert json.loads(out)["peak_compute"]["bf16"] == 794.5e12


def test_show_model_layer_groups(capsys: pytest.CaptureFixture[str]) -> None:
    """The layer groups of a hybrid, with their bytes and state (test_kv.FAMILIES derives them:
    12 full layers x 2,048 B per token; 36 Gated DeltaNet layers x 2,146,304 B per request)."""
    code, out, _ = run(capsys, "show", "model", "qwen3-next-80b-a3b", "--json")
    assert code == 0
    data = json.loads(out)
    groups = {g["group"]: g for g in data["layer_groups"]}
    assert (groups["full"]["layers"], groups["full"]["kv_bytes_per_token_per_layer"]) == (12, 2048)
    assert (groups["linear"]["layers"], groups["linear"]["state_bytes_per_layer"]) == (
        36, 2_146_304)
    assert data["state_bytes_per_request"] == 36 * 2_146_304
    code, out, _ = run(capsys, "show", "model", "gemma-4-e2b")
    assert code == 0
    assert "layer group shared_full (derived)" in out and "reuses the KV of layer 14" in out


def test_list_and_show_engines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "engines"]) == 0
    out = capsys.readouterr().out
    for name in ("vllm-0.11-offload", "vllm-0.12-offload", "lmcache-0.3", "sglang-hicache",
                 "tensorrt-llm"):
        assert name in out
    assert main(["show", "engine", "vllm-0.12", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "vllm-0.12-offload"
    assert data["copy_layout"] == "per-block" and data["block_tokens"] == 16
    assert "link_share" in data["sources"]
